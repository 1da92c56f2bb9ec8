// Llama blocks and the stage builder (LibTorch).
//
// A stage holds only what it owns: stage 0 the token embedding, the last
// stage the final RMSNorm and the LM head, every stage its decoder layers.
// Parameters keep their global names ("layers.7.mlp.up_proj.weight") and are
// initialised from (seed, global name) alone, so the pipelined model equals
// the unpartitioned one bit for bit whatever the partition.
//
// Stage inputs/outputs (B = microbatch size, T = sequence length, C = hidden):
//   first stage in:  {tokens (B,T) int64, attention_mask (B,T) int64: 1 = token, 0 = padding}
//   middle in/out:   {hidden (B,T,C) float, attention_mask (B,T) int64}
//   last stage out:  {logits (B,T,V) float}
#pragma once

#include <c10/core/Device.h>

#include <memory>

#include "models/llama_config.h"
#include "models/partition.h"
#include "runtime/exec/stage.h"

namespace pplab {

// Builds stage `stage` of `partition`. Parameters are created on the CPU from
// the seed and then moved to `device` (so every device starts from the same
// weights).
std::unique_ptr<Stage> BuildLlamaStage(const LlamaConfig& config, const Partition& partition, int stage, uint64_t seed,
                                       const c10::Device& device);

// Sum of token cross-entropies of `logits` (B,T,V) against `targets` (B,T),
// skipping targets equal to `ignore_index`. A scalar.
at::Tensor TokenCrossEntropySum(const at::Tensor& logits, const at::Tensor& targets, int64_t ignore_index);

}  // namespace pplab
