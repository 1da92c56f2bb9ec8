// The stage costs of one plan candidate (tools/plan_search.h): the fit
// applied to the formulas with the tensor-parallel collectives, nodes, the
// sharded optimizer and tied embeddings, or a profile's stages as measured.
// No LibTorch.
#pragma once

#include <cstdint>

#include "models/partition.h"
#include "schedules/generators.h"
#include "sim/cost_model.h"
#include "tools/plan_search_options.h"

namespace pplab::cli {

// The tensor-parallel collectives of stage `s` (of P) with `layers` layers,
// per microbatch of `mb` sequences, each a ring over T of the (mb, seq_len,
// hidden) activation: in the activation's dtype (e bytes a value) where
// they carry activations or their bf16 gradients, in fp32 where they sum an
// input's gradient or the embedding's rows. A split backward's I runs the
// backward chain and W only the weights' products (runtime/exec/
// weight_grads.h). Without sequence parallelism: two all-reduces per layer
// in F (the partial outputs, e), two in B and in I (the input's gradient,
// fp32), one more there on the last stage (the head's input gradient), none
// in W, and one in F on the first stage (the embedding's rows). With it,
// per split region (two a layer): F all-gathers the input (e) and
// reduce-scatters the output (e); B all-gathers the output's gradient (e),
// gathers the input again for the weights' gradients (e) and
// reduce-scatters the input's gradient (fp32); I does the first and the
// last, W the second. The head is a region's entry. On the first stage the
// embedding's rows are reduce-scattered in F, and its gradient gathered in
// B or I (fp32). The vocabulary-parallel loss's two all-reduces of
// mb seq_len values are left out (1 / hidden of one of these).
//
// What each action waits for beyond its compute. The forward's collectives,
// I's and those at the region ends block. B overlaps each region entry's
// as the runtime's ColumnProjections runs them, on one communication stream
// (NCCL's): the input's gather starts with the region and runs while the
// input's gradient is computed; the gradient's sum (or reduce-scatter)
// starts after both and runs while the weights' products do. W starts each
// region's gather one region ahead (DeferredWeightGrads). A region's
// products take the stage's W compute `weights` shared by the projections'
// parameters (StageLinearParams), and its input's gradient as long (the
// same FLOPs).
struct TensorParallelTimes {
  TimeNs forward = 0, backward = 0, backward_input = 0, backward_weight = 0;
};
TensorParallelTimes TensorParallelCost(const PlanSearchOptions& o, const Partition& p, int s, int mb, TimeNs weights);

// Stage costs of one candidate: the fit applied to the formulas, or a
// profile verbatim (`verbatim`) when the candidate is its configuration. With
// `copies` copies of the model (dualpipe), stage s runs part s mod P of the
// P-part partition.
// `rank_params`: the parameters of the rank that holds most, whose
// optimizer and clipping end the step.
CostModel CandidateCosts(const PlanSearchOptions& o, const Partition& p, int copies, int mb, const CostModel* verbatim,
                         int64_t rank_params);

// The profile whose own configuration the candidate is, if any: its T and
// layout, K, stages (one copy of the model, v = 1), partition and
// microbatch size. Its stages are then used as measured.
const CostModel* VerbatimProfile(const PlanSearchOptions& o, const GeneratorInfo& gen, int v,
                                 const Partition& partition, int mb);

}  // namespace pplab::cli
