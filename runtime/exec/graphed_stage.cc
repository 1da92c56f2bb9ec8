#include "runtime/exec/graphed_stage.h"

#include <torch/torch.h>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "runtime/exec/autocast.h"
#include "runtime/exec/weight_grads.h"
#include "schedules/error.h"

namespace pplab {
namespace {

bool IsFloat(const at::Tensor& t) { return t.defined() && at::isFloatingType(t.scalar_type()); }

// The bytes of the storages of `lists`' tensors not yet in `seen`, which
// takes them.
Bytes NewStorageBytes(std::initializer_list<const TensorList*> lists, std::set<const void*>& seen) {
  Bytes total = 0;
  for (const TensorList* list : lists) {
    for (const at::Tensor& t : *list) {
      if (!t.defined() || !t.has_storage()) continue;
      if (seen.insert(t.storage().unsafeGetStorageImpl()).second) total += static_cast<Bytes>(t.storage().nbytes());
    }
  }
  return total;
}

// A microbatch in flight: the static tensors its two graphs read and write.
struct Slot {
  TensorList inputs;        // the forward's inputs; the floating-point ones are leaves that require grad
  TensorList outputs;       // as the forward left them
  std::vector<bool> diff;   // by output: whether it carries a gradient back
  TensorList output_grads;  // one per differentiable output
  // The floating-point inputs' gradients, then the trained parameters'
  // (undefined where the output does not depend on one).
  TensorList grads;
  std::unique_ptr<GraphCapture> forward, backward;
  bool busy = false;
};

// The inputs' dtypes and shapes: a slot replays only for inputs like those
// it was captured with.
using ShapeKey = std::vector<std::pair<int, std::vector<int64_t>>>;
ShapeKey KeyOf(const TensorList& inputs) {
  ShapeKey key;
  for (const at::Tensor& t : inputs) {
    if (!t.defined()) throw Error("graphed stage: an undefined input");
    key.emplace_back(static_cast<int>(t.scalar_type()), t.sizes().vec());
  }
  return key;
}

class GraphedStageImpl;

// The graphed forward as one autograd node: its backward replays the slot's
// backward graph.
struct GraphedFunction : public torch::autograd::Function<GraphedFunction> {
  static TensorList forward(torch::autograd::AutogradContext* ctx, GraphedStageImpl* stage, at::TensorList inputs,
                            at::TensorList params);
  static TensorList backward(torch::autograd::AutogradContext* ctx, TensorList grad_outputs);
};

class GraphedStageImpl final : public GraphedStage {
 public:
  GraphedStageImpl(std::unique_ptr<Stage> inner, std::shared_ptr<GraphBackend> backend)
      : inner_(std::move(inner)), backend_(std::move(backend)) {
    if (backend_ == nullptr) throw Error("graphed stage: no graph backend");
    for (auto& [name, p] : inner_->NamedParameters()) {
      if (!p.requires_grad()) continue;
      params_.push_back(p);
      names_.push_back(name);
    }
  }

