// What a plan search is asked (tools/plan_search.h): the model, the ranks,
// the costs and the limits. Cost and memory formulas are documented in
// docs/planning.md. No LibTorch.
#pragma once

#include <string>
#include <vector>

#include "models/llama_config.h"
#include "sim/cost_model.h"
#include "sim/precision.h"
#include "tools/plan_costs.h"

namespace pplab::cli {

struct PlanSearchOptions {
  LlamaConfig config;
  int ranks = 1;  // K
  int dp = 1;     // D
  // T: tensor-parallel ranks per pipeline rank (train --tp). Each rank's
  // stage costs, activations and parameters are those of its share
  // (TensorParallelShare), plus the layers' all-reduces over tp_link: two
  // per layer in F and in I, blocking the rank, and two in B, overlapped
  // with the weights' products as the runtime overlaps them; none in W.
  // Each is a ring over T of the (mb, seq_len, hidden) activation.
  int tp = 1;
  Link tp_link;
  // With tp > 1: sequence parallelism (train --sequence-parallel). The
  // norms' activations and the messages between stages are 1 / T, and each
  // all-reduce becomes an all-gather and a reduce-scatter, with one more
  // all-gather in B and W (the projections' input, gathered again, and
  // overlapped there); see TensorParallelCost in tools/plan_candidate_costs.h.
  bool sequence_parallel = false;
  // With tp > 1: every candidate both without and with sequence
  // parallelism (where tp divides seq_len), ranked together;
  // sequence_parallel is then not read.
  bool search_sequence_parallel = false;
  // Whether train runs fused attention (--attention sdpa), which keeps no
  // softmax probabilities (ActivationLayout).
  bool fused_attention = false;
  int global_batch = 1;       // G sequences per step, over all replicas
  int seq_len = 1;            // tokens per sequence
  Bytes memory_per_rank = 0;  // less the headroom kept free
  // As given, and the percent of it kept free, for messages: the limit the
  // user wrote, not only what the headroom left of it.
  Bytes memory_given = 0;
  double memory_headroom_percent = 0;
  // Bytes per activation value in the byte formulas (a profile's own, when
  // fitted to one). Model state is 16 B per parameter in either precision.
  Precision precision = Precision::kFp32;
  std::vector<std::string> schedules;  // generator names; empty = all
  CostFit fit;
  // Every stage-to-stage link of every candidate, the verbatim profile's too.
  Link link;
  // Profiles whose stage costs are used verbatim for the candidate that
  // matches one (its T and layout, K, partition, microbatch size, v = 1).
  std::vector<const CostModel*> profiles;
  // With spreads (the fit's or the profile's), the first `sample_top`
  // candidates of the ranking are simulated kTieSamples times each with
  // kTieSeed, and those within the noise of the best are marked as ties.
  size_t sample_top = 10;
  // The stages run as CUDA graphs (fitted to profiles taken with
  // --cuda-graphs; train --cuda-graphs): only schedules with whole
  // backwards are searched, without recomputation or tensor parallelism,
  // and each stage holds its graph slots (CostFit::graph_slot_scale).
  bool cuda_graphs = false;
  // Whether candidates are costed without recomputation (false) and with
  // every stage recomputed (true, sim/recompute.h): {false}, {true} or both.
  std::vector<bool> recompute = {false};
  // The AdamW moments sharded over the D replicas (train --shard-optimizer):
  // model state 8 + 8 / D bytes per parameter instead of 16.
  bool shard_optimizer = false;
  // With dp > 1 and cost_data_parallel: each stage's REDUCE_GRAD, the ring
  // all-reduce of its fp32 gradients (4 bytes a parameter) over the D
  // replicas through dp_link, is in the simulated step, after the stage's
  // last B or W, as `train --dp` runs it (a profile's measured
  // reduce_grad_ms replaces the ring formula for its own configuration).
  bool cost_data_parallel = false;
  Link dp_link;
  // Nodes of this many GPUs, or 0: every stage-to-stage message takes
  // `link` and the data-parallel ring dp_link. World rank (d K + k) T + t
  // (replica d, pipeline rank k, tensor-parallel rank t; train's grid) is on
  // node ((d K + k) T + t) / gpus_per_node: a message between pipeline ranks
  // that a pipeline places on two nodes takes dp_link (the network between
  // nodes), the others `link`; the data-parallel ring takes dp_link when a
  // group spans nodes, else `link`; the tensor-parallel ring likewise
  // dp_link or tp_link.
  int gpus_per_node = 0;
  // Whether SearchPlans throws when no candidate fits (else it returns the
  // counts with nothing fitting, for a caller that merges several searches).
  bool throw_when_none_fits = true;
};

}  // namespace pplab::cli
