#include "sim/measured_costs.h"

#include <map>
#include <nlohmann/json.hpp>

namespace pplab {

std::map<std::pair<StageId, ActionKind>, double> MeanComputeMs(const Timeline& timeline) {
  // Per (stage, kind): total duration and count, for the mean.
  std::map<std::pair<StageId, ActionKind>, std::pair<TimeNs, int>> sums;
  for (const TimelineEvent& e : timeline.events) {
    if (!IsCompute(e.action.kind)) continue;
    auto& [total, count] = sums[{e.action.stage, e.action.kind}];
    total += e.end - e.start;
    ++count;
  }
  std::map<std::pair<StageId, ActionKind>, double> means;
  for (const auto& [key, sum] : sums) means[key] = NsToMs(sum.first) / sum.second;
  return means;
}

std::string MeasuredCostJson(const Timeline& timeline, const std::string& origin) {
  const auto means = MeanComputeMs(timeline);
  const StageId max_stage = means.empty() ? -1 : means.rbegin()->first.first;
  static const std::pair<ActionKind, const char*> kKinds[] = {{ActionKind::kForward, "forward_ms"},
                                                              {ActionKind::kBackward, "backward_ms"},
                                                              {ActionKind::kBackwardInput, "backward_input_ms"},
                                                              {ActionKind::kBackwardWeight, "backward_weight_ms"},
                                                              // an overlap, by its forward part's stage
                                                              {ActionKind::kOverlapFB, "forward_backward_ms"}};
  nlohmann::json stages = nlohmann::json::array();
  for (StageId s = 0; s <= max_stage; ++s) {
    nlohmann::json cost = nlohmann::json::object();
    for (const auto& [kind, key] : kKinds) {
      const auto it = means.find({s, kind});
      if (it != means.end()) cost[key] = it->second;
    }
    stages.push_back(cost);
  }
  nlohmann::json meta = {{"estimated_from", origin}, {"source", timeline.source}};
  // Their B and I already hold the recomputed forward (sim/recompute.h).
  if (!timeline.recompute.empty()) meta["recomputed"] = timeline.recompute;
  const nlohmann::json cost = {{"format", "pplab.cost"}, {"version", 1}, {"stages", stages}, {"meta", meta}};
  // Round-trip through the loader so what is returned is a usable model.
  return CostModel::FromJson(cost.dump(), origin).ToJson();
}

CostModel MeasuredCostModel(const Timeline& timeline, const std::string& origin) {
  return CostModel::FromJson(MeasuredCostJson(timeline, origin), origin);
}

}  // namespace pplab