  TensorList Forward(const TensorList& inputs) override {
    if (!at::GradMode::is_enabled() || DeferWeightGradsScope::Current() != nullptr) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++stats_.eager_forwards;
      }
      return inner_->Forward(inputs);
    }
    return GraphedFunction::apply(this, at::TensorList(inputs), at::TensorList(params_));
  }
  std::vector<std::pair<std::string, at::Tensor>> NamedParameters() override { return inner_->NamedParameters(); }
  MessageSpec ReceivedSpec(bool forward, int64_t rows, int64_t seq_len) const override {
    return inner_->ReceivedSpec(forward, rows, seq_len);
  }
  GraphStats Stats() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }
  Bytes HeldBytes() const override { return Stats().slot_bytes; }

  // The forward of one microbatch: a free slot for inputs like these (a new
  // capture when there is none), its inputs copied in, its forward
  // replayed. Returns the slot, busy until Backward.
  Slot& ReplayForward(const at::TensorList& inputs) {
    std::lock_guard<std::mutex> lock(mu_);
    const TensorList list(inputs.begin(), inputs.end());
    std::vector<std::unique_ptr<Slot>>& slots = slots_[KeyOf(list)];
    Slot* slot = nullptr;
    for (auto& s : slots) {
      if (!s->busy) {
        slot = s.get();
        break;
      }
    }
    if (slot == nullptr) {
      slots.push_back(Capture(list));
      slot = slots.back().get();
      ++stats_.slots;
      stats_.slot_bytes += HeldBytes(*slot);
    }
    slot->busy = true;
    for (size_t i = 0; i < list.size(); ++i) slot->inputs[i].detach().copy_(list[i]);
    slot->forward->Replay();
    ++stats_.forward_replays;
    return *slot;
  }

  // The backward of the microbatch in `slot`; frees it. Returns the
  // gradients in the order GraphedFunction::backward gives them: the
  // floating-point inputs' (copies), then the parameters'.
  TensorList ReplayBackward(Slot& slot, const TensorList& grad_outputs) {
    std::lock_guard<std::mutex> lock(mu_);
    CheckGradsInPlace();
    size_t k = 0;
    for (size_t i = 0; i < slot.outputs.size(); ++i) {
      if (!slot.diff[i]) continue;
      at::Tensor& into = slot.output_grads[k++];
      if (i < grad_outputs.size() && grad_outputs[i].defined()) {
        into.copy_(grad_outputs[i]);
      } else {
        into.zero_();
      }
    }
    slot.backward->Replay();
    ++stats_.backward_replays;
    TensorList out;
    size_t g = 0;
    for (const at::Tensor& in : slot.inputs) {
      if (!IsFloat(in)) continue;
      const at::Tensor& grad = slot.grads[g++];
      // The next forward replayed in this slot may reuse the memory the
      // backward left this in, while a send still reads it: a copy.
      out.push_back(grad.defined() ? grad.clone() : grad);
    }
    for (; g < slot.grads.size(); ++g) out.push_back(slot.grads[g]);
    slot.busy = false;
    return out;
  }

 private:
  // What `slot` holds: its inputs and output gradients, made outside its
  // graphs, and its graphs' pool, or where they have none the outputs and
  // gradients the capture left.
  static Bytes HeldBytes(const Slot& slot) {
    std::set<const void*> seen;
    Bytes held = NewStorageBytes({&slot.inputs, &slot.output_grads}, seen);
    const std::optional<Bytes> forward = slot.forward->PoolBytes(), backward = slot.backward->PoolBytes();
    if (forward && backward) return held + *forward + *backward;
    return held + NewStorageBytes({&slot.outputs, &slot.grads}, seen);
  }

  // The Llama stages' projections sum their weights' products into .grad
  // themselves (models/projections.h), inside the captured backward, so a
  // replay writes where each .grad was at the capture. Every trained
  // parameter gets its .grad before the first capture, and it must stay
  // there, zeroed in place (as flat buffers and AdamW::ZeroGrad do).
  void PlaceGrads() {
    if (!grad_places_.empty()) return;
    for (at::Tensor& p : params_) {
      if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
      grad_places_.push_back(p.grad().data_ptr());
    }
  }
  void CheckGradsInPlace() const {
    for (size_t i = 0; i < params_.size() && i < grad_places_.size(); ++i) {
      if (!params_[i].grad().defined() || params_[i].grad().data_ptr() != grad_places_[i]) {
        throw Error("graphed stage: the gradient of " + names_[i] +
                    " is no longer where the backward graph was captured to write it (zero gradients in place, "
                    "not by resetting them)");
      }
    }
  }

  std::unique_ptr<Slot> Capture(const TensorList& inputs) {
    PlaceGrads();
    auto slot = std::make_unique<Slot>();
    for (const at::Tensor& t : inputs) {
      slot->inputs.push_back(IsFloat(t) ? t.detach().clone().requires_grad_(true) : t.clone());
    }
    Slot* s = slot.get();
    auto forward = [this, s] {
      at::AutoGradMode grad(true);
      s->outputs = inner_->Forward(s->inputs);
    };
    auto backward = [this, s] {
      TensorList outs, wrt;
      for (size_t i = 0; i < s->outputs.size(); ++i) {
        if (s->diff[i]) outs.push_back(s->outputs[i]);
      }
      for (const at::Tensor& t : s->inputs) {
        if (IsFloat(t)) wrt.push_back(t);
      }
      for (const at::Tensor& p : params_) wrt.push_back(p);
      s->grads = torch::autograd::grad(outs, wrt, s->output_grads, /*retain_graph=*/false, /*create_graph=*/false,
                                       /*allow_unused=*/true);
    };
    // Which outputs carry gradients, and their static gradients, once the
    // forward has shown its outputs (the warm-up's, which a capture then
    // allocates again with the same shapes).
    auto set_output_grads = [s] {
      s->diff.clear();
      s->output_grads.clear();
      for (const at::Tensor& t : s->outputs) {
        const bool d = IsFloat(t) && t.requires_grad();
        s->diff.push_back(d);
        if (d) s->output_grads.push_back(torch::zeros_like(t));
      }
      if (s->output_grads.empty()) throw Error("graphed stage: no output of the forward carries a gradient");
    };
    const char* doing = "running it once before the capture";
    // Under bf16 the captures cast the weights themselves, whatever cache of
    // casts is alive around this forward (AutocastCacheOff says why).
    AutocastCacheOff no_cached_casts;
    try {
      backend_->WarmUp([&] {
        forward();
        set_output_grads();
        backward();
      });
      doing = "capturing the forward";
      slot->forward = backend_->Capture(forward, nullptr);
      doing = "capturing the backward";
      slot->backward = backend_->Capture(backward, slot->forward.get());
    } catch (const std::exception& e) {
      // LibTorch's messages carry a stack after their first line.
      std::string what = e.what();
      what = what.substr(0, what.find('\n'));
      throw Error(std::string("graphed stage: ") + doing + " failed: " + what);
    }
    return slot;
  }

  std::unique_ptr<Stage> inner_;
  std::shared_ptr<GraphBackend> backend_;
  std::vector<at::Tensor> params_;        // the trained ones
  std::vector<std::string> names_;        // theirs
  std::vector<const void*> grad_places_;  // where their .grad was at the first capture
  std::map<ShapeKey, std::vector<std::unique_ptr<Slot>>> slots_;
  mutable std::mutex mu_;
  GraphStats stats_;
};

