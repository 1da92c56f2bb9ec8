// bf16 autocast on the CPU: the guard's state and cache, the cache kept by an
// AutocastCacheScope, and a mixed-precision Llama stage against the same
// stage in fp32.
#include "runtime/exec/autocast.h"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/torch.h>
#include <torch/version.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "models/llama.h"
#include "models/partition.h"
#include "runtime/exec/memory_meter.h"
#include "runtime/train/batches.h"
#include "tests/runtime/exec/cast_node.h"

namespace pplab::autocast_test {

TEST_CASE("the autocast guard turns bf16 matmuls on and restores the state it found", "[autocast]") {
  const at::Tensor x = torch::randn({4, 8});
  const at::Tensor w = torch::randn({8, 3});
  REQUIRE_FALSE(AutocastEnabled(c10::kCPU));
  {
    AutocastGuard outer(c10::kCPU);
    CHECK(AutocastEnabled(c10::kCPU));
    CHECK(torch::mm(x, w).scalar_type() == torch::kBFloat16);
    CHECK((x + x).scalar_type() == torch::kFloat32);  // not a matmul: follows its inputs
    {
      AutocastGuard inner(c10::kCPU);
      CHECK(AutocastEnabled(c10::kCPU));
    }
    CHECK(AutocastEnabled(c10::kCPU));  // the inner guard restored the outer state
  }
  CHECK_FALSE(AutocastEnabled(c10::kCPU));
  CHECK(torch::mm(x, w).scalar_type() == torch::kFloat32);
  CHECK_THROWS_WITH(AutocastGuard(c10::DeviceType::XLA), Catch::Contains("bf16 autocast runs on the CPU or CUDA"));
}

TEST_CASE("leaving autocast forgets its bf16 copies of the weights, so an update is seen", "[autocast]") {
  // Autocast caches the bf16 cast of a weight (a leaf that requires grad)
  // while a region lasts; a copy kept past an optimizer step would be stale.
  const at::Tensor x = torch::eye(2);
  at::Tensor w = torch::ones({2, 2}).requires_grad_(true);
  {
    AutocastGuard autocast(c10::kCPU);
    CHECK(torch::mm(x, w).sum().item<double>() == 4);
  }
  {
    torch::NoGradGuard no_grad;
    w.add_(1);  // the "update"
  }
  AutocastGuard autocast(c10::kCPU);
  CHECK(torch::mm(x, w).sum().item<double>() == 8);
}

namespace {

// x W under its own guard, as each microbatch's forward runs: (3,4) in bf16.
// The leaf W reaches autocast as it is, so autocast may cache its cast.
at::Tensor MatmulUnderAutocast(const at::Tensor& x, const at::Tensor& w) {
  AutocastGuard autocast(c10::kCPU);
  return torch::mm(x, w);
}

}  // namespace

TEST_CASE("inside a cache scope the forwards share one bf16 cast of a weight, and its backwards work", "[autocast]") {
  torch::manual_seed(3);
  const at::Tensor w = (torch::randn({8, 4}) * 0.3).requires_grad_(true);
  const at::Tensor x1 = torch::randn({3, 8}), x2 = torch::randn({3, 8});  // two "microbatches"
  at::Tensor grads[2];
  for (int shared = 0; shared < 2; ++shared) {
    if (w.grad().defined()) w.grad().zero_();
    std::optional<AutocastCacheScope> scope;
    if (shared) scope.emplace();
    CHECK_FALSE(AutocastEnabled(c10::kCPU));  // the scope alone turns nothing on
    const at::Tensor y1 = MatmulUnderAutocast(x1, w), y2 = MatmulUnderAutocast(x2, w);
    REQUIRE(y1.scalar_type() == torch::kBFloat16);
    const torch::autograd::Node* cast1 = CastNodeOf(y1, w);
    const torch::autograd::Node* cast2 = CastNodeOf(y2, w);
    REQUIRE(cast1 != nullptr);
    REQUIRE(cast2 != nullptr);
    INFO((shared ? "in a scope" : "no scope")
         << ": cast nodes " << cast1->name() << " " << cast1 << " and " << cast2->name() << " " << cast2);
    CHECK(cast1->name().rfind("ToCopyBackward", 0) == 0);
    if (shared) {
      CHECK(cast1 == cast2);
    } else {
      CHECK(cast1 != cast2);  // each guard's exit dropped its cast
    }
    // Each backward frees its graph (retain_graph false), as B and W do; the
    // shared cast saves no tensor, so the second backward still runs through it.
    y1.to(torch::kFloat32).square().sum().backward();
    y2.to(torch::kFloat32).square().sum().backward();
    REQUIRE(w.grad().defined());
    grads[shared] = w.grad().clone();
  }
  CHECK(torch::equal(grads[0], grads[1]));
  // The scope's end dropped the cast: the next scope casts anew.
  const at::Tensor y1 = [&] {
    AutocastCacheScope step;
    return MatmulUnderAutocast(x1, w);
  }();
  AutocastCacheScope step;
  const at::Tensor y2 = MatmulUnderAutocast(x1, w), y3 = MatmulUnderAutocast(x2, w);
  CHECK(CastNodeOf(y1, w) != CastNodeOf(y2, w));
  CHECK(CastNodeOf(y2, w) == CastNodeOf(y3, w));
}

TEST_CASE("a cache scope ends before an update: the next scope's forwards see the new weight", "[autocast]") {
  const at::Tensor x = torch::eye(2);
  at::Tensor w = torch::ones({2, 2}).requires_grad_(true);
  auto forward = [&] { return MatmulUnderAutocast(x, w).sum().item<double>(); };
  auto update = [&] {
    torch::NoGradGuard no_grad;
    w.add_(1);
  };
  {
    AutocastCacheScope step;
    CHECK(forward() == 4);
  }
  update();
  {
    AutocastCacheScope step;
    CHECK(forward() == 8);
    // Kept open across an update (what a step must not do), the scope hands
    // out the cast of the weight as it was.
    update();
    CHECK(forward() == 8);
  }
  CHECK(forward() == 12);
}

TEST_CASE("a forward in another grad mode than its cache scope neither uses nor fills the cache", "[autocast]") {
  // A cast made under no_grad has no graph node (LibTorch 1.13, 2.6); shared
  // with a forward that trains, it would leave the weight without a gradient.
  const at::Tensor w = torch::randn({8, 4}).requires_grad_(true);
  const at::Tensor x = torch::randn({3, 8});
  {
    AutocastCacheScope training;
    {
      torch::NoGradGuard no_grad;  // e.g. an evaluation inside a training step
      MatmulUnderAutocast(x, w);
    }
    const at::Tensor y = MatmulUnderAutocast(x, w);
    REQUIRE(CastNodeOf(y, w) != nullptr);
    y.to(torch::kFloat32).sum().backward();
    CHECK(w.grad().defined());
  }
  w.mutable_grad().reset();
  at::Tensor y;
  {
    torch::NoGradGuard no_grad;
    AutocastCacheScope evaluation;
    MatmulUnderAutocast(x, w);
    torch::AutoGradMode with_grad(true);
    y = MatmulUnderAutocast(x, w);
  }
  REQUIRE(CastNodeOf(y, w) != nullptr);
  y.to(torch::kFloat32).sum().backward();
  CHECK(w.grad().defined());
}

TEST_CASE("a bf16 Llama stage's forwards in one cache scope share the cast of every matmul weight", "[autocast]") {
  // The stage casts its weights itself (models/projections.h: every projection
  // is a ColumnProjections, which casts through autocast's cache), so this
  // holds on the CPU too, where autocast inside nn::Linear would cast the
  // transposed weight, a view it never caches. The function's own node
  // feeds each weight's gradient, and the casts it keeps for its backward
  // are one a step in a scope: two forwards hold one bf16 copy of the
  // stage's Linear weights less (2 bytes a parameter) than without.
  MemoryMeter& meter = MemoryMeter::Cpu();
  const LlamaConfig config = LlamaPreset("tiny");
  const Partition partition = PartitionUniform(config, 2);
  const StepBatch batch = SyntheticBatch(3, 0, 4, 16, config.vocab_size, 2);
  std::unique_ptr<Stage> stage = MixedPrecisionStage(BuildLlamaStage(config, partition, 1, 7, torch::kCPU), c10::kCPU);
  torch::manual_seed(5);
  const at::Tensor hidden[2] = {torch::randn({2, 16, config.hidden_size}), torch::randn({2, 16, config.hidden_size})};
  std::map<std::string, at::Tensor> grads[2];
  Bytes held[2] = {0, 0};
  for (int shared = 0; shared < 2; ++shared) {
    for (auto& [name, p] : stage->NamedParameters()) p.mutable_grad() = at::Tensor();
    std::optional<AutocastCacheScope> step;
    if (shared) step.emplace();
    TensorList outputs[2];
    const Bytes before = meter.Live();
    for (int m = 0; m < 2; ++m) outputs[m] = stage->Forward({hidden[m], batch.microbatches.at(m).inputs.at(1)});
    held[shared] = meter.Live() - before;
    int matmul_weights = 0;
    for (auto& [name, p] : stage->NamedParameters()) {
      if (p.dim() != 2) continue;  // RMSNorm weights are not cast
      INFO((shared ? "in a scope: " : "no scope: ") << name);
      const torch::autograd::Node* first = CastNodeOf(outputs[0].at(0), p);
      REQUIRE(first != nullptr);
      CHECK_THAT(first->name(), Catch::Contains("ColumnProjections"));
      ++matmul_weights;
    }
    CHECK(matmul_weights == 7 * 2 + 1);  // q, k, v, o, gate, up, down per layer, and the LM head
    // Each backward frees its graph, as B and W do; the shared casts serve both.
    for (int m = 0; m < 2; ++m) outputs[m].at(0).square().mean().backward();
    for (auto& [name, p] : stage->NamedParameters()) grads[shared][name] = p.grad().clone();
  }
  CHECK(held[0] - held[1] == 2 * StageLinearParams(config, partition, 1));
  // One cast or one a microbatch, the same bf16 values: the same gradients, bit for bit.
  for (const auto& [name, g] : grads[0]) {
    INFO(name);
    CHECK(torch::equal(grads[1].at(name), g));
  }
}

TEST_CASE("a bf16 stage computes in bf16 but gives fp32 outputs and fp32 gradients near the fp32 stage's",
          "[autocast]") {
  const LlamaConfig config = LlamaPreset("tiny");
  const Partition partition = PartitionUniform(config, 2);
  const StepBatch batch = SyntheticBatch(3, 0, 4, 32, config.vocab_size, 1);
  const MicrobatchData& data = batch.microbatches.at(0);
  std::map<std::string, at::Tensor> grads[2];
  at::Tensor logits[2];
  for (int bf16 = 0; bf16 < 2; ++bf16) {
    // Both stages of one process, stage 1 fed stage 0's outputs.
    std::unique_ptr<Stage> first = BuildLlamaStage(config, partition, 0, 7, torch::kCPU);
    std::unique_ptr<Stage> last = BuildLlamaStage(config, partition, 1, 7, torch::kCPU);
    if (bf16) {
      first = MixedPrecisionStage(std::move(first), c10::kCPU);
      last = MixedPrecisionStage(std::move(last), c10::kCPU);
    }
    const TensorList hidden = first->Forward(data.inputs);
    CHECK(hidden.at(0).scalar_type() == torch::kFloat32);  // (B,T,C): the residual stream stays fp32
    CHECK(hidden.at(1).scalar_type() == torch::kLong);     // the mask
    logits[bf16] = last->Forward(hidden).at(0);            // (B,T,V)
    CHECK(logits[bf16].scalar_type() == torch::kFloat32);  // the lm_head's bf16 result, back in fp32
    const at::Tensor loss = TokenCrossEntropySum(logits[bf16], data.targets, 0);
    CHECK(loss.scalar_type() == torch::kFloat32);
    loss.backward();
    for (Stage* s : {first.get(), last.get()}) {
      for (auto& [name, p] : s->NamedParameters()) {
        CHECK(p.scalar_type() == torch::kFloat32);
        REQUIRE(p.grad().defined());
        CHECK(p.grad().scalar_type() == torch::kFloat32);  // master weights' gradients
        grads[bf16][name] = p.grad();
      }
    }
  }
  // bf16 keeps 8 significant bits (relative rounding up to 2^-9 = 0.2 %) of
  // each matmul's inputs and output, so the results are near the fp32 ones
  // but not equal to them. Measured: logits 5.5e-3, gradients 1.2e-2.
  const double logit_error = (logits[1] - logits[0]).abs().max().item<double>() / logits[0].abs().max().item<double>();
  double grad_error = 0;
  for (const auto& [name, g] : grads[0]) {
    grad_error = std::max(grad_error, (grads[1][name] - g).abs().max().item<double>() / g.abs().max().item<double>());
  }
  std::printf("bf16 stage against fp32: logits max relative error %.2e, gradients %.2e (%zu tensors)\n", logit_error,
              grad_error, grads[0].size());
  CHECK(logit_error > 0);
  CHECK(logit_error < 2e-2);
  CHECK(grad_error < 5e-2);
}

}  // namespace pplab::autocast_test
