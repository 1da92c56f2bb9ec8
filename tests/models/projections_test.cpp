// The projections of models/projections.h without a group: views joined end
// to end, a projection against LibTorch's linear layer, projections whose
// weights and gradients lie end to end in one buffer (the flat buffer's
// case), and weight products held back for a split backward's W.
#include "models/projections.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <memory>
#include <vector>

#include "runtime/exec/weight_grads.h"
#include "tests/tensor_error.h"

namespace pplab::projections_test {
namespace {

// A linear layer (in -> out) whose weight and gradient are views at rows
// [row, row + out) of `values` and `grads` (rows, in): laid out as a flat
// buffer lays out one module's projections.
torch::nn::Linear LinearIn(const at::Tensor& values, const at::Tensor& grads, int64_t row, int64_t out) {
  torch::nn::Linear layer(torch::nn::LinearOptions(values.size(1), out).bias(false));
  at::Tensor(layer->weight).set_data(values.narrow(0, row, out));
  at::Tensor(layer->weight).mutable_grad() = grads.narrow(0, row, out);
  return layer;
}

}  // namespace

TEST_CASE("ContinuedAlong joins two views that continue each other, along rows or columns, and nothing else",
          "[projections]") {
  const at::Tensor t = torch::arange(24, torch::kFloat32).view({4, 6});
  const at::Tensor rows = ContinuedAlong(t.narrow(0, 0, 1), t.narrow(0, 1, 3), 0);
  REQUIRE(rows.defined());
  CHECK(torch::equal(rows, t));
  CHECK(rows.data_ptr() == t.data_ptr());  // a view, not a copy
  const at::Tensor columns = ContinuedAlong(t.narrow(1, 0, 2), t.narrow(1, 2, 4), -1);
  REQUIRE(columns.defined());
  CHECK(torch::equal(columns, t));
  // A gap, another storage, another dtype, other sizes: no view.
  CHECK_FALSE(ContinuedAlong(t.narrow(0, 0, 1), t.narrow(0, 2, 2), 0).defined());
  CHECK_FALSE(ContinuedAlong(t.narrow(0, 0, 2), t.narrow(0, 2, 2).clone(), 0).defined());
  CHECK_FALSE(ContinuedAlong(t.narrow(0, 0, 2), t.to(torch::kFloat64).narrow(0, 2, 2), 0).defined());
  CHECK_FALSE(ContinuedAlong(t.narrow(0, 0, 2).narrow(1, 0, 3), t.narrow(0, 2, 2), 0).defined());
  // Three parts end to end; fewer than two is no view.
  const at::Tensor all = EndToEnd({t.narrow(0, 0, 1), t.narrow(0, 1, 2), t.narrow(0, 3, 1)}, 0);
  REQUIRE(all.defined());
  CHECK(torch::equal(all, t));
  CHECK_FALSE(EndToEnd({t}, 0).defined());
}

TEST_CASE("Project equals a linear layer: output and the gradients of input, weight and bias", "[projections]") {
  auto gen = at::detail::createCPUGenerator(31);
  const at::Tensor x0 = torch::randn({2, 5, 8}, gen), w0 = torch::randn({6, 8}, gen), b0 = torch::randn({6}, gen);
  const at::Tensor upstream = torch::randn({2, 5, 6}, gen);
  auto run = [&](bool ours) {
    at::Tensor x = x0.clone().requires_grad_(true), w = w0.clone().requires_grad_(true),
               b = b0.clone().requires_grad_(true);
    const at::Tensor y = ours ? Project(x, w, b) : torch::nn::functional::linear(x, w, b);
    (y * upstream).sum().backward();
    return std::vector<at::Tensor>{y.detach(), x.grad(), w.grad(), b.grad()};
  };
  const auto ours = run(true), reference = run(false);
  for (size_t i = 0; i < ours.size(); ++i) {
    INFO((i == 0 ? "output" : i == 1 ? "input gradient" : i == 2 ? "weight gradient" : "bias gradient"));
    REQUIRE(ours[i].defined());
    CHECK(ours[i].sizes() == reference[i].sizes());
    CHECK(RelativeError(ours[i], reference[i]) <= 1e-6);
  }
}

TEST_CASE("projections whose weights lie end to end equal separate linear layers, and sum into the gradients' buffer",
          "[projections]") {
  auto gen = at::detail::createCPUGenerator(37);
  const std::vector<int64_t> outs = {4, 2, 2};  // q, k, v of one input, as GQA's are
  const at::Tensor values0 = torch::randn({8, 6}, gen), grads0 = torch::randn({8, 6}, gen);
  const at::Tensor x0 = torch::randn({3, 5, 6}, gen);
  std::vector<at::Tensor> upstream;
  for (int64_t out : outs) upstream.push_back(torch::randn({3, 5, out}, gen));

  // Ours: one buffer of weights, one of gradients (already holding grads0:
  // the products add to what is there, as over a step's microbatches).
  at::Tensor values = values0.clone(), grads = grads0.clone();
  std::vector<torch::nn::Linear> layers;
  for (int64_t row = 0, i = 0; i < 3; row += outs[i], ++i) layers.push_back(LinearIn(values, grads, row, outs[i]));
  at::Tensor x = x0.clone().requires_grad_(true);
  const auto ys = ColumnParallel(x, layers, GroupRef());
  REQUIRE(ys.size() == 3);
  at::Tensor loss = torch::zeros({});
  for (size_t i = 0; i < 3; ++i) loss = loss + (ys[i] * upstream[i]).sum();
  loss.backward();

  // The reference: one linear product per weight, autograd's gradients.
  at::Tensor rx = x0.clone().requires_grad_(true), rw = values0.clone().requires_grad_(true);
  at::Tensor ref_loss = torch::zeros({});
  for (int64_t row = 0, i = 0; i < 3; row += outs[i], ++i) {
    const at::Tensor y = torch::nn::functional::linear(rx, rw.narrow(0, row, outs[i]));
    CHECK(RelativeError(ys[i].detach(), y.detach()) <= 1e-6);
    ref_loss = ref_loss + (y * upstream[i]).sum();
  }
  ref_loss.backward();
  CHECK(RelativeError(x.grad(), rx.grad()) <= 1e-6);
  CHECK(RelativeError(grads, grads0 + rw.grad()) <= 1e-6);  // summed into the buffer, in place
  CHECK(layers[0]->weight.grad().data_ptr() == grads.data_ptr());
}

TEST_CASE("a projection run under a DeferWeightGradsScope leaves its weight's product to W, the same product",
          "[projections]") {
  auto gen = at::detail::createCPUGenerator(41);
  const at::Tensor x0 = torch::randn({4, 8}, gen), w0 = torch::randn({3, 8}, gen), b0 = torch::randn({3}, gen);
  const at::Tensor upstream = torch::randn({4, 3}, gen);
  at::Tensor x = x0.clone().requires_grad_(true), w = w0.clone().requires_grad_(true),
             b = b0.clone().requires_grad_(true);
  auto deferred = std::make_shared<DeferredWeightGrads>();
  at::Tensor y;
  {
    DeferWeightGradsScope scope(deferred);
    y = Project(x, w, b);
  }
  (y * upstream).sum().backward();  // I: the input's and the bias's gradients only
  CHECK(x.grad().defined());
  CHECK(b.grad().defined());
  CHECK_FALSE(w.grad().defined());
  CHECK(deferred->Size() == 1);
  deferred->Run();  // W
  REQUIRE(w.grad().defined());
  CHECK(RelativeError(w.grad(), upstream.t().mm(x0)) <= 1e-6);
  CHECK(RelativeError(b.grad(), upstream.sum(0)) <= 1e-6);
  CHECK(RelativeError(x.grad(), upstream.mm(w0)) <= 1e-6);
}

}  // namespace pplab::projections_test
