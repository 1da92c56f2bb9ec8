// The per-parameter AdamW update, written out: the reference the foreach,
// flat-buffer and fused updates are held to (adamw_test.cpp,
// flat_params_test.cpp).
#pragma once

#include <torch/torch.h>

#include <cmath>

#include "runtime/train/adamw.h"

namespace pplab {

inline void ReferenceAdamWStep(at::Tensor p, AdamWState& s, double lr, const AdamWConfig& c) {
  torch::NoGradGuard no_grad;
  ++s.step;
  const at::Tensor& g = p.grad();
  p.mul_(1 - lr * c.weight_decay);
  s.exp_avg.mul_(c.beta1).add_(g, 1 - c.beta1);
  s.exp_avg_sq.mul_(c.beta2).addcmul_(g, g, 1 - c.beta2);
  const double bias1 = 1 - std::pow(c.beta1, static_cast<double>(s.step));
  const double bias2 = 1 - std::pow(c.beta2, static_cast<double>(s.step));
  p.addcdiv_(s.exp_avg, (s.exp_avg_sq.sqrt() / std::sqrt(bias2)).add_(c.eps), -lr / bias1);
}

}  // namespace pplab
