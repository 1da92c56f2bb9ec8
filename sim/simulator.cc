#include "sim/simulator.h"

#include <string>

#include "schedules/action_kinds.h"
#include "schedules/error.h"
#include "schedules/lowering.h"
#include "sim/simulator_engine.h"

namespace pplab {
namespace {

// Every time and byte count of the run is bounded by these sums; refusing
// plans whose sums do not fit far inside int64 keeps every figure exact.
void CheckTotals(const Schedule& s, const CostModel& costs, bool sampled) {
  constexpr double kLimit = 4e18;
  double time = 0, bytes = 0;
  for (RankId r = 0; r < s.ranks; ++r) {
    for (const Action& a : s.programs[r]) {
      if (IsCompute(a.kind)) {
        // A drawn time is at most the top of its spread.
        time += static_cast<double>(sampled ? costs.SampleComputeTime(a, 1.0) : costs.ComputeTime(a));
        for (const Action& part : PartsOf(a)) {
          // What a part may hold: its activations with an input, temporaries
          // and rebuilt activations, and an input and an output gradient.
          const StageCost& c = costs.Stage(part.stage);
          for (const Bytes b : {c.activation_bytes, c.input_bytes.value_or(c.message_bytes), c.WorkspaceOf(part.kind),
                                c.recomputed_bytes, c.input_grad_bytes.value_or(c.message_bytes), c.message_bytes,
                                c.cast_weight_bytes}) {
            bytes += static_cast<double>(b);
          }
          if (part.kind == ActionKind::kBackwardInput) {
            bytes += static_cast<double>(costs.Stage(part.stage).weight_grad_bytes);
          }
        }
      } else if (IsPerStage(a.kind)) {
        time += static_cast<double>(sampled ? costs.SampleCollectiveTime(a, 1.0) : costs.CollectiveTime(a));
        bytes += static_cast<double>(costs.Stage(a.stage).param_bytes);
      } else if (IsSend(a.kind)) {
        const StageId to = PeerStage(a);
        if (to < 0 || to >= s.stages) continue;  // reported when the action runs
        const Bytes message = costs.Stage(a.stage).message_bytes;
        time += static_cast<double>(costs.TransferTime(r, s.placement[to], message));
        // The message, and what its sender and receiver buffers hold.
        bytes += static_cast<double>(2 * message + costs.Stage(a.stage).forward_send_bytes.value_or(message));
      }
    }
  }
  if (time > kLimit || bytes > kLimit) {
    throw Error("simulate '" + s.name + "': the costs add up to more than int64 nanoseconds or bytes can hold (" +
                std::to_string(time) + " ns, " + std::to_string(bytes) + " bytes); use smaller times or sizes");
  }
}

}  // namespace

SimResult Simulate(const Schedule& schedule, const CostModel& costs, std::mt19937_64* rng) {
  CheckShape(schedule);
  costs.CheckStages(schedule.stages, schedule.name);
  costs.CheckDevices(schedule.ranks, schedule.name);
  CheckTotals(schedule, costs, rng != nullptr);
  if (!schedule.HasComm() && schedule.ranks > 1) {
    const Schedule lowered = Lower(schedule);
    return sim_engine::Engine(lowered, costs, rng).Run();
  }
  return sim_engine::Engine(schedule, costs, rng).Run();
}

}  // namespace pplab
