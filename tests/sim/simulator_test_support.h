// What the simulator tests share (simulator_test.cpp, simulator_engine_test.cpp):
// a cost model whose stages all take the same times.
#pragma once

#include "sim/cost_model.h"

namespace pplab {

// Every stage: F `f`, B `b` and, when `w` > 0, W `w` ns; 100 activation
// bytes and 10 weight-gradient bytes; free links.
inline CostModel UniformCosts(int stages, TimeNs f, TimeNs b, TimeNs w = 0) {
  StageCost c;
  c.forward = f;
  c.backward = b;
  if (w > 0) c.backward_weight = w;
  c.activation_bytes = 100;
  c.weight_grad_bytes = 10;
  return CostModel::Uniform(stages, c, Link{});
}

}  // namespace pplab
