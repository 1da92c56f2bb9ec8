#include "schedules/lowering.h"

#include "schedules/error.h"

namespace pplab {

Schedule Lower(const Schedule& compute_only) {
  CheckShape(compute_only);
  if (compute_only.HasComm()) {
    throw Error("schedule '" + compute_only.name + "' already holds SEND/RECV actions; lower a compute-only schedule");
  }
  Schedule out = compute_only;
  const int S = compute_only.stages;
  const auto& place = compute_only.placement;
  for (RankId r = 0; r < compute_only.ranks; ++r) {
    const Program& in = compute_only.programs[r];
    Program& program = out.programs[r];
    program.clear();
    program.reserve(in.size() * 3);
    for (const Action& a : in) {
      const StageId s = a.stage;
      const MicrobatchId m = a.microbatch;
      const bool prev_remote = s > 0 && place[s - 1] != r;
      const bool next_remote = s < S - 1 && place[s + 1] != r;
      if (a.kind == ActionKind::kForward) {
        if (prev_remote) program.push_back({ActionKind::kRecvF, s, m});
        program.push_back(a);
        if (next_remote) program.push_back({ActionKind::kSendF, s, m});
      } else if (IsInputGrad(a.kind)) {
        if (next_remote) program.push_back({ActionKind::kRecvB, s, m});
        program.push_back(a);
        if (prev_remote) program.push_back({ActionKind::kSendB, s, m});
      } else {
        program.push_back(a);
      }
    }
  }
  return out;
}

Schedule StripComm(const Schedule& schedule) {
  Schedule out = schedule;
  for (Program& p : out.programs) {
    Program kept;
    kept.reserve(p.size());
    for (const Action& a : p) {
      if (IsCompute(a.kind)) kept.push_back(a);
    }
    p = std::move(kept);
  }
  return out;
}

}  // namespace pplab
