#include "schedules/validate.h"

#include <algorithm>
#include <map>
#include <sstream>
#include <tuple>

#include "schedules/error.h"
#include "schedules/lowering.h"

namespace pplab {
namespace {

std::string Cell(const Schedule& s, const ActionRef& ref) {
  return "rank " + std::to_string(ref.rank) + " step " + std::to_string(ref.step) + " (" +
         FormatAction(s.programs[ref.rank][ref.step]) + ")";
}

std::string MessageName(const MessageKey& m) {
  return std::string(m.forward ? "activation for stage " : "gradient for stage ") + std::to_string(m.to_stage) +
         " mb " + std::to_string(m.microbatch);
}

void CheckCompleteness(const Schedule& s, ValidationReport& out) {
  const int S = s.stages, M = s.microbatches;
  // count[kind][stage * M + mb] and where the first one was seen.
  std::vector<std::vector<int>> count(kNumActionKinds, std::vector<int>(static_cast<size_t>(S) * M, 0));
  std::vector<std::vector<ActionRef>> first(kNumActionKinds, std::vector<ActionRef>(static_cast<size_t>(S) * M));
  for (RankId r = 0; r < s.ranks; ++r) {
    for (size_t i = 0; i < s.programs[r].size(); ++i) {
      const Action& whole = s.programs[r][i];
      if (IsPerStage(whole.kind)) continue;  // CheckPerStage()
      // A composite counts as each of its parts; a message as itself.
      ComputeParts parts = PartsOf(whole);
      if (parts.count == 0) parts.part[parts.count++] = whole;
      for (const Action& a : parts) {
        const size_t key = static_cast<size_t>(a.stage) * M + a.microbatch;
        const int k = static_cast<int>(a.kind);
        if (count[k][key]++ == 0) first[k][key] = {r, static_cast<int>(i)};
        if (count[k][key] == 2) {
          const std::string inside = whole == a ? "" : " (in " + FormatAction(whole) + ")";
          out.Add({"duplicate action " + FormatAction(a) + inside + " at rank " + std::to_string(r) + " step " +
                       std::to_string(i) + " (first at " + Cell(s, first[k][key]) + ")",
                   {first[k][key], {r, static_cast<int>(i)}}});
        }
      }
    }
  }
  auto n = [&](ActionKind kind, StageId st, MicrobatchId m) {
    return count[static_cast<int>(kind)][static_cast<size_t>(st) * M + m];
  };
  auto at = [&](ActionKind kind, StageId st, MicrobatchId m) {
    return first[static_cast<int>(kind)][static_cast<size_t>(st) * M + m];
  };
  const bool lowered = s.HasComm();
  for (StageId st = 0; st < S; ++st) {
    for (MicrobatchId m = 0; m < M; ++m) {
      if (!s.Runs(st, m)) continue;  // another pipeline's microbatch (shape checks reject its actions)
      const std::string id = "stage " + std::to_string(st) + " microbatch " + std::to_string(m);
      if (n(ActionKind::kForward, st, m) == 0) out.Add({"missing F for " + id, {}});
      const int b = n(ActionKind::kBackward, st, m);
      const int i = n(ActionKind::kBackwardInput, st, m);
      const int w = n(ActionKind::kBackwardWeight, st, m);
      if (b == 0 && i == 0 && w == 0) {
        out.Add({"missing backward (B, or I and W) for " + id, {}});
      } else if (b > 0 && (i > 0 || w > 0)) {
        out.Add({"both B and I/W for " + id, {at(ActionKind::kBackward, st, m)}});
      } else if (b == 0 && i == 0) {
        out.Add({"W without I for " + id, {at(ActionKind::kBackwardWeight, st, m)}});
      } else if (b == 0 && w == 0) {
        out.Add({"I without W for " + id, {at(ActionKind::kBackwardInput, st, m)}});
      }
      if (!lowered) continue;
      // Messages this stage must send.
      const bool next_remote = st < s.LastStage(m) && s.placement[st + 1] != s.placement[st];
      const bool prev_remote = st > s.FirstStage(m) && s.placement[st - 1] != s.placement[st];
      const std::tuple<ActionKind, bool, const char*> expected[] = {
          {ActionKind::kSendF, next_remote, "stage's output goes to another rank"},
          {ActionKind::kRecvF, prev_remote, "stage's input comes from another rank"},
          {ActionKind::kSendB, prev_remote, "stage's input gradient goes to another rank"},
          {ActionKind::kRecvB, next_remote, "stage's output gradient comes from another rank"},
      };
      for (const auto& [kind, needed, why] : expected) {
        const int c = n(kind, st, m);
        if (needed && c == 0) {
          out.Add({std::string("missing ") + KindName(kind) + " for " + id + " (the " + why + ")", {}});
        } else if (!needed && c > 0) {
          out.Add({std::string("unexpected ") + FormatAction({kind, st, m}) + ": no message crosses ranks there",
                   {at(kind, st, m)}});
        }
      }
    }
  }
}

// REDUCE_GRAD at most once per stage and after every B and W of its stage;
// UNSHARD and RESHARD of a stage alternate, starting with UNSHARD and ending
// with RESHARD, and a stage that is ever unsharded computes only while it is.
void CheckPerStage(const Schedule& s, ValidationReport& out) {
  const int S = s.stages;
  std::vector<ActionRef> reduce_at(S, {-1, -1});
  std::vector<bool> sharded_fsdp(S, false);  // has any UNSHARD
  for (RankId r = 0; r < s.ranks; ++r) {
    for (const Action& a : s.programs[r]) {
      if (a.kind == ActionKind::kUnshard) sharded_fsdp[a.stage] = true;
    }
  }
  // Step of each stage's open UNSHARD on the rank at hand, or -1; reset
  // after each rank for the stages it unsharded alone, so that the check
  // costs the actions, not ranks x stages (131 072 ranks took 15 s).
  std::vector<int> unsharded_at(S, -1);
  std::vector<StageId> unsharded;  // the stages this rank unsharded
  for (RankId r = 0; r < s.ranks; ++r) {
    const Program& p = s.programs[r];
    unsharded.clear();
    for (int i = 0; i < static_cast<int>(p.size()); ++i) {
      const Action& a = p[i];
      const ActionRef here{r, i};
      const StageId st = a.stage;
      switch (a.kind) {
        case ActionKind::kReduceGrad:
          if (reduce_at[st].rank >= 0) {
            out.Add({"duplicate REDUCE_GRAD for stage " + std::to_string(st) + " at " + Cell(s, here) + " (first at " +
                         Cell(s, reduce_at[st]) + ")",
                     {reduce_at[st], here}});
          } else {
            reduce_at[st] = here;
          }
          break;
        case ActionKind::kUnshard:
          if (unsharded_at[st] >= 0) {
            out.Add({"UNSHARD of stage " + std::to_string(st) + " at " + Cell(s, here) +
                         " while it is unsharded since " + Cell(s, {r, unsharded_at[st]}) + " (no RESHARD between)",
                     {{r, unsharded_at[st]}, here}});
          }
          unsharded_at[st] = i;
          unsharded.push_back(st);
          break;
        case ActionKind::kReshard:
          if (unsharded_at[st] < 0) {
            out.Add(
                {"RESHARD of stage " + std::to_string(st) + " at " + Cell(s, here) + " without an UNSHARD before it",
                 {here}});
          }
          unsharded_at[st] = -1;
          break;
        default:
          for (const Action& part : PartsOf(a)) {
            if (sharded_fsdp[part.stage] && unsharded_at[part.stage] < 0) {
              out.Add({"compute on stage " + std::to_string(part.stage) + " at " + Cell(s, here) +
                           " while its parameters are sharded (no UNSHARD before it since the last RESHARD)",
                       {here}});
            }
            if (part.kind == ActionKind::kBackward || part.kind == ActionKind::kBackwardWeight) {
              if (reduce_at[part.stage].rank >= 0) {
                out.Add({"REDUCE_GRAD for stage " + std::to_string(part.stage) + " at " +
                             Cell(s, reduce_at[part.stage]) + " comes before " + Cell(s, here) +
                             ": it must follow every B and W of its stage",
                         {reduce_at[part.stage], here}});
              }
            }
          }
      }
    }
    std::sort(unsharded.begin(), unsharded.end());
    unsharded.erase(std::unique(unsharded.begin(), unsharded.end()), unsharded.end());
    for (const StageId st : unsharded) {
      if (unsharded_at[st] >= 0) {
        out.Add({"UNSHARD of stage " + std::to_string(st) + " at " + Cell(s, {r, unsharded_at[st]}) +
                     " is never followed by its RESHARD",
                 {{r, unsharded_at[st]}}});
      }
      unsharded_at[st] = -1;
    }
  }
}

void CheckChannels(const Schedule& s, ValidationReport& out) {
  // (from, to) -> messages in program order, with their cells.
  std::map<std::pair<RankId, RankId>, std::vector<std::pair<MessageKey, ActionRef>>> sends, recvs;
  for (RankId r = 0; r < s.ranks; ++r) {
    for (size_t i = 0; i < s.programs[r].size(); ++i) {
      const Action& a = s.programs[r][i];
      if (!IsComm(a.kind)) continue;
      const MessageKey msg = MessageOf(a);
      if (msg.to_stage < 0 || msg.to_stage >= s.stages) {
        out.Add({FormatAction(a) + " at rank " + std::to_string(r) + " step " + std::to_string(i) + " talks to stage " +
                     std::to_string(msg.to_stage) + ", which does not exist",
                 {{r, static_cast<int>(i)}}});
        continue;
      }
      if (IsSend(a.kind)) {
        sends[{r, s.placement[msg.to_stage]}].push_back({msg, {r, static_cast<int>(i)}});
      } else {
        const StageId from_stage = PeerStage(a);
        if (from_stage < 0 || from_stage >= s.stages) {
          out.Add({FormatAction(a) + " at rank " + std::to_string(r) + " step " + std::to_string(i) +
                       " expects a message from stage " + std::to_string(from_stage) + ", which does not exist",
                   {{r, static_cast<int>(i)}}});
          continue;
        }
        recvs[{s.placement[from_stage], r}].push_back({msg, {r, static_cast<int>(i)}});
      }
    }
  }
  for (const auto& [channel, sent] : sends) {
    const auto it = recvs.find(channel);
    const size_t n = std::min(sent.size(), it == recvs.end() ? 0 : it->second.size());
    for (size_t k = 0; k < n; ++k) {
      const auto& [sm, sref] = sent[k];
      const auto& [rm, rref] = it->second[k];
      if (!(sm == rm)) {
        out.Add({"channel rank " + std::to_string(channel.first) + " -> rank " + std::to_string(channel.second) +
                     " out of order at message " + std::to_string(k) + ": " + Cell(s, sref) + " sends the " +
                     MessageName(sm) + " but " + Cell(s, rref) + " receives the " + MessageName(rm),
                 {sref, rref}});
        break;
      }
    }
  }
}

void CheckDeadlock(const Schedule& s, ValidationReport& out) {
  const ActionIndex index(s);
  const std::vector<int> cycle = FindCycle(index.NumNodes(), DependencyEdges(s, index));
  if (cycle.empty()) return;
  Problem p;
  // Name the cycle by the actions where it changes rank or leaves program
  // order; program-order runs in between are implied.
  std::vector<ActionRef> refs;
  for (int node : cycle) refs.push_back(index.Ref(node));
  std::ostringstream msg;
  msg << "deadlock: cycle of " << refs.size() << " dependent actions:";
  const size_t n = refs.size();
  int shown = 0;
  for (size_t k = 0; k < n; ++k) {
    const ActionRef& a = refs[k];
    const ActionRef& prev = refs[(k + n - 1) % n];
    const ActionRef& next = refs[(k + 1) % n];
    const bool inner = prev.rank == a.rank && prev.step + 1 == a.step && next.rank == a.rank && a.step + 1 == next.step;
    if (inner && n > 8) continue;
    msg << (shown++ ? " -> " : " ") << Cell(s, a);
    p.cells.push_back(a);
  }
  msg << " -> back to the first";
  p.message = msg.str();
  out.Add(std::move(p));
}

}  // namespace

std::vector<Problem> ShapeProblems(const Schedule& schedule) {
  std::vector<Problem> out;
  try {
    // Whole-schedule fields first: without them no cell can be checked.
    CheckHeader(schedule);
  } catch (const Error& e) {
    out.push_back({e.what(), {}});
    return out;
  }
  for (RankId r = 0; r < schedule.ranks; ++r) {
    const Program& program = schedule.programs[r];
    for (size_t i = 0; i < program.size(); ++i) {
      const Action& a = program[i];
      const std::string why = WhyOutOfPlace(schedule, r, a);
      if (!why.empty()) {
        out.push_back(
            {"rank " + std::to_string(r) + " step " + std::to_string(i) + " action " + FormatAction(a) + ": " + why,
             {{r, static_cast<int>(i)}}});
      }
    }
  }
  return out;
}

void ValidationReport::Add(Problem problem) {
  if (problems.size() < kMaxProblems) {
    problems.push_back(std::move(problem));
  } else {
    ++omitted;
  }
}

ValidationReport Validate(const Schedule& schedule) {
  ValidationReport report;
  for (Problem& p : ShapeProblems(schedule)) report.Add(std::move(p));
  if (!report.ok()) return report;
  CheckCompleteness(schedule, report);
  CheckPerStage(schedule, report);
  CheckChannels(schedule, report);
  CheckDeadlock(schedule, report);
  return report;
}

ValidationReport ValidateFromFile(Schedule& schedule, bool* lowered) {
  if (lowered != nullptr) *lowered = false;
  if (schedule.HasComm() || schedule.ranks <= 1) return Validate(schedule);
  ValidationReport as_written = Validate(schedule);
  if (!as_written.ok()) return as_written;
  schedule = Lower(schedule);
  if (lowered != nullptr) *lowered = true;
  return Validate(schedule);
}

std::string FormatStepGrid(const Schedule& schedule, int first_step, int num_steps,
                           const std::vector<ActionRef>& marked) {
  size_t width = 4;
  for (int step = first_step; step < first_step + num_steps; ++step) {
    for (const Program& p : schedule.programs) {
      if (step < static_cast<int>(p.size())) width = std::max(width, FormatAction(p[step]).size() + 2);
    }
  }
  std::ostringstream out;
  // A grid of a large plan can outgrow memory: a stream short of memory only
  // sets badbit and stops, so it must throw instead (main says "out of
  // memory") rather than print part of the grid as if it were whole.
  out.exceptions(std::ios::badbit);
  out << "rank\\step";
  for (int step = first_step; step < first_step + num_steps; ++step) {
    const std::string h = std::to_string(step);
    out << ' ' << std::string(width - std::min(width, h.size()), ' ') << h;
  }
  out << '\n';
  // Many ranks: show those around the marked cells only.
  RankId first_rank = 0, last_rank = schedule.ranks - 1;
  constexpr int kMaxRows = 16;
  if (schedule.ranks > kMaxRows && !marked.empty()) {
    RankId lo = marked.front().rank, hi = lo;
    for (const ActionRef& c : marked) {
      lo = std::min(lo, c.rank);
      hi = std::max(hi, c.rank);
    }
    first_rank = std::max(0, lo - 2);
    last_rank = std::min(schedule.ranks - 1, std::max(hi + 2, first_rank + kMaxRows - 1));
  }
  for (RankId r = first_rank; r <= last_rank; ++r) {
    const std::string label = std::to_string(r);
    out << std::string(9 - std::min<size_t>(9, label.size()), ' ') << label;
    const Program& p = schedule.programs[r];
    for (int step = first_step; step < first_step + num_steps; ++step) {
      std::string cell = step < static_cast<int>(p.size()) ? FormatAction(p[step]) : ".";
      if (std::find(marked.begin(), marked.end(), ActionRef{r, step}) != marked.end()) cell = "[" + cell + "]";
      out << ' ' << std::string(width - std::min(width, cell.size()), ' ') << cell;
    }
    out << '\n';
  }
  return out.str();
}

std::string FormatReport(const Schedule& schedule, const ValidationReport& report) {
  std::ostringstream out;
  if (report.ok()) {
    out << "schedule '" << schedule.name << "' is valid: " << schedule.ranks << " ranks, " << schedule.stages
        << " stages, " << schedule.microbatches << " microbatches, " << schedule.NumActions() << " actions\n";
    return out.str();
  }
  out << "schedule '" << schedule.name << "' is invalid: " << report.problems.size() + report.omitted
      << " problem(s)\n";
  const size_t kMaxListed = 20;
  for (size_t i = 0; i < report.problems.size() && i < kMaxListed; ++i) {
    out << "  - " << report.problems[i].message << '\n';
  }
  const size_t total = report.problems.size() + report.omitted;
  if (total > kMaxListed) out << "  ... and " << total - kMaxListed << " more\n";
  for (const Problem& p : report.problems) {
    if (p.cells.empty()) continue;
    int lo = p.cells.front().step, hi = lo;
    for (const ActionRef& c : p.cells) {
      lo = std::min(lo, c.step);
      hi = std::max(hi, c.step);
    }
    const int kMaxColumns = 16;
    const int first = std::max(0, lo - 2);
    const int count = std::min(hi + 3 - first, kMaxColumns);
    out << "\nrank x step grid around the first problem, offending cells in [ ]:\n"
        << FormatStepGrid(schedule, first, count, p.cells);
    break;
  }
  return out.str();
}

}  // namespace pplab
