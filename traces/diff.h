// Diff of two timelines of one plan: a predicted one (the simulator's) and a
// measured one (the executor's), aligned action by action.
//
// Both timelines' actions are compared shifted so that their earliest compute
// starts at 0; the summaries (makespan, busy, idle) are of the timelines as
// they are, from the step's start, as stats and explain read them.
// Actions are matched by (rank, kind, stage, microbatch) and, should a rank
// run the same action twice, by occurrence. Compute actions (F, B, I, W) must
// match one to one: a trace pair whose compute actions differ is not two
// timelines of one plan and is refused. SEND/RECV may be present on one side
// only (a simulated trace of an unlowered plan has none); they are counted,
// not compared.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "traces/timeline.h"

namespace pplab {

// One compute action on both sides; times in ns after the shift.
struct ActionDeviation {
  RankId rank = 0;
  Action action;
  TimeNs predicted_start = 0, predicted_end = 0;
  TimeNs measured_start = 0, measured_end = 0;

  TimeNs StartDelta() const { return measured_start - predicted_start; }  // > 0: measured started later
  TimeNs DurationDelta() const { return (measured_end - measured_start) - (predicted_end - predicted_start); }
};

struct DiffOptions {
  // |measured start - predicted start| above this is drift; default (nullopt)
  // 5% of the predicted makespan.
  std::optional<TimeNs> threshold;
  int top = 10;  // how many of the largest deviations to keep, >= 0
};

struct TimelineDiff {
  int ranks = 0;
  TimelineSummary predicted, measured;  // of the timelines as given (not shifted)
  size_t matched_compute = 0;
  // Actions present on one side (not compute, which must match: SEND/RECV,
  // REDUCE_GRAD and the other collectives), and how many of each kind
  // (by its name, such as "REDUCE_GRAD").
  size_t only_predicted = 0, only_measured = 0;
  std::map<std::string, size_t> only_predicted_kinds, only_measured_kinds;
  TimeNs threshold = 0;  // the one applied
  // Largest |StartDelta()| first (ties: earlier predicted start, lower rank).
  std::vector<ActionDeviation> top_start;
  // Largest |DurationDelta()| first (same ties).
  std::vector<ActionDeviation> top_duration;
  // In order of predicted start (ties: lower rank, then program order), the
  // first compute action whose |StartDelta()| exceeds the threshold.
  std::optional<ActionDeviation> first_drift;
  // Each rank's largest "activation bytes" counter sample (Timeline::
  // memory: the bytes held between actions, temporaries not included), on
  // each side; none where that side has no sample for the rank (a measured
  // trace has them with train --measure-memory).
  std::vector<std::optional<Bytes>> predicted_held, measured_held;
};

// Returns `timeline` with every event (step events too) and memory sample moved so that the
// earliest compute start is 0 (unchanged if it has no compute event).
Timeline ShiftToZero(const Timeline& timeline);

// Diffs `predicted` against `measured`. `predicted_origin` and
// `measured_origin` (file names) name the sides in errors. Throws
// pplab::Error when the rank counts differ, when either side has no compute
// action, or when the compute actions differ (naming an example of each).
TimelineDiff DiffTimelines(const Timeline& predicted, const Timeline& measured, const DiffOptions& options,
                           const std::string& predicted_origin = "predicted",
                           const std::string& measured_origin = "measured");

}  // namespace pplab
