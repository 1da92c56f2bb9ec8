// Tensor parallelism (Megatron-LM's layout, Shoeybi et al. 2019): the T
// ranks of a tensor-parallel group split each decoder layer's attention
// heads and MLP columns between them and sum their partial outputs twice a
// layer. This header is the layout alone (which parameter is split along
// which dimension) and what a config must allow; no LibTorch.
//
// In a layer, with input x (B,S,C) the same on every rank of the group:
//   q/k/v_proj, gate/up_proj: column-parallel, rank t holds rows
//     [t n, (t+1) n) of the weight (n = out / T) and of its bias: its own
//     query heads, key/value heads and MLP columns;
//   o_proj, down_proj: row-parallel, rank t holds columns [t n, (t+1) n)
//     of the weight; the partial outputs are summed over the group (one
//     all-reduce each), and the bias, held whole, is added after the sum.
// The LM head is column-parallel too, split by vocabulary (rank t holds the
// logits of tokens [t V/T, (t+1) V/T)), and the loss is computed across the
// group (models/llama_ops.h, VocabParallelCrossEntropySum) without gathering them. The
// embedding is split the same way (Megatron-LM's vocabulary-parallel
// embedding): rank t looks up the tokens of its share, zeros for the
// others, and the group sums the rows (one all-reduce of the hidden state).
// Tied, the two stay tied share by share: the same rows of the same
// vocabulary on each rank. Norm weights are held whole by every rank.
// The gradient of x is summed over the group where it enters the
// column-parallel projections, so everything outside the split regions,
// their gradients included, is the same on every rank. The one exception
// is a weight inside a split region that is held whole: qk_norm's q_norm
// and k_norm, which each rank applies to its own heads. Their gradients
// are partial sums, added over the group before the optimizer step.
//
// Sequence parallelism (Korthikanti et al. 2022, "Reducing Activation
// Recomputation in Large Transformer Models"): outside the split regions
// each rank holds 1 / T of the positions instead of all of them, rank t
// positions [t S/T, (t+1) S/T). The norms, the residual adds and the
// row-parallel biases then run on that share, and a region's entry gathers
// the positions (an all-gather, where the plain layout passes x as it is)
// and its exit reduce-scatters them (where the plain layout all-reduces).
// The activations outside the regions, and the hidden state sent between
// pipeline stages, shrink by T. The weights that act on a share of the
// positions (every norm, the row-parallel biases) get partial gradients,
// added over the group as qk_norm's are. The embedding's summed rows are
// reduce-scattered, as a region's exit is, and the head is a region's
// entry.
#pragma once

#include <cstdint>
#include <string>

#include "models/llama_config.h"
#include "models/partition.h"

namespace pplab {

enum class TensorSplit {
  kWhole,            // the same on every rank
  kRows,             // split along dimension 0 (column-parallel weights and biases)
  kColumns,          // split along dimension 1 (row-parallel weights)
  kPartialGradient,  // the same values on every rank, each with a part of the gradient
};

// How parameter `global_name` ("layers.3.self_attn.q_proj.weight") of a
// model of `config` is held under tensor parallelism, with or without
// sequence parallelism.
TensorSplit TensorParallelSplit(const std::string& global_name, const LlamaConfig& config,
                                bool sequence_parallel = false);

// The dimension a split parameter is cut along (0 or 1), or -1 when it is
// held whole (kWhole, kPartialGradient).
int TensorParallelDim(TensorSplit split);

// Why `config` cannot be split over `size` ranks, or "" when it can: its
// attention heads, key/value heads, intermediate size and vocabulary must
// each be a multiple of `size`.
std::string WhyNoTensorParallel(const LlamaConfig& config, int size);
// Why sequences of `seq_len` tokens cannot be split over `size` ranks by
// sequence parallelism, or "" when they can (a multiple of `size`).
std::string WhyNoSequenceParallel(int64_t seq_len, int size);

// One rank's shapes of `config` split over `size` ranks: a config with
// 1 / size of the heads, key/value heads, intermediate width and
// vocabulary (head_dim kept), so that the FLOP and activation formulas of
// the planner give
// one rank's share of a stage (the norms stay whole, as the rank holds
// them). For costing, not for building a model.
// Assumes WhyNoTensorParallel(config, size) is "".
LlamaConfig TensorParallelShare(const LlamaConfig& config, int size);
// The parameters one rank of the group holds of stage `stage`: its share's.
int64_t TensorParallelStageParams(const LlamaConfig& config, const Partition& partition, int stage, int size);

struct TensorParallel {
  int size = 1;           // T: ranks in the group; 1 is no tensor parallelism
  int rank = 0;           // this rank's place in the group, [0, T)
  bool sequence = false;  // sequence parallelism (no effect when size is 1)
  bool Sequence() const { return sequence && size > 1; }
};

}  // namespace pplab
