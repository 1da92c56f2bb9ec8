// Timeline: what ran where and when. The simulator predicts one, the
// executor measures one; both are written in one trace format
// (chrome_trace.h) with the same event names.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "schedules/action.h"
#include "schedules/units.h"

namespace pplab {

struct TimelineEvent {
  RankId rank = 0;
  Action action;
  TimeNs start = 0;  // compute: start of the work; SEND: start of the transfer; RECV: when posted
  TimeNs end = 0;    // compute: end of the work; SEND: arrival at the peer; RECV: arrival (>= start)
};

// Time order of one rank's compute events: by start, then end, so that a
// zero-length action comes before one that starts with it (whatever their
// order in a file).
inline bool RunsBefore(const TimelineEvent& a, const TimelineEvent& b) {
  return a.start != b.start ? a.start < b.start : a.end < b.end;
}

// The per-step work a trace may hold, as a cost model's `step` names it.
inline constexpr const char* kStepEventNames[] = {"loss_allreduce", "norm_allreduce", "clip",
                                                  "optimizer",      "tied_exchange",  "copy_exchange"};

// Per-step work after a rank's last action, outside the schedule IR: the
// loss and gradient-norm all-reduces, clipping, the optimizer step.
struct StepEvent {
  RankId rank = 0;
  std::string name;  // one of kStepEventNames
  TimeNs start = 0;
  TimeNs end = 0;
};

// A point of a per-rank counter track (activation bytes held by the rank).
struct MemorySample {
  RankId rank = 0;
  TimeNs time = 0;
  Bytes bytes = 0;
};

struct Timeline {
  std::string name;    // schedule name
  std::string source;  // "simulated" or "measured"
  int ranks = 0;
  // The device each rank runs on, when ranks share devices (several ranks on
  // one GPU): devices[r] for rank r. Empty: every rank has its own device.
  std::vector<int> devices;
  // How many compute actions each device runs at once, device_slots[d] for
  // device id d (a CPU host's cores / threads per rank); empty: 1 each.
  std::vector<int> device_slots;
  // The stages a measured run recomputed (train --recompute): "all" or ids
  // like "0,1"; empty when none. Their B and I hold the recomputed forward.
  std::string recompute;
  // The replicas of the pipeline that its REDUCE_GRADs all-reduced over
  // (train --dp D; a cost file's data_parallel.degree); 1: none.
  int data_parallel = 1;
  std::vector<TimelineEvent> events;   // per rank in program order
  std::vector<MemorySample> memory;    // per rank in time order
  std::vector<StepEvent> step_events;  // per rank in time order

  // Latest end over events that occupy a rank: compute, per-stage
  // collectives and per-step work (the step time).
  TimeNs Makespan() const;
  // Moves every event, step event and memory sample `earlier` ns earlier.
  void ShiftEarlier(TimeNs earlier);
  // The earliest time of any event (actions, step work, memory samples);
  // 0 for a timeline without events.
  TimeNs Start() const;
};

// Busy and idle time of a timeline, from its compute events (the makespan
// also from its collectives and step events), so that
// simulated and measured timelines are summarised the same way.
struct RankSummary {
  TimeNs busy = 0;   // sum of compute durations
  TimeNs start = 0;  // first compute start (0 if the rank computes nothing)
  TimeNs end = 0;    // last compute end
};

struct TimelineSummary {
  TimeNs makespan = 0;  // latest end of compute or collective; time is measured from 0
  std::vector<RankSummary> per_rank;
  // 1 - sum(busy) / (K * makespan): idle against the global makespan.
  double bubble_fraction = 0;
  // max over ranks of 1 - busy / (end - start): idle inside each rank's span.
  double span_bubble_fraction = 0;
};

TimelineSummary Summarize(const Timeline& timeline);

// Each rank's memory samples (Timeline::memory) in time order, samples[r]
// for ranks 0 .. timeline.ranks - 1; samples of other ranks are dropped.
std::vector<std::vector<MemorySample>> MemoryByRank(const Timeline& timeline);

// Each rank's largest memory sample of `timeline` (none for a rank
// without samples), for ranks 0 .. timeline.ranks - 1.
std::vector<std::optional<Bytes>> LargestHeldBytes(const Timeline& timeline);

// How ranks that share a device used it (Timeline::devices), over the
// trace's compute actions. On a measured trace, more of its ranks computing
// at once than it has slots means the device was time-sliced between them,
// each action stretched by the others' (two processes on one GPU); a
// simulated device with one slot runs one at a time, so that time is 0.
struct DeviceUse {
  int device = 0;
  std::vector<RankId> ranks;  // in order
  int slots = 1;
  TimeNs busy = 0;        // some rank of it computing
  TimeNs over_slots = 0;  // more of its ranks computing at once than its slots
  TimeNs compute = 0;     // the sum of its ranks' compute durations
};

// One entry per device that two or more ranks share, by device id; empty
// when the timeline names no devices or none is shared.
std::vector<DeviceUse> SharedDeviceUse(const Timeline& timeline);

}  // namespace pplab
