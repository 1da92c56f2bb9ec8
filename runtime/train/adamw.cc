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
  for (auto& [name, p] : params_) {
    if (!p.grad().defined()) continue;
    AdamWState& s = state_[name];
    if (!s.exp_avg.defined()) {
      s.exp_avg = torch::zeros_like(p);
      s.exp_avg_sq = torch::zeros_like(p);
    }
    ++s.step;
    const at::Tensor& g = p.grad();
    p.mul_(1 - lr * config_.weight_decay);  // decoupled weight decay
    s.exp_avg.mul_(config_.beta1).add_(g, 1 - config_.beta1);
    s.exp_avg_sq.mul_(config_.beta2).addcmul_(g, g, 1 - config_.beta2);
    const double bias1 = 1 - std::pow(config_.beta1, static_cast<double>(s.step));
    const double bias2 = 1 - std::pow(config_.beta2, static_cast<double>(s.step));
    const at::Tensor denom = (s.exp_avg_sq.sqrt() / std::sqrt(bias2)).add_(config_.eps);
    p.addcdiv_(s.exp_avg, denom, -lr / bias1);
  }
}

}  // namespace pplab
