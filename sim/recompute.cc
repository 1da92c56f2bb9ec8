#include "sim/recompute.h"

#include "schedules/error.h"
#include "schedules/int_list.h"

namespace pplab {
namespace {

std::optional<Spread> Shifted(const std::optional<Spread>& spread, TimeNs by) {
  if (!spread) return std::nullopt;
  return Spread{spread->p10 + by, spread->p90 + by};
}

}  // namespace

std::set<StageId> ParseRecomputeStages(const std::string& text, int stages, const std::string& flag) {
  std::set<StageId> out;
  if (text == "none") return out;
  if (text == "all") {
    for (StageId s = 0; s < stages; ++s) out.insert(s);
    return out;
  }
  const std::optional<std::vector<int>> ids = ParseIntList(text);
  if (!ids) throw Error(flag + " takes none, all, or stage ids separated by commas (e.g. 0,1); got '" + text + "'");
  for (const int s : *ids) {
    const std::string item = std::to_string(s);
    if (s >= stages) {
      throw Error(flag + " names stage " + item + ", but the plan has stages 0 to " + std::to_string(stages - 1));
    }
    if (!out.insert(s).second) throw Error(flag + " names stage " + item + " twice");
  }
  return out;
}

std::string FormatRecomputeStages(const std::set<StageId>& stages, int num_stages) {
  if (stages.empty()) return "none";
  if (static_cast<int>(stages.size()) == num_stages) return "all";
  std::string out;
  for (StageId s : stages) out += (out.empty() ? "" : ",") + std::to_string(s);
  return out;
}

CostModel WithRecompute(const CostModel& costs, const std::set<StageId>& stages,
                        const std::set<StageId>& token_stages) {
  if (stages.empty()) return costs;
  CostModel out = costs;
  for (StageId s = 0; s < costs.NumStages(); ++s) {
    StageCost c = costs.Stage(s);
    c.forward_backward.reset();
    if (stages.count(s) > 0) {
      if (!c.forward) {
        throw Error(costs.Origin() + ": stage " + std::to_string(s) + " has no forward_ms, which recomputing it needs");
      }
      if (c.graph_slot_bytes) {
        throw Error(costs.Origin() + ": stage " + std::to_string(s) +
                    " ran as CUDA graphs (graph_slot_bytes), whose slots keep the activations: it is not recomputed");
      }
      const TimeNs f = *c.forward;
      if (c.backward || (c.backward_input && c.backward_weight)) {
        // B, I and W all follow from what is given (CostModel::ComputeTime).
        const TimeNs b = costs.ComputeTime({ActionKind::kBackward, s, 0});
        const TimeNs i = costs.ComputeTime({ActionKind::kBackwardInput, s, 0});
        const TimeNs w = costs.ComputeTime({ActionKind::kBackwardWeight, s, 0});
        c.backward = b + f;
        c.backward_input = i + f;
        c.backward_weight = w;
      } else if (c.backward_input) {
        c.backward_input = *c.backward_input + f;
      }
      c.backward_spread = Shifted(c.backward_spread, f);
      c.backward_input_spread = Shifted(c.backward_input_spread, f);
      c.recomputed_bytes = c.activation_bytes;
      c.activation_bytes = c.input_bytes ? *c.input_bytes : (token_stages.count(s) > 0 ? 0 : c.message_bytes);
      // The stage no longer keeps its outputs: a sent message's buffer is
      // the transport's alone, a copy or the outputs themselves.
      c.forward_send_bytes = c.message_bytes;
      // What F keeps is its input, whichever way it came (a stage fed on
      // its rank shares it with the previous stage's outputs while that
      // stage keeps them: Engine::ActivationOf).
      if (token_stages.count(s) == 0) c.activation_includes_input = true;
    }
    out.SetStage(s, c);
  }
  return out;
}

}  // namespace pplab
