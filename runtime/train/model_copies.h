// Plans of several pipelines (DualPipe) train several copies of the model:
// pipeline p's stage ModelStage(s) == j holds part j of copy p. The copies
// start equal (weights come from the seed and the parameter name) and stay
// equal because every copy of part j updates with the same gradient: the sum
// of what each copy computed for its own microbatches, which is the gradient
// of the whole batch (DeepSeek's DualPipe does the same).
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "runtime/comm/transport.h"
#include "runtime/exec/stage.h"
#include "schedules/schedule.h"

namespace pplab {

// Why `schedule` cannot train one model, or "" when it can: its pipelines
// must be equally long, and the copies of a part must sit on different
// ranks (a rank's parameters are named by the model, so two copies of one
// part on one rank would collide).
std::string WhyNotOneModel(const Schedule& schedule);

// Sums the gradients of every copy of each of `rank`'s stages, so that all
// copies hold the sum, adding in pipeline order on every rank (the copies
// stay bit-identical). Copies on other ranks travel over `transport` as one
// flat tensor per stage (its bytes, never cast to a narrower wire dtype),
// with tags above the executor's. A no-op with one
// pipeline. Call it on every rank after the step's backward.
void SumCopyGradients(const Schedule& schedule, RankId rank, const std::map<StageId, Stage*>& stages,
                      Transport& transport, std::chrono::milliseconds timeout);

// Tied word embeddings: each pipeline's first stage holds `first_name` (the
// embedding) and its last stage `last_name` (the LM head's copy of it), one
// weight kept twice. The ranks other than `rank` that hold the other half
// of a pair this rank holds: the executor links them with its program's
// peers.
std::vector<RankId> TiedPeers(const Schedule& schedule, RankId rank);

// Gives both halves of every pipeline's pair the sum of their gradients, in
// place (one addition of two tensors, which commutes exactly, so both sides
// hold the same bits), so the halves, equal at the start, stay
// bit-identical after each update. Halves on
// other ranks travel over `transport` (their bytes, never cast), with tags
// above SumCopyGradients'. Call it on every rank after SumCopyGradients.
void SumTiedGradients(const Schedule& schedule, RankId rank, const std::map<StageId, Stage*>& stages,
                      Transport& transport, std::chrono::milliseconds timeout, const std::string& first_name,
                      const std::string& last_name);

}  // namespace pplab
