#include "runtime/train/adamw.h"

#include <torch/torch.h>
#include <torch/version.h>

#include <algorithm>
#include <cmath>
#include <tuple>

#include "schedules/error.h"

// LibTorch's fused AdamW kernel: CUDA since 2.0, CPU since 2.4.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
#define PPLAB_HAS_FUSED_ADAMW 1
#endif

namespace pplab {

std::pair<int64_t, int64_t> ShardRange(int64_t size, const OptimizerShard& shard) {
  // Shares begin at multiples of kShareAlignment elements: LibTorch 2.x's
  // fused AdamW kernel (CPU) updates a tensor in vector chunks from its start
  // and its last elements one at a time, which round differently (in the
  // 2.6 chroot, shares cut anywhere gave second moments that differed from
  // the whole buffer's). Aligned, each element of a share is updated as in
  // the whole.
  int64_t share = (size + shard.count - 1) / shard.count;
  share = (share + kShareAlignment - 1) / kShareAlignment * kShareAlignment;
  const int64_t begin = std::min(size, share * shard.index);
  return {begin, std::min(size, begin + share)};
}

AdamW::AdamW(std::vector<std::pair<std::string, at::Tensor>> params, AdamWConfig config, std::vector<FlatBuffer> flats,
             OptimizerShard shard)
    : params_(std::move(params)), config_(config) {
  std::map<std::string, at::Tensor> by_name(params_.begin(), params_.end());
  for (FlatBuffer& buffer : flats) {
    if (!buffer.defined()) continue;
    Flat f;
    f.sharded = shard.count > 1;
    std::tie(f.begin, f.end) =
        f.sharded ? ShardRange(buffer.values.numel(), shard) : std::pair<int64_t, int64_t>{0, buffer.values.numel()};
    f.exp_avg = torch::zeros({f.end - f.begin}, buffer.values.options());
    f.exp_avg_sq = torch::zeros({f.end - f.begin}, buffer.values.options());
    for (const std::string& name : buffer.names) {
      flat_of_[name] = flats_.size();
      f.params.push_back(by_name.at(name));
    }
    f.buffer = std::move(buffer);
    flats_.push_back(std::move(f));
  }
}

bool AdamW::Fused() const {
#ifdef PPLAB_HAS_FUSED_ADAMW
  return config_.fused;
#else
  return false;
#endif
}

void AdamW::ZeroGrad() {
  for (Flat& f : flats_) {
    f.buffer.grads.zero_();
    for (size_t i = 0; i < f.params.size(); ++i) {
      at::Tensor& g = f.params[i].mutable_grad();
      if (!IsViewAt(g, f.buffer.grads, f.buffer.offsets[i])) {
        g = f.buffer.grads.narrow(0, f.buffer.offsets[i], f.params[i].numel()).view(f.params[i].sizes());
      }
    }
  }
  for (auto& [name, p] : params_) {
    if (flat_of_.count(name) == 0 && p.grad().defined()) p.mutable_grad().zero_();
  }
}

std::vector<int64_t> AdamW::SyncFlatState() {
  torch::NoGradGuard no_grad;
  std::vector<int64_t> steps;
  for (Flat& f : flats_) {
    int64_t shared = -2;  // none seen yet
    for (size_t i = 0; i < f.params.size(); ++i) {
      const int64_t offset = f.buffer.offsets[i], n = f.params[i].numel();
      AdamWState& s = state_[f.buffer.names[i]];
      for (auto [mine, flat] : {std::pair<at::Tensor*, at::Tensor*>{&s.exp_avg, &f.exp_avg},
                                std::pair<at::Tensor*, at::Tensor*>{&s.exp_avg_sq, &f.exp_avg_sq}}) {
        if (f.sharded) {
          // Whole moments put in place (a checkpoint loaded, or gathered for
          // one): keep this replica's share of them, then drop them, which
          // is the memory the sharding saves. Undefined: the share is current.
          if (!mine->defined()) continue;
          const int64_t lo = std::max(offset, f.begin), hi = std::min(offset + n, f.end);
          if (lo < hi)
            flat->narrow(0, lo - f.begin, hi - lo).copy_(mine->reshape({-1}).narrow(0, lo - offset, hi - lo));
          *mine = at::Tensor();
          continue;
        }
        if (IsViewAt(*mine, *flat, offset)) continue;
        at::Tensor view = flat->narrow(0, offset, n).view(f.params[i].sizes());
        if (mine->defined()) {
          view.copy_(*mine);
        } else {
          view.zero_();
        }
        *mine = view;
      }
      shared = shared == -2 || shared == s.step ? s.step : -1;
    }
    steps.push_back(shared < 0 ? -1 : shared);
  }
  return steps;
}

void AdamW::Step(double lr) {
  torch::NoGradGuard no_grad;
  // Tensors updated together, grouped by their step count (one group unless
  // a resumed checkpoint mixed counts), since the bias corrections depend on
  // it. A flat buffer whose parameters share a count goes in whole.
  struct Group {
    std::vector<at::Tensor> params, grads, exp_avg, exp_avg_sq;
  };
  std::map<int64_t, Group> groups;
  const std::vector<int64_t> flat_steps = SyncFlatState();
  for (size_t b = 0; b < flats_.size(); ++b) {
    const Flat& f = flats_[b];
    if (flat_steps[b] < 0 && f.sharded) {
      // Mixed step counts in a sharded buffer (a checkpoint that gave some
      // parameters no moments): each parameter's part of the share, with
      // its own count. Every parameter's count advances on every replica.
      for (size_t i = 0; i < f.params.size(); ++i) {
        const int64_t offset = f.buffer.offsets[i], n = f.params[i].numel();
        const int64_t step = ++state_[f.buffer.names[i]].step;
        const int64_t lo = std::max(offset, f.begin), hi = std::min(offset + n, f.end);
        if (lo >= hi) continue;
        Group& g = groups[step];
        g.params.push_back(f.buffer.values.narrow(0, lo, hi - lo));
        g.grads.push_back(f.buffer.grads.narrow(0, lo, hi - lo));
        g.exp_avg.push_back(f.exp_avg.narrow(0, lo - f.begin, hi - lo));
        g.exp_avg_sq.push_back(f.exp_avg_sq.narrow(0, lo - f.begin, hi - lo));
      }
      continue;
    }
    if (flat_steps[b] < 0) continue;
    for (const std::string& name : f.buffer.names) ++state_[name].step;
    if (f.end == f.begin) continue;  // an empty share
    Group& g = groups[flat_steps[b] + 1];
    g.params.push_back(f.buffer.values.narrow(0, f.begin, f.end - f.begin));
    g.grads.push_back(f.buffer.grads.narrow(0, f.begin, f.end - f.begin));
    g.exp_avg.push_back(f.exp_avg);
    g.exp_avg_sq.push_back(f.exp_avg_sq);
  }
  for (auto& [name, p] : params_) {
    const auto flat = flat_of_.find(name);
    if (flat != flat_of_.end() && (flat_steps[flat->second] >= 0 || flats_[flat->second].sharded)) continue;
    if (!p.grad().defined()) continue;
    AdamWState& s = state_[name];
    if (!s.exp_avg.defined()) {
      s.exp_avg = torch::zeros_like(p);
      s.exp_avg_sq = torch::zeros_like(p);
    }
    Group& g = groups[++s.step];
    g.params.push_back(p);
    g.grads.push_back(p.grad());
    g.exp_avg.push_back(s.exp_avg);
    g.exp_avg_sq.push_back(s.exp_avg_sq);
  }
  for (auto& [step, g] : groups) {
#ifdef PPLAB_HAS_FUSED_ADAMW
    if (config_.fused) {
      // One kernel for the whole update; it reads the step count from a
      // float tensor per parameter, on the parameter's device.
      std::vector<at::Tensor> steps;
      for (const at::Tensor& p : g.params) {
        steps.push_back(torch::full({}, static_cast<double>(step), p.options().dtype(torch::kFloat32)));
      }
      at::_fused_adamw_(g.params, g.grads, g.exp_avg, g.exp_avg_sq, {}, steps, lr, config_.beta1, config_.beta2,
                        config_.weight_decay, config_.eps, /*amsgrad=*/false, /*maximize=*/false);
      continue;
    }
#endif
    // Multi-tensor (foreach): on a GPU each line is a few fused kernels over
    // all tensors of the group. The arithmetic is the per-parameter
    // update's, in the same order.
    const double bias1 = 1 - std::pow(config_.beta1, static_cast<double>(step));
    const double bias2 = 1 - std::pow(config_.beta2, static_cast<double>(step));
    at::_foreach_mul_(g.params, 1 - lr * config_.weight_decay);  // decoupled weight decay
    at::_foreach_mul_(g.exp_avg, config_.beta1);
    at::_foreach_add_(g.exp_avg, g.grads, 1 - config_.beta1);
    at::_foreach_mul_(g.exp_avg_sq, config_.beta2);
    at::_foreach_addcmul_(g.exp_avg_sq, g.grads, g.grads, 1 - config_.beta2);
    std::vector<at::Tensor> denom = at::_foreach_sqrt(g.exp_avg_sq);
    at::_foreach_div_(denom, std::sqrt(bias2));
    at::_foreach_add_(denom, config_.eps);
    at::_foreach_addcdiv_(g.params, g.exp_avg, denom, -lr / bias1);
  }
}

void AdamW::KeepShares() { SyncFlatState(); }

std::vector<AdamW::ShardPart> AdamW::ShardParts() {
  std::vector<ShardPart> parts;
  for (const Flat& f : flats_) {
    if (f.sharded) parts.push_back({f.buffer, f.begin, f.end, f.exp_avg, f.exp_avg_sq});
  }
  return parts;
}

void AdamW::SetWholeMoments(size_t b, at::Tensor exp_avg, at::Tensor exp_avg_sq) {
  size_t seen = 0;
  for (Flat& f : flats_) {
    if (!f.sharded || seen++ != b) continue;
    for (size_t i = 0; i < f.params.size(); ++i) {
      const int64_t offset = f.buffer.offsets[i], n = f.params[i].numel();
      AdamWState& s = state_[f.buffer.names[i]];
      s.exp_avg = exp_avg.narrow(0, offset, n).view(f.params[i].sizes());
      s.exp_avg_sq = exp_avg_sq.narrow(0, offset, n).view(f.params[i].sizes());
    }
    return;
  }
  throw Error("AdamW: no sharded flat buffer " + std::to_string(b));
}

int64_t AdamW::StateBytes() const {
  int64_t bytes = 0;
  auto add = [&bytes](const at::Tensor& t) {
    if (t.defined()) bytes += t.numel() * static_cast<int64_t>(t.element_size());
  };
  for (const Flat& f : flats_) {
    add(f.exp_avg);
    add(f.exp_avg_sq);
  }
  for (const auto& [name, s] : state_) {
    if (flat_of_.count(name) > 0) continue;  // views into a flat buffer's, or dropped
    add(s.exp_avg);
    add(s.exp_avg_sq);
  }
  return bytes;
}

}  // namespace pplab
