// AdamW with its state kept by parameter name, so that a checkpoint taken
// with one partition loads into another. The update is torch.optim.AdamW's
// (decoupled weight decay, bias-corrected moments); a test checks it against
// torch::optim::AdamW.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "runtime/train/flat_params.h"

namespace pplab {

struct AdamWConfig {
  double beta1 = 0.9, beta2 = 0.99, eps = 1e-8, weight_decay = 0.1;
  // Use LibTorch's fused AdamW kernel (at::_fused_adamw_, LibTorch 2.4 and
  // later, CPU and CUDA) where it exists; otherwise, or when false, the
  // multi-tensor (foreach) update.
  bool fused = true;
};

struct AdamWState {
  at::Tensor exp_avg, exp_avg_sq;  // same shape as the parameter
  int64_t step = 0;
};

// The sharded optimizer (ZeRO stage 1, Megatron-LM's distributed optimizer):
// `count` data-parallel replicas hold the same parameters and, after their
// gradients are summed, the same gradients; replica `index` updates only its
// share of each flat buffer and keeps the moments of that share alone, 1 /
// count of them. The replicas then put their shares together
// (runtime/train/trainer.cc). {0, 1}: not sharded.
struct OptimizerShard {
  int index = 0;
  int count = 1;
};

// The elements [begin, end) of a flat buffer of `size` elements that shard
// `shard` updates: contiguous shares of ceil(size / count) elements rounded
// up to a multiple of kShareAlignment, the last shorter, and empty ones past
// the buffer's end (a small buffer falls to the first replicas).
constexpr int64_t kShareAlignment = 128;
std::pair<int64_t, int64_t> ShardRange(int64_t size, const OptimizerShard& shard);

class AdamW {
 public:
  // `flats`: buffers (FlattenParameters) holding some of `params`. Their
  // parameters' moments then live in flat buffers of the same layout, and a
  // buffer whose parameters share one step count is updated as one tensor.
  // State() still holds each parameter's moments, as views; a state put in
  // their place (a checkpoint being loaded) is copied into the buffer at the
  // next Step.
  // With `shard` (count > 1), each flat buffer's update and moments are
  // this replica's share of it (ShardRange); parameters outside the flat
  // buffers are updated whole.
  AdamW(std::vector<std::pair<std::string, at::Tensor>> params, AdamWConfig config, std::vector<FlatBuffer> flats = {},
        OptimizerShard shard = {});
  // One update with learning rate `lr` from the parameters' .grad (a
  // parameter without a gradient is left alone), as multi-tensor (foreach)
  // operations, or one fused kernel, over all parameters.
  void Step(double lr);
  // Zeroes every gradient: one kernel per flat buffer, whose parameters get
  // their view back if something replaced it.
  void ZeroGrad();
  const std::vector<std::pair<std::string, at::Tensor>>& Params() const { return params_; }
  std::map<std::string, AdamWState>& State() { return state_; }
  // Whether Step runs LibTorch's fused kernel (else foreach).
  bool Fused() const;

  // Sharded: per flat buffer, the share this replica updates and the moments
  // it keeps for it (each end - begin elements).
  struct ShardPart {
    FlatBuffer buffer;
    int64_t begin = 0, end = 0;
    at::Tensor exp_avg, exp_avg_sq;
  };
  std::vector<ShardPart> ShardParts();
  // Sharded: gives each parameter of flat buffer `b` (as ShardParts lists
  // them) its whole moments, views into `exp_avg` and `exp_avg_sq`, buffers
  // of the flat buffer's layout that hold every replica's share: what a
  // checkpoint writes (State()). The next Step keeps this replica's share
  // and drops them.
  void SetWholeMoments(size_t b, at::Tensor exp_avg, at::Tensor exp_avg_sq);
  // Sharded: keeps this replica's share of whole moments put in place (a
  // checkpoint loaded, or gathered for one) and drops them, as the next Step
  // would first do; call it after a save and a load, so that they do not
  // stay alive through a step. Unsharded: points the states at the flat
  // buffers, copying in any put in their place.
  void KeepShares();
  // Bytes of the moments this optimizer keeps (exp_avg and exp_avg_sq).
  int64_t StateBytes() const;

 private:
  // Points the flat buffers' parameters' states at their views, copying in
  // any state put in their place; returns, per buffer, the step count all
  // its parameters share, or -1.
  std::vector<int64_t> SyncFlatState();

  std::vector<std::pair<std::string, at::Tensor>> params_;
  AdamWConfig config_;
  std::map<std::string, AdamWState> state_;
  struct Flat {
    FlatBuffer buffer;
    // Sharded: of [begin, end) of the buffer only; else of all of it.
    at::Tensor exp_avg, exp_avg_sq;
    int64_t begin = 0, end = 0;  // the elements this replica updates
    bool sharded = false;
    std::vector<at::Tensor> params;  // the parameters, in buffer order
  };
  std::vector<Flat> flats_;
  std::map<std::string, size_t> flat_of_;  // parameter name -> its buffer
};

}  // namespace pplab
