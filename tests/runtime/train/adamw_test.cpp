#include "runtime/train/adamw.h"

#include <torch/torch.h>

#include <catch2/catch.hpp>

namespace pplab {

TEST_CASE("AdamW by name makes the updates of torch::optim::AdamW", "[adamw]") {
  torch::manual_seed(3);
  const auto w0 = torch::randn({4, 5}), b0 = torch::randn({5});
  auto w1 = w0.clone().requires_grad_(true), b1 = b0.clone().requires_grad_(true);
  auto w2 = w0.clone().requires_grad_(true), b2 = b0.clone().requires_grad_(true);
  AdamW mine({{"w", w1}, {"b", b1}}, {});
  torch::optim::AdamW theirs({w2, b2}, torch::optim::AdamWOptions(1e-2).betas({0.9, 0.99}).eps(1e-8).weight_decay(0.1));
  for (int step = 0; step < 4; ++step) {
    const auto x = torch::randn({3, 4});
    mine.ZeroGrad();
    theirs.zero_grad();
    torch::tanh(x.matmul(w1) + b1).pow(2).sum().backward();
    torch::tanh(x.matmul(w2) + b2).pow(2).sum().backward();
    mine.Step(1e-2);
    theirs.step();
    INFO("step " << step);
    CHECK(torch::allclose(w1, w2, 1e-6, 1e-7));
    CHECK(torch::allclose(b1, b2, 1e-6, 1e-7));
  }
  CHECK(mine.State().at("w").step == 4);
}

}  // namespace pplab
