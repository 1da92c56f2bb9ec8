#include "runtime/train/adamw.h"

#include <torch/torch.h>

#include <cmath>

namespace pplab {

AdamW::AdamW(std::vector<std::pair<std::string, at::Tensor>> params, AdamWConfig config)
    : params_(std::move(params)), config_(config) {}

void AdamW::ZeroGrad() {
  for (auto& [name, p] : params_) {
    if (p.grad().defined()) p.mutable_grad().zero_();
  }
}

void AdamW::Step(double lr) {
  torch::NoGradGuard no_grad;
  // Multi-tensor (foreach) updates: on a GPU each line is a few fused kernels
  // over all parameters instead of one kernel per parameter. Parameters are
  // grouped by their step count (one group unless a resumed checkpoint mixed
  // counts), since the bias corrections depend on it. The arithmetic is the
  // per-parameter update's, in the same order.
  struct Group {
    std::vector<at::Tensor> params, grads, exp_avg, exp_avg_sq;
  };
  std::map<int64_t, Group> groups;
  for (auto& [name, p] : params_) {
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

}  // namespace pplab
