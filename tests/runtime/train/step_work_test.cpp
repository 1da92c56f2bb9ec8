// The step's gradient norm (GradSquares): exact for a buffer of many
// elements, whatever the buffer's size.
#include "runtime/train/step_work.h"

#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

namespace pplab::step_work_test {

TEST_CASE("the gradients' squared norm is the float64 sum of their squares, for a buffer of 16M elements too",
          "[train][norm]") {
  torch::manual_seed(3);
  // One flat buffer of 16M elements (a stage's gradients), one odd-sized
  // tensor (rows of 1024 and a tail), one empty, one scalar.
  const std::vector<at::Tensor> grads = {torch::randn({int64_t{1} << 24}) * 1e-2, torch::randn({3001}),
                                         torch::zeros({0}), torch::full({}, 2.0f)};
  double exact = 0;
  for (const at::Tensor& g : grads) exact += g.to(torch::kFloat64).pow(2).sum().item<double>();
  const at::Tensor squares = GradSquares(grads);
  CHECK(squares.scalar_type() == torch::kFloat64);
  // Within 1e-6 (float rows); one norm() of the buffer in float was 1.4e-3
  // short in its squares here, 5e-4 of this sum.
  CHECK(squares.item<double>() == Approx(exact).epsilon(1e-6));
  CHECK(GradSquares({}).item<double>() == 0.0);
  CHECK(GradSquares({grads[1]}).item<double>() == Approx(grads[1].to(torch::kFloat64).pow(2).sum().item<double>()));
}

}  // namespace pplab::step_work_test
