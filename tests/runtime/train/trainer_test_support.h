// Batches and the loss for the tests that call Train (runtime/train/trainer.h)
// on one process with a Llama model.
#pragma once

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <cstdint>

#include "models/llama.h"
#include "runtime/train/trainer.h"

namespace pplab {

// B rows of T random tokens (B,T) drawn from `seed`, and their targets, the
// next token of each (B,T).
inline std::pair<at::Tensor, at::Tensor> RandomTokens(const LlamaConfig& c, int64_t B, int64_t T, uint64_t seed) {
  auto gen = at::detail::createCPUGenerator(seed);
  const at::Tensor tokens = torch::randint(1, c.vocab_size, {B, T + 1}, gen, torch::kLong);
  return {tokens.narrow(1, 0, T).clone(), tokens.narrow(1, 1, T).clone()};
}

// RandomTokens as a step's batch in `microbatches` equal parts, unpadded,
// with the loss scaled to the mean over the B x T tokens.
inline StepBatch RandomTokenBatch(const LlamaConfig& c, int64_t B, int64_t T, int microbatches, uint64_t seed) {
  const auto [inputs, targets] = RandomTokens(c, B, T, seed);
  StepBatch b;
  const auto in = inputs.chunk(microbatches), tg = targets.chunk(microbatches);
  for (int m = 0; m < microbatches; ++m) b.microbatches.push_back({{in[m], torch::ones_like(in[m])}, tg[m]});
  b.loss_scale = 1.0 / static_cast<double>(inputs.numel());
  return b;
}

// The last stage's token cross-entropy, summed (StepBatch::loss_scale makes it a mean).
inline LossFn SummedTokenLoss() {
  return [](const TensorList& outputs, const at::Tensor& targets) {
    return TokenCrossEntropySum(outputs.at(0), targets, 0);
  };
}

}  // namespace pplab
