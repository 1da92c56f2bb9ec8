// A cost model estimated from a timeline (usually a measured one): each
// stage's F/B/I/W time is the mean of that action's durations in it.
#pragma once

#include <map>
#include <string>
#include <utility>

#include "sim/cost_model.h"
#include "traces/timeline.h"

namespace pplab {

// The mean duration in ms of each (stage, compute kind) present in `timeline`.
std::map<std::pair<StageId, ActionKind>, double> MeanComputeMs(const Timeline& timeline);

// The mean duration of each compute kind per stage of `timeline` as the cost
// model's JSON (format "pplab.cost", `meta` naming `origin`). Throws
// pplab::Error when a stage lacks F or any backward.
std::string MeasuredCostJson(const Timeline& timeline, const std::string& origin);

// The same, parsed.
CostModel MeasuredCostModel(const Timeline& timeline, const std::string& origin);

}  // namespace pplab
