// Why each rank of a timeline is idle: `pplab explain`.
//
// Idle time of a rank is makespan - busy (busy: the sum of its compute
// actions' durations, F, B, I, W and OVERLAP_F_B). It is split, in integer
// nanoseconds, into parts that add up to it exactly:
//   warm_up        [0, start of the rank's first compute)
//   cool_down      [end of its last compute, makespan)
// and, for each gap between two consecutive compute actions of the rank,
// point by point, the first rule that holds:
//   comm           a per-stage collective (REDUCE_GRAD, UNSHARD, RESHARD) of
//                  the rank runs
//   imbalance      the next action waits for a message whose producer (the
//                  F or B/I of the sending stage) has not finished yet; the
//                  time is booked to that stage (imbalance_by_stage)
//   comm           the message is produced but has not arrived (queued on
//                  the sender or in flight)
//   shared_device  the data is there, but other ranks on the same device
//                  compute in all of its slots (only with
//                  Timeline::devices; one slot unless device_slots says)
//   comm           a send of the rank runs (an executor that waits for its
//                  sends, as a measured one may: the time is the link's)
//   other          none of these: the data is there, the device is free and
//                  no send of the rank runs (executor overhead in a measured
//                  trace; 0 in every simulated one)
// The message an action waits for is, of the messages its parts receive on
// this rank (a RECV of the rank with the same message), the one that
// arrives last (the RECV's end); a gap with no such message is only comm
// (collectives, the rank's own sends), shared_device or other. Specified in docs/explain.md.
#pragma once

#include <map>
#include <vector>

#include "traces/timeline.h"

namespace pplab {

struct RankIdle {
  RankId rank = 0;
  TimeNs busy = 0;
  TimeNs idle = 0;  // makespan - busy = warm_up + cool_down + imbalance + comm + shared_device + other
  TimeNs warm_up = 0;
  TimeNs cool_down = 0;
  TimeNs imbalance = 0;
  TimeNs comm = 0;
  TimeNs shared_device = 0;
  TimeNs other = 0;
  std::map<StageId, TimeNs> imbalance_by_stage;  // the stages waited for; sums to imbalance
};

struct IdleExplanation {
  TimeNs makespan = 0;
  std::vector<RankIdle> per_rank;  // one per rank of the timeline
};

// Splits each rank's idle time as above. Throws pplab::Error when two
// compute actions of one rank overlap in time (the split needs one compute
// action at a time per rank), naming the rank and both actions.
IdleExplanation ExplainIdle(const Timeline& timeline);

// `r` rounded to multiples of `unit` ns for a table that prints them:
// busy + idle is makespan rounded, and the parts add up to idle rounded and
// the stages to imbalance, each apportioned by the largest remainder (each
// part rounded apart, the parts of a rank could miss its idle by a digit).
// Stages that round to 0 are left out.
RankIdle RoundedIdle(const RankIdle& r, TimeNs makespan, TimeNs unit);

// Whether ExplainIdle accepts `timeline` (no rank runs two compute actions
// at once), for callers that show the split only where it exists.
bool CanExplainIdle(const Timeline& timeline);

}  // namespace pplab