TensorList GraphedFunction::forward(torch::autograd::AutogradContext* ctx, GraphedStageImpl* stage,
                                    at::TensorList inputs, at::TensorList params) {
  (void)params;  // inputs of the node, so that their gradients reach them; the graphs use them directly
  Slot& slot = stage->ReplayForward(inputs);
  ctx->saved_data["stage"] = static_cast<int64_t>(reinterpret_cast<intptr_t>(stage));
  ctx->saved_data["slot"] = static_cast<int64_t>(reinterpret_cast<intptr_t>(&slot));
  TensorList out;
  TensorList fixed;
  for (size_t i = 0; i < slot.outputs.size(); ++i) {
    if (slot.diff[i]) {
      out.push_back(slot.outputs[i].detach());
    } else {
      // Passed on (the mask) or not differentiable: a copy of its own.
      out.push_back(slot.outputs[i].defined() ? slot.outputs[i].detach().clone() : slot.outputs[i]);
      if (out.back().defined()) fixed.push_back(out.back());
    }
  }
  if (!fixed.empty()) ctx->mark_non_differentiable(fixed);
  return out;
}

TensorList GraphedFunction::backward(torch::autograd::AutogradContext* ctx, TensorList grad_outputs) {
  auto* stage = reinterpret_cast<GraphedStageImpl*>(static_cast<intptr_t>(ctx->saved_data["stage"].toInt()));
  auto* slot = reinterpret_cast<Slot*>(static_cast<intptr_t>(ctx->saved_data["slot"].toInt()));
  const TensorList grads = stage->ReplayBackward(*slot, grad_outputs);
  // One entry per forward argument tensor (the stage pointer counts one):
  // the inputs' (undefined for integer ones), then the parameters'.
  TensorList out;
  out.emplace_back();  // the stage
  size_t g = 0;
  for (const at::Tensor& in : slot->inputs) out.push_back(IsFloat(in) ? grads[g++] : at::Tensor());
  for (; g < grads.size(); ++g) out.push_back(grads[g]);
  return out;
}

class RerunCapture final : public GraphCapture {
 public:
  explicit RerunCapture(std::function<void()> work) : work_(std::move(work)) {}
  // As a CUDA graph's replay, which runs the casts its capture made: none
  // taken from a cache.
  void Replay() override {
    AutocastCacheOff no_cached_casts;
    work_();
  }

 private:
  std::function<void()> work_;
};

class RerunBackend final : public GraphBackend {
 public:
  void WarmUp(const std::function<void()>& work) override { work(); }
  std::unique_ptr<GraphCapture> Capture(const std::function<void()>& work, const GraphCapture*) override {
    work();
    return std::make_unique<RerunCapture>(work);
  }
};

}  // namespace

std::unique_ptr<GraphBackend> MakeRerunGraphBackend() { return std::make_unique<RerunBackend>(); }

bool GraphStandInRequested() {
  const char* v = std::getenv("PPLAB_TEST_GRAPHS");
  return v != nullptr && std::string(v) == "rerun";
}

std::unique_ptr<GraphBackend> MakeGraphBackend(const c10::Device& device) {
  if (GraphStandInRequested()) return MakeRerunGraphBackend();
  return MakeCudaGraphBackend(device.has_index() ? device.index() : 0);
}

std::unique_ptr<GraphedStage> MakeGraphedStage(std::unique_ptr<Stage> inner, std::shared_ptr<GraphBackend> backend) {
  return std::make_unique<GraphedStageImpl>(std::move(inner), std::move(backend));
}

#ifndef PPLAB_WITH_CUDA
bool CudaGraphsBuilt() { return false; }
std::unique_ptr<GraphBackend> MakeCudaGraphBackend(int) {
  throw Error("CUDA graphs: this pplab was built against a LibTorch without CUDA");
}
#endif

}  // namespace pplab
