#include "runtime/train/adamw.h"
#include "tests/runtime/train/adamw_reference.h"

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

namespace pplab {

TEST_CASE("foreach AdamW equals the per-parameter update, also with mixed step counts", "[adamw]") {
  torch::manual_seed(5);
  const AdamWConfig config;
  auto a = torch::randn({6, 3}).requires_grad_(true), b = torch::randn({7}).requires_grad_(true);
  auto a_ref = a.detach().clone(), b_ref = b.detach().clone();
  AdamW mine({{"a", a}, {"b", b}}, config);
  // "a" resumes at step 3 with moments from a checkpoint; "b" starts fresh.
  AdamWState a_state{torch::rand({6, 3}) * 1e-2, torch::rand({6, 3}) * 1e-4, 3};
  mine.State()["a"] = {a_state.exp_avg.clone(), a_state.exp_avg_sq.clone(), 3};
  AdamWState b_state{torch::zeros({7}), torch::zeros({7}), 0};
  for (int step = 0; step < 3; ++step) {
    const at::Tensor ga = torch::randn({6, 3}), gb = torch::randn({7});
    a.mutable_grad() = ga.clone();
    b.mutable_grad() = gb.clone();
    a_ref.mutable_grad() = ga.clone();
    b_ref.mutable_grad() = gb.clone();
    mine.Step(1e-2);
    ReferenceAdamWStep(a_ref, a_state, 1e-2, config);
    ReferenceAdamWStep(b_ref, b_state, 1e-2, config);
    INFO("step " << step);
    CHECK((a.detach() - a_ref).abs().max().item<double>() <= 1e-6);
    CHECK((b.detach() - b_ref).abs().max().item<double>() <= 1e-6);
  }
  CHECK(mine.State().at("a").step == 6);
  CHECK(mine.State().at("b").step == 3);
}

}  // namespace pplab
