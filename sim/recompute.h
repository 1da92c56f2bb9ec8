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
// - F holds the stage's inputs (input_bytes; without it, see token_stages)
//   instead of activation_bytes until B or I.
// - Its B and I hold activation_bytes more while they run
//   (recomputed_bytes): the activations they rebuild. F and W hold nothing
//   more (F's forward keeps no graph; W uses what I kept).
// - What I holds for W (weight_grad_bytes, the rebuilt graph) does not
//   change.
// A measured OVERLAP_F_B time (forward_backward_ms) of any stage is dropped
// when a stage recomputes: the cost model does not know which stage's
// backward it was measured with, so the pair is costed by the rule
// (max(F, backward part) + overlap_penalty). Throws pplab::Error naming the
// stage when a recomputed stage has no forward time.
// `token_stages` are the stages whose inputs are the batch's tokens (each
// pipeline's first: stage 0, and with DualPipe's second copy of the model
// its first stage too); without input_bytes they hold 0, the others
// message_bytes.
CostModel WithRecompute(const CostModel& costs, const std::set<StageId>& stages,
                        const std::set<StageId>& token_stages = {0});

}  // namespace pplab
