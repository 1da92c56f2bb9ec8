// bf16 autocast on the CPU: the guard's state and cache, and a mixed-precision
// Llama stage against the same stage in fp32.
#include "runtime/exec/autocast.h"

#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <cstdio>

#include "models/llama.h"
#include "runtime/train/batches.h"

namespace pplab {

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

}  // namespace pplab
