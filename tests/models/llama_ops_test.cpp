// Llama's operations of models/llama_ops.h against the same operations
// written out in tensor ops (autograd's gradients), and the loss against its
// formula.
#include "models/llama_ops.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>
#include <torch/version.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "tests/tensor_error.h"

namespace pplab::llama_ops_test {
namespace {

constexpr double kFp32Tolerance = 1e-5;

}  // namespace

TEST_CASE("RMSNorm through at::rms_norm equals the written-out one: values and both gradients", "[llama_ops]") {
  if (!FusedRmsNormAvailable()) {
    WARN("LibTorch " TORCH_VERSION " has no at::rms_norm (2.4 on): nothing compared here");
    return;
  }
  auto gen = at::detail::createCPUGenerator(23);
  const at::Tensor x0 = torch::randn({3, 7, 48}, gen) * 3, w0 = torch::randn({48}, gen);
  const at::Tensor upstream = torch::randn({3, 7, 48}, gen);
  auto run = [&](bool fused) {
    at::Tensor x = x0.clone().requires_grad_(true), w = w0.clone().requires_grad_(true);
    const at::Tensor y = RmsNorm(x, w, 1e-5, fused);
    (y * upstream).sum().backward();
    return std::vector<at::Tensor>{y.detach(), x.grad(), w.grad()};
  };
  const auto fused = run(true), written = run(false);
  for (size_t i = 0; i < 3; ++i) {
    INFO((i == 0 ? "output" : i == 1 ? "input gradient" : "weight gradient"));
    CHECK(RelativeError(fused[i], written[i]) <= kFp32Tolerance);
  }
}

TEST_CASE("rotary encoding as one node equals the written-out rotate-half form: values and gradient, fp32 and bf16",
          "[llama_ops]") {
  auto gen = at::detail::createCPUGenerator(29);
  // (B, H, T, hd) with hd = 8: the halves are columns 0-3 and 4-7.
  const at::Tensor x0 = torch::randn({2, 3, 5, 8}, gen), upstream = torch::randn({2, 3, 5, 8}, gen);
  const at::Tensor angles = torch::randn({5, 4}, gen);
  const at::Tensor cos = torch::cat({angles, angles}, -1).cos(), sin = torch::cat({angles, angles}, -1).sin();
  for (const c10::ScalarType dtype : {torch::kFloat32, torch::kBFloat16}) {
    INFO(c10::toString(dtype));
    auto run = [&](bool fused) {
      at::Tensor x = x0.to(dtype).clone().requires_grad_(true);
      const at::Tensor y = RotaryEncoding(x, cos, sin, fused);
      (y * upstream).sum().backward();
      return std::vector<at::Tensor>{y.detach(), x.grad()};
    };
    const auto fused = run(true), written = run(false);
    CHECK(fused[0].scalar_type() == torch::kFloat32);  // promoted by the fp32 tables, as written out
    CHECK(fused[1].scalar_type() == dtype);
    // One element by hand: position 1, column 2 is x[2] cos - x[6] sin.
    const at::Tensor xd = x0.to(dtype).to(torch::kFloat32);
    const double by_hand = xd[0][0][1][2].item<double>() * cos[1][2].item<double>() -
                           xd[0][0][1][6].item<double>() * sin[1][2].item<double>();
    CHECK(fused[0][0][0][1][2].item<double>() == Approx(by_hand).epsilon(1e-6));
    CHECK(RelativeError(fused[0], written[0]) <= kFp32Tolerance);
    CHECK(RelativeError(fused[1].to(torch::kFloat32), written[1].to(torch::kFloat32)) <=
          (dtype == torch::kFloat32 ? kFp32Tolerance : 1e-2));
  }
}

TEST_CASE("q and k rotated in one node, apart or continuing each other, equal the written-out encoding of each",
          "[llama_ops]") {
  auto gen = at::detail::createCPUGenerator(43);
  // (B, T, heads, hd): 4 query heads and 2 key heads of 8, over 5 positions.
  const at::Tensor qk0 = torch::randn({2, 5, 6, 8}, gen), upstream = torch::randn({2, 5, 6, 8}, gen);
  const at::Tensor angles = torch::randn({5, 4}, gen);
  const at::Tensor cos = torch::cat({angles, angles}, -1).cos(), sin = torch::cat({angles, angles}, -1).sin();
  // The reference: each of q and k written out, heads moved before the
  // positions as RotaryEncoding takes them.
  at::Tensor ref = qk0.clone().requires_grad_(true);
  auto written = [&](const at::Tensor& x) {
    return RotaryEncoding(x.transpose(1, 2), cos, sin, false).transpose(1, 2);
  };
  const at::Tensor ref_q = written(ref.narrow(2, 0, 4)), ref_k = written(ref.narrow(2, 4, 2));
  ((ref_q * upstream.narrow(2, 0, 4)).sum() + (ref_k * upstream.narrow(2, 4, 2)).sum()).backward();
  for (const bool joint : {true, false}) {
    INFO((joint ? "k continues q in one tensor" : "q and k apart"));
    at::Tensor qk = qk0.clone().requires_grad_(true);
    // Views of one tensor where joint; otherwise copies of their own.
    const at::Tensor q = joint ? qk.narrow(2, 0, 4) : qk.narrow(2, 0, 4).clone();
    const at::Tensor k = joint ? qk.narrow(2, 4, 2) : qk.narrow(2, 4, 2).clone();
    const auto out = RotaryQueryKey(q, k, cos, SignedSin(sin));
    REQUIRE(out.size() == 2);
    CHECK(RelativeError(out[0].detach(), ref_q.detach()) <= kFp32Tolerance);
    CHECK(RelativeError(out[1].detach(), ref_k.detach()) <= kFp32Tolerance);
    ((out[0] * upstream.narrow(2, 0, 4)).sum() + (out[1] * upstream.narrow(2, 4, 2)).sum()).backward();
    CHECK(RelativeError(qk.grad(), ref.grad()) <= kFp32Tolerance);
  }
}

TEST_CASE("SwiGLU as one node equals silu(gate) * up: values and both gradients", "[llama_ops]") {
  auto gen = at::detail::createCPUGenerator(47);
  // gate and up side by side, as their projections give them: (B, T, 2 I).
  const at::Tensor both0 = torch::randn({2, 3, 10}, gen) * 2, upstream = torch::randn({2, 3, 5}, gen);
  auto run = [&](bool fused) {
    at::Tensor both = both0.clone().requires_grad_(true);
    const at::Tensor gate = both.narrow(-1, 0, 5), up = both.narrow(-1, 5, 5);
    const at::Tensor y = fused ? SwiGluProduct(gate, up) : torch::silu(gate) * up;
    (y * upstream).sum().backward();
    return std::vector<at::Tensor>{y.detach(), both.grad()};
  };
  const auto fused = run(true), written = run(false);
  CHECK(RelativeError(fused[0], written[0]) <= kFp32Tolerance);
  CHECK(RelativeError(fused[1], written[1]) <= kFp32Tolerance);
  // One element by hand: silu(g) u = g u / (1 + e^-g).
  const double g = both0[1][2][3].item<double>(), u = both0[1][2][8].item<double>();
  CHECK(fused[0][1][2][3].item<double>() == Approx(g * u / (1 + std::exp(-g))).epsilon(1e-5));
}

TEST_CASE("the token cross-entropy sum is the sum of -log softmax at each kept target", "[llama_ops]") {
  auto gen = at::detail::createCPUGenerator(53);
  const at::Tensor logits = torch::randn({2, 3, 7}, gen);
  const at::Tensor targets = torch::tensor({4, 0, -100, 6, 2, -100}, torch::kLong).view({2, 3});
  double by_hand = 0;
  for (int64_t b = 0; b < 2; ++b) {
    for (int64_t t = 0; t < 3; ++t) {
      const int64_t target = targets[b][t].item<int64_t>();
      if (target == -100) continue;
      double sum = 0;
      for (int64_t v = 0; v < 7; ++v) sum += std::exp(logits[b][t][v].item<double>());
      by_hand += std::log(sum) - logits[b][t][target].item<double>();
    }
  }
  CHECK(TokenCrossEntropySum(logits, targets, -100).item<double>() == Approx(by_hand).epsilon(1e-6));
}

}  // namespace pplab::llama_ops_test
