// AdamW with its state kept by parameter name, so that a checkpoint taken
// with one partition loads into another. The update is torch.optim.AdamW's
// (decoupled weight decay, bias-corrected moments); a test checks it against
// torch::optim::AdamW.
#pragma once

#include <ATen/core/Tensor.h>

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

class AdamW {
 public:
  // `flats`: buffers (FlattenParameters) holding some of `params`. Their
  // parameters' moments then live in flat buffers of the same layout, and a
  // buffer whose parameters share one step count is updated as one tensor.
  // State() still holds each parameter's moments, as views; a state put in
  // their place (a checkpoint being loaded) is copied into the buffer at the
  // next Step.
  AdamW(std::vector<std::pair<std::string, at::Tensor>> params, AdamWConfig config, std::vector<FlatBuffer> flats = {});
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
    at::Tensor exp_avg, exp_avg_sq;
    std::vector<at::Tensor> params;  // the parameters, in buffer order
  };
  std::vector<Flat> flats_;
  std::map<std::string, size_t> flat_of_;  // parameter name -> its buffer
};

}  // namespace pplab
