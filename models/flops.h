// Model FLOPs of training a Llama model (no LibTorch), for model FLOPs
// utilisation (MFU): the work the model needs, not what a kernel happens to do.
//
// Convention (per sequence of T tokens, one forward and one backward, no
// recomputation; a multiply-add is 2 FLOPs; backward costs twice forward):
//   matmuls:   6 x W x T, where W counts the weights of the Linear layers the
//              stage owns (q, k, v, o, gate, up, down per layer; the LM head).
//              The token embedding is a lookup and RMSNorm is elementwise:
//              neither is counted (Megatron-LM's and PaLM's convention).
//   attention: 6 x hidden x T x (T+1) per layer. Causal attention scores
//              T(T+1)/2 (query, key) pairs per head; QK^T and PV each take
//              2 x head_dim FLOPs per pair, over all query heads 2 x hidden
//              x T(T+1) forward. This is the causal half, counted once;
//              PaLM's 12 x layers x hidden x T per token counts the masked half
//              too (its figure is about twice ours for attention).
// Grouped-query attention changes W (smaller k and v) but not the attention
// term, which follows the query heads. Padding positions are counted: the
// model computes them.
#pragma once

#include <cstdint>
#include <vector>

#include "models/llama_config.h"
#include "models/partition.h"
#include "schedules/units.h"

namespace pplab {

// Weights of the Linear layers of stage `stage`: W above.
int64_t StageMatmulWeights(const LlamaConfig& config, const Partition& partition, int stage);

// FLOPs of one training step of one decoder layer, and of the LM head, on
// one sequence of `seq_len` tokens (the two terms stages add up).
double LayerTrainingFlops(const LlamaConfig& config, int64_t seq_len);
double HeadTrainingFlops(const LlamaConfig& config, int64_t seq_len);

// Forward FLOPs of one decoder layer, and of the LM head, on one sequence of
// `seq_len` tokens as the runtime computes them (not the convention above):
// each layer parameter 2 FLOPs a token (DecoderLayerParams: norms and biases
// too), and attention's QK^T and PV 2 x seq_len^2 x q each, the full square
// (the kernels given a mask compute the masked half too). What plan's
// analytic times and the `compute` partition weigh.
double LayerForwardFlops(const LlamaConfig& config, int64_t seq_len);
double HeadForwardFlops(const LlamaConfig& config, int64_t seq_len);

// FLOPs of one training step (forward + backward) of stage `stage` on one
// sequence of `seq_len` tokens.
double StageTrainingFlops(const LlamaConfig& config, const Partition& partition, int stage, int64_t seq_len);

// FLOPs per training step of each pipeline rank of one replica, for
// `sequences` sequences of `seq_len` tokens per replica and step: rank r
// runs the stages s with placement[s] == r. Size `ranks`.
std::vector<double> RankTrainingFlops(const LlamaConfig& config, const Partition& partition,
                                      const std::vector<RankId>& placement, int ranks, int64_t sequences,
                                      int64_t seq_len);

}  // namespace pplab
