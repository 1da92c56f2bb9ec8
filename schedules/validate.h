// Validation of a lowered schedule: completeness, message matching, channel
// order and freedom from deadlock (no cycle in the dependency DAG).
#pragma once

#include <string>
#include <vector>

#include "schedules/dependencies.h"
#include "schedules/schedule.h"

namespace pplab {

struct Problem {
  std::string message;           // one line, names the actions at fault
  std::vector<ActionRef> cells;  // the offending (rank, step) cells, if any
};

struct ValidationReport {
  static constexpr size_t kMaxProblems = 1000;
  std::vector<Problem> problems;  // the first kMaxProblems problems found
  size_t omitted = 0;             // problems found beyond those
  bool ok() const { return problems.empty(); }
  void Add(Problem problem);
};

// Checks `schedule` (normally the output of Lower()):
//   - shape: ids in range, each action on its stage's rank;
//   - completeness: every (stage, microbatch) has one F and either one B or
//     one I and one W; every message between stages on different ranks has
//     exactly one SEND and one RECV, and there are no others;
//   - channel order: for each ordered rank pair, the SENDs on the sender and
//     the RECVs on the receiver list the same messages in the same order;
//   - per-stage actions: at most one REDUCE_GRAD per stage, after every B
//     and W of its stage; UNSHARD/RESHARD of a stage alternate (UNSHARD
//     first, RESHARD last) and a stage that is ever unsharded computes only
//     while it is;
//   - deadlock: the dependency DAG (dependencies.h) has no cycle.
// Never throws for a bad schedule: problems are returned.
ValidationReport Validate(const Schedule& schedule);

// A schedule read from a file, checked as the simulator and the runtime
// take it. One without SEND/RECV on several ranks is checked as written
// first, so that its problems name the actions and steps the file holds
// (lowering a duplicated F would make a second RECV the first problem),
// and, when it has none, lowered in place (Lower()) and checked again for
// what only messages show (a cycle through them). `lowered` says whether
// `schedule` was lowered here. Never throws for a bad schedule.
ValidationReport ValidateFromFile(Schedule& schedule, bool* lowered = nullptr);

// The problems found in the shape of a schedule (see CheckShape()).
std::vector<Problem> ShapeProblems(const Schedule& schedule);

// The report as text: one line per problem, then for the first problem with
// cells the rank x step grid around them with those cells marked [like this].
std::string FormatReport(const Schedule& schedule, const ValidationReport& report);

// Rank x step grid of programs[rank][first_step, first_step + num_steps),
// one row per rank (with more than 16 ranks and marked cells, only the ranks
// around them), cells in `marked` shown as [cell].
std::string FormatStepGrid(const Schedule& schedule, int first_step, int num_steps,
                           const std::vector<ActionRef>& marked = {});

}  // namespace pplab
