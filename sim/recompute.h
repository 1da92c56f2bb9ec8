// Activation recomputation (checkpointing at the granularity of a stage) in
// the cost model. A stage that recomputes runs its F without keeping the
// autograd graph: it holds only its inputs until its B (or I), which first
// runs the forward again and then backpropagates. The executor does exactly
// this (ExecutorOptions::recompute); the simulator sees it as these costs.
#pragma once

#include <set>
#include <string>

#include "sim/cost_model.h"

namespace pplab {

// The stages named by a `--recompute` value: "none" (no stage), "all"
// (stages 0 to stages-1), or stage ids separated by commas ("0,1"). Throws
// pplab::Error naming `flag` for anything else, a stage outside the plan's,
// or a stage named twice.
std::set<StageId> ParseRecomputeStages(const std::string& text, int stages, const std::string& flag);

// The value `--recompute` takes for `stages` of a plan of `num_stages`
// stages: "none", "all" or the ids, as ParseRecomputeStages reads them.
std::string FormatRecomputeStages(const std::set<StageId>& stages, int num_stages);

// `costs` with the stages in `stages` recomputed. For each such stage:
// - B and I take one F longer; W, which reuses the graph I rebuilt, does
//   not change. Times the model derives (a missing I or W) are resolved
//   first, so W stays what it was. Their spreads move with them.
// - F holds the stage's inputs (input_bytes, or its default) instead of
//   activation_bytes until B or I.
// - Its compute actions get activation_bytes more workspace: B or I holds the
//   rebuilt activations while it runs. (For F this is an upper bound: a
//   forward without a graph frees each layer's temporaries as it goes.)
// - What I holds for W (weight_grad_bytes) does not change.
// A measured OVERLAP_F_B time (forward_backward_ms) of any stage is dropped
// when a stage recomputes: the cost model does not know which stage's
// backward it was measured with, so the pair is costed by the rule
// (max(F, backward part) + overlap_penalty). Throws pplab::Error naming the
// stage when a recomputed stage has no forward time.
CostModel WithRecompute(const CostModel& costs, const std::set<StageId>& stages);

}  // namespace pplab
