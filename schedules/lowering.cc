#include "schedules/lowering.h"

#include <algorithm>
#include <map>

#include "schedules/error.h"

namespace pplab {
namespace {

// Moves receives earlier where needed so that on every channel (ordered pair
// of ranks) the receiver posts its RECVs in the order the sender sends. When
// a rank needs message Y, it first receives every message its peer sent on
// the same channel before Y. This adds no cycle: the peer sent those before Y
// in its own program order, and the receiver was already waiting for Y.
void OrderReceivesBySender(const Schedule& s, std::vector<Program>& programs) {
  // (from, to) -> RECV actions in the sender's order, and a cursor into it.
  std::map<std::pair<RankId, RankId>, std::vector<Action>> order;
  std::map<std::pair<RankId, RankId>, size_t> cursor;
  for (RankId r = 0; r < s.ranks; ++r) {
    for (const Action& a : programs[r]) {
      if (!IsSend(a.kind)) continue;
      const Action recv = MatchingRecv(a);
      order[{r, s.placement[recv.stage]}].push_back(recv);
    }
  }
  for (RankId r = 0; r < s.ranks; ++r) {
    Program out;
    out.reserve(programs[r].size());
    std::vector<Action> pulled;  // received early; skipped where they stood
    for (const Action& a : programs[r]) {
      if (!IsRecv(a.kind)) {
        out.push_back(a);
        continue;
      }
      const auto found = std::find(pulled.begin(), pulled.end(), a);
      if (found != pulled.end()) {
        pulled.erase(found);
        continue;
      }
      const std::pair<RankId, RankId> channel{s.placement[PeerStage(a)], r};
      const std::vector<Action>& sent = order[channel];
      size_t& next = cursor[channel];
      while (next < sent.size() && sent[next] != a) {
        out.push_back(sent[next]);
        pulled.push_back(sent[next]);
        ++next;
      }
      out.push_back(a);
      if (next < sent.size()) ++next;
    }
    programs[r] = std::move(out);
  }
}

}  // namespace

Schedule Lower(const Schedule& compute_only) {
  CheckShape(compute_only);
  if (compute_only.HasComm()) {
    throw Error("schedule '" + compute_only.name + "' already holds SEND/RECV actions; lower a compute-only schedule");
  }
  Schedule out = compute_only;
  const auto& place = compute_only.placement;
  for (RankId r = 0; r < compute_only.ranks; ++r) {
    const Program& in = compute_only.programs[r];
    Program& program = out.programs[r];
    program.clear();
    program.reserve(in.size() * 3);
    for (const Action& a : in) {
      // Receives of every part before the action, sends of every part after
      // it: an OVERLAP_F_B needs both inputs to start and yields both outputs
      // when it ends.
      Action after[2];
      int num_after = 0;
      for (const Action& part : PartsOf(a)) {
        const StageId s = part.stage;
        const MicrobatchId m = part.microbatch;
        const bool prev_remote = s > compute_only.FirstStage(m) && place[s - 1] != r;
        const bool next_remote = s < compute_only.LastStage(m) && place[s + 1] != r;
        if (part.kind == ActionKind::kForward) {
          if (prev_remote) program.push_back({ActionKind::kRecvF, s, m});
          if (next_remote) after[num_after++] = {ActionKind::kSendF, s, m};
        } else if (IsInputGrad(part.kind)) {
          if (next_remote) program.push_back({ActionKind::kRecvB, s, m});
          if (prev_remote) after[num_after++] = {ActionKind::kSendB, s, m};
        }
      }
      program.push_back(a);
      program.insert(program.end(), after, after + num_after);
    }
  }
  OrderReceivesBySender(out, out.programs);
  return out;
}

Schedule StripComm(const Schedule& schedule) {
  Schedule out = schedule;
  for (Program& p : out.programs) {
    Program kept;
    kept.reserve(p.size());
    for (const Action& a : p) {
      if (!IsComm(a.kind)) kept.push_back(a);
    }
    p = std::move(kept);
  }
  return out;
}

int DropFsdpActions(Schedule& schedule) {
  int dropped = 0;
  for (Program& p : schedule.programs) {
    const auto fsdp = [](const Action& a) { return a.kind == ActionKind::kUnshard || a.kind == ActionKind::kReshard; };
    const auto kept = std::remove_if(p.begin(), p.end(), fsdp);
    dropped += static_cast<int>(p.end() - kept);
    p.erase(kept, p.end());
  }
  return dropped;
}

Schedule AddReduceGrad(const Schedule& schedule) {
  CheckShape(schedule);
  Schedule out = schedule;
  // Gradients of a stage are complete after M actions that end one: B, or W.
  std::vector<int> done(schedule.stages, 0);
  for (Program& p : out.programs) {
    Program with;
    with.reserve(p.size() + 4);
    for (const Action& a : p) {
      if (a.kind == ActionKind::kReduceGrad) {
        throw Error("schedule '" + schedule.name + "' already holds REDUCE_GRAD actions");
      }
      with.push_back(a);
      for (const Action& part : PartsOf(a)) {
        if (part.kind != ActionKind::kBackward && part.kind != ActionKind::kBackwardWeight) continue;
        if (++done[part.stage] == schedule.MicrobatchesThrough(part.stage)) {
          with.push_back({ActionKind::kReduceGrad, part.stage, 0});
        }
      }
    }
    p = std::move(with);
  }
  return out;
}

std::string MissingReduceGrad(const Schedule& schedule) {
  for (RankId r = 0; r < schedule.ranks; ++r) {
    for (StageId s : schedule.StagesOf(r)) {
      const Program& p = schedule.programs[r];
      const bool found = std::any_of(
          p.begin(), p.end(), [s](const Action& a) { return a.kind == ActionKind::kReduceGrad && a.stage == s; });
      if (!found) return "rank " + std::to_string(r) + " has no REDUCE_GRAD for stage " + std::to_string(s);
    }
  }
  return "";
}

}  // namespace pplab
