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
//
// With tie_word_embeddings the last stage's lm_head.weight starts equal to
// embed_tokens.weight (the same seed), and the trainer gives both the sum of
// their gradients (runtime/train/model_copies.h: SumTiedGradients).
//
// Attention is causal, and padding keys are hidden when the batches may hold
// padding (LlamaOptions::padding). How it is computed is LlamaOptions::attention.
//
// The stages are built from the projections of models/projections.h (which
// also carry tensor parallelism) and the operations of models/llama_ops.h
// (norm, rotary encoding, SwiGLU); the losses are there too.
#pragma once

#include <c10/core/Device.h>

#include <memory>

#include "models/llama_config.h"
#include "models/llama_ops.h"
#include "models/partition.h"
#include "models/tensor_parallel.h"
#include "runtime/exec/stage.h"
#include "runtime/exec/tensor_parallel_comm.h"

namespace pplab {

class WeightFiles;

// The two halves of tied word embeddings.
inline constexpr const char* kEmbeddingWeight = "embed_tokens.weight";
inline constexpr const char* kLmHeadWeight = "lm_head.weight";

struct LlamaOptions {
  // Resolved with ResolveAttention when the stage is built.
  AttentionKind attention = AttentionKind::kAuto;
  // Whether attention_mask may hold a zero before a one in a row (padding
  // ahead of tokens). With false the caller guarantees that padding, if
  // any, only ends a row (pplab's batches, runtime/train/batches.h): under
  // causal attention no token sees a later position, so the tokens' outputs
  // do not depend on it, and the SDPA path runs causal only (is_causal,
  // which the flash kernel takes) without reading the mask, since checking
  // it on a GPU would cost a host sync per forward. The padded positions'
  // own outputs then see the padding before them; a loss ignores them (PAD
  // targets). Where the mask is on the CPU it is checked anyway
  // (pplab::Error for padding before a token). The explicit path always
  // applies the mask.
  bool padding = true;
  // A published model's weights (models/pretrained.h), checked against the
  // config with CheckPretrained: each stage copies its parameters from them
  // instead of the seed's values. None: the seed's.
  std::shared_ptr<const WeightFiles> weights;
  // Tensor parallelism (models/tensor_parallel.h): this rank's place in its
  // group, and the group's all-reduce (required when tensor_parallel.size >
  // 1). Each rank builds its share of every split parameter, whose values
  // are the whole model's cut as the layout says, so the group computes
  // what one rank would.
  TensorParallel tensor_parallel;
  std::shared_ptr<TensorParallelComm> tp_comm;
};

// Whether this LibTorch has at::scaled_dot_product_attention (2.0 and later).
bool SdpaAvailable();
// `kind` for this LibTorch: auto is sdpa where available, else explicit.
// Throws pplab::Error for sdpa where SDPA is missing (LibTorch 1.x).
AttentionKind ResolveAttention(AttentionKind kind);

// Builds stage `stage` of `partition`. Parameters are created on the CPU from
// the seed (or read from options.weights) and then moved to `device` (so
// every device starts from the same weights).
std::unique_ptr<Stage> BuildLlamaStage(const LlamaConfig& config, const Partition& partition, int stage, uint64_t seed,
                                       const c10::Device& device, const LlamaOptions& options = {});

// Generation with cached keys and values: each call runs only the new
// tokens through the model, attending to the keys and values of those before
// (kept per layer), so decoding a token costs one token's forward, not the
// whole sequence's. The logits equal a full forward's (tested).
class LlamaDecoder {
 public:
  virtual ~LlamaDecoder() = default;
  // The logits (B,T,V) of `tokens` (B,T), which follow the Length() tokens
  // already decoded. Throws pplab::Error past max_position_embeddings.
  virtual at::Tensor Next(const at::Tensor& tokens) = 0;
  virtual int64_t Length() const = 0;
  // Forgets every token.
  virtual void Reset() = 0;
};
// A decoder over `stage`, which BuildLlamaStage built with the whole model
// (a one-stage partition); it shares the stage's parameters.
std::unique_ptr<LlamaDecoder> MakeLlamaDecoder(Stage& stage);

}  // namespace pplab
