#include "sim/measured_costs.h"

#include <map>
#include <nlohmann/json.hpp>

namespace pplab {

std::string MeasuredCostJson(const Timeline& timeline, const std::string& origin) {
  // Per (stage, kind): total duration and count, for the mean.
  std::map<std::pair<StageId, ActionKind>, std::pair<TimeNs, int>> per_stage;
  StageId max_stage = -1;
  for (const TimelineEvent& e : timeline.events) {
    if (!IsCompute(e.action.kind)) continue;
    auto& [total, count] = per_stage[{e.action.stage, e.action.kind}];
    total += e.end - e.start;
    ++count;
    max_stage = std::max(max_stage, e.action.stage);
  }
  static const std::pair<ActionKind, const char*> kKinds[] = {{ActionKind::kForward, "forward_ms"},
                                                              {ActionKind::kBackward, "backward_ms"},
                                                              {ActionKind::kBackwardInput, "backward_input_ms"},
                                                              {ActionKind::kBackwardWeight, "backward_weight_ms"}};
  nlohmann::json stages = nlohmann::json::array();
  for (StageId s = 0; s <= max_stage; ++s) {
    nlohmann::json cost = nlohmann::json::object();
    for (const auto& [kind, key] : kKinds) {
      const auto it = per_stage.find({s, kind});
      if (it != per_stage.end() && it->second.second > 0) cost[key] = NsToMs(it->second.first) / it->second.second;
    }
    stages.push_back(cost);
  }
  const nlohmann::json cost = {{"format", "pplab.cost"},
                               {"version", 1},
                               {"stages", stages},
                               {"meta", {{"estimated_from", origin}, {"source", timeline.source}}}};
  // Round-trip through the loader so what is returned is a usable model.
  return CostModel::FromJson(cost.dump(), origin).ToJson();
}

CostModel MeasuredCostModel(const Timeline& timeline, const std::string& origin) {
  return CostModel::FromJson(MeasuredCostJson(timeline, origin), origin);
}

}  // namespace pplab
