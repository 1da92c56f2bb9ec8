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

namespace pplab {

struct AdamWConfig {
  double beta1 = 0.9, beta2 = 0.99, eps = 1e-8, weight_decay = 0.1;
};

struct AdamWState {
  at::Tensor exp_avg, exp_avg_sq;  // same shape as the parameter
  int64_t step = 0;
};

class AdamW {
 public:
  AdamW(std::vector<std::pair<std::string, at::Tensor>> params, AdamWConfig config);
  // One update with learning rate `lr` from the parameters' .grad (a
  // parameter without a gradient is left alone), as multi-tensor (foreach)
  // operations over all parameters.
  void Step(double lr);
  void ZeroGrad();
  const std::vector<std::pair<std::string, at::Tensor>>& Params() const { return params_; }
  std::map<std::string, AdamWState>& State() { return state_; }

 private:
  std::vector<std::pair<std::string, at::Tensor>> params_;
  AdamWConfig config_;
  std::map<std::string, AdamWState> state_;
};

}  // namespace pplab
