#include "traces/explain.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>

#include "schedules/error.h"

namespace pplab {
namespace {

struct Interval {
  TimeNs start = 0, end = 0;
  RankId rank = 0;
};

// The message a compute action waits for: when its producer finished and
// when it arrived on the waiting rank.
struct Wait {
  bool any = false;
  TimeNs produced = 0;
  TimeNs arrival = 0;
  StageId from_stage = 0;
};

// Intervals sorted by start, with a max tree over their ends: those that
// overlap a window are found in O((k + 1) log n) for k found, even when they
// overlap each other (a measured trace of a shared GPU) and one is long (a
// running maximum of the ends, as this was, made one long action scan every
// action before each window).
class IntervalIndex {
 public:
  void Add(const Interval& i) { items_.push_back(i); }
  // Sorts, and builds the tree; before any Overlapping.
  void Build() {
    std::stable_sort(items_.begin(), items_.end(), [](const Interval& a, const Interval& b) {
      return a.start != b.start ? a.start < b.start : a.end < b.end;
    });
    max_end_.assign(4 * std::max<size_t>(items_.size(), 1), 0);
    if (!items_.empty()) BuildNode(1, 0, items_.size());
  }
  // Those with start < g1 and end > g0, of ranks other than `except` (-1:
  // of every rank).
  std::vector<Interval> Overlapping(TimeNs g0, TimeNs g1, RankId except) const {
    std::vector<Interval> out;
    const size_t limit = static_cast<size_t>(
        std::lower_bound(items_.begin(), items_.end(), g1, [](const Interval& i, TimeNs t) { return i.start < t; }) -
        items_.begin());
    if (limit > 0) Collect(1, 0, items_.size(), limit, g0, except, out);
    return out;
  }

 private:
  TimeNs BuildNode(size_t node, size_t lo, size_t hi) {
    if (hi - lo == 1) return max_end_[node] = items_[lo].end;
    const size_t mid = lo + (hi - lo) / 2;
    return max_end_[node] = std::max(BuildNode(2 * node, lo, mid), BuildNode(2 * node + 1, mid, hi));
  }
  void Collect(size_t node, size_t lo, size_t hi, size_t limit, TimeNs g0, RankId except,
               std::vector<Interval>& out) const {
    if (lo >= limit || max_end_[node] <= g0) return;
    if (hi - lo == 1) {
      if (items_[lo].rank != except) out.push_back(items_[lo]);
      return;
    }
    const size_t mid = lo + (hi - lo) / 2;
    Collect(2 * node, lo, mid, limit, g0, except, out);
    Collect(2 * node + 1, mid, hi, limit, g0, except, out);
  }

  std::vector<Interval> items_;
  std::vector<TimeNs> max_end_;  // node 1 covers items [0, n); node i's children are 2i and 2i + 1
};

// What explain needs from a timeline, indexed once.
struct Index {
  std::vector<std::vector<const TimelineEvent*>> computes;  // per rank, by start
  std::vector<IntervalIndex> collectives;                   // per rank
  std::vector<IntervalIndex> sends;                         // per rank
  std::map<std::pair<RankId, MessageKey>, TimeNs> arrival;  // RECV end, by receiving rank and message
  std::map<MessageKey, TimeNs> produced;                    // end of the compute part that produced it
  std::map<int, IntervalIndex> devices;                     // compute actions, by device
};

// Ranks without a device of their own in the timeline get one each.
int DeviceOf(const Timeline& t, RankId r) { return static_cast<size_t>(r) < t.devices.size() ? t.devices[r] : -1 - r; }

// Compute actions the device runs at once (Timeline::device_slots; 1 when not given).
int SlotsOf(const Timeline& t, int device) {
  return device >= 0 && static_cast<size_t>(device) < t.device_slots.size() ? t.device_slots[device] : 1;
}

// The message a compute part consumes, when it receives one: F(s, m) takes
// activations into s, B/I(s, m) gradients into s; W takes none.
bool Consumes(const Action& part, MessageKey& key) {
  if (part.kind == ActionKind::kForward) {
    key = {true, part.stage, part.microbatch};
    return true;
  }
  if (IsInputGrad(part.kind)) {
    key = {false, part.stage, part.microbatch};
    return true;
  }
  return false;
}

// The message a compute part produces for its neighbour stage.
bool Produces(const Action& part, MessageKey& key) {
  if (part.kind == ActionKind::kForward) {
    key = {true, part.stage + 1, part.microbatch};
    return true;
  }
  if (IsInputGrad(part.kind)) {
    key = {false, part.stage - 1, part.microbatch};
    return true;
  }
  return false;
}

Index BuildIndex(const Timeline& t) {
  Index ix;
  ix.computes.resize(t.ranks);
  ix.collectives.resize(t.ranks);
  ix.sends.resize(t.ranks);
  for (const TimelineEvent& e : t.events) {
    if (e.rank < 0 || e.rank >= t.ranks) continue;
    const Action& a = e.action;
    if (IsRecv(a.kind)) {
      ix.arrival[{e.rank, MessageOf(a)}] = std::max(e.start, e.end);
    } else if (IsCompute(a.kind)) {
      ix.computes[e.rank].push_back(&e);
      for (const Action& part : PartsOf(a)) {
        MessageKey key;
        if (Produces(part, key)) ix.produced[key] = e.end;
      }
      ix.devices[DeviceOf(t, e.rank)].Add({e.start, e.end, e.rank});
    } else if (OccupiesRank(a.kind)) {
      ix.collectives[e.rank].Add({e.start, e.end, e.rank});
    } else if (IsSend(a.kind)) {
      ix.sends[e.rank].Add({e.start, e.end, e.rank});
    }
  }
  auto in_time = [](const TimelineEvent* a, const TimelineEvent* b) { return RunsBefore(*a, *b); };
  for (auto& list : ix.computes) std::stable_sort(list.begin(), list.end(), in_time);
  for (auto& [device, track] : ix.devices) track.Build();
  for (IntervalIndex& list : ix.collectives) list.Build();
  for (IntervalIndex& list : ix.sends) list.Build();
  return ix;
}

// The first pair of overlapping compute actions of one rank, as a message;
// empty when there is none.
std::string FirstOverlap(const Index& ix) {
  for (size_t r = 0; r < ix.computes.size(); ++r) {
    const auto& list = ix.computes[r];
    for (size_t i = 1; i < list.size(); ++i) {
      if (list[i]->start < list[i - 1]->end) {
        return "rank " + std::to_string(r) + " runs " + FormatAction(list[i]->action) + " from " +
               std::to_string(list[i]->start) + " ns, before " + FormatAction(list[i - 1]->action) + " ends at " +
               std::to_string(list[i - 1]->end) + " ns";
      }
    }
  }
  return "";
}

// The message `next` (on rank r) waits for longest; `any` is false when it
// receives none on this rank.
Wait WaitOf(const Index& ix, RankId r, const TimelineEvent& next) {
  Wait w;
  for (const Action& part : PartsOf(next.action)) {
    MessageKey key;
    if (!Consumes(part, key)) continue;
    const auto it = ix.arrival.find({r, key});
    if (it == ix.arrival.end()) continue;  // produced on this rank: no message
    if (w.any && it->second <= w.arrival) continue;
    w.any = true;
    w.arrival = it->second;
    const auto made = ix.produced.find(key);
    // Without its producer in the trace, the whole wait counts as comm.
    w.produced = made == ix.produced.end() ? 0 : made->second;
    w.from_stage = key.forward ? key.to_stage - 1 : key.to_stage + 1;
  }
  return w;
}

bool Covers(const std::vector<Interval>& list, TimeNs t) {
  for (const Interval& i : list) {
    if (i.start <= t && t < i.end) return true;
  }
  return false;
}

int CountCovering(const std::vector<Interval>& list, TimeNs t) {
  int n = 0;
  for (const Interval& i : list) n += i.start <= t && t < i.end;
  return n;
}

// Books the gap [g0, g1) of rank `out.rank` before an action that waits for
// `wait`: cut at every time where the rule that holds can change, then each
// piece by the rule that holds at its start (explain.h).
void SplitGap(TimeNs g0, TimeNs g1, const Wait& wait, const std::vector<Interval>& collectives,
              const std::vector<Interval>& others, int slots, const std::vector<Interval>& sends, RankIdle& out) {
  std::vector<TimeNs> cuts = {g0, g1};
  auto cut = [&](TimeNs t) { cuts.push_back(std::clamp(t, g0, g1)); };
  if (wait.any) {
    cut(wait.produced);
    cut(wait.arrival);
  }
  for (const auto* list : {&collectives, &others, &sends}) {
    for (const Interval& i : *list) {
      cut(i.start);
      cut(i.end);
    }
  }
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  for (size_t i = 0; i + 1 < cuts.size(); ++i) {
    const TimeNs t = cuts[i], length = cuts[i + 1] - cuts[i];
    if (Covers(collectives, t)) {
      out.comm += length;
    } else if (wait.any && t < wait.produced) {
      out.imbalance += length;
      out.imbalance_by_stage[wait.from_stage] += length;
    } else if (wait.any && t < wait.arrival) {
      out.comm += length;
    } else if (CountCovering(others, t) >= slots) {  // every slot of the device is taken
      out.shared_device += length;
    } else if (Covers(sends, t)) {  // the rank's own send, which a measured executor may wait on
      out.comm += length;
    } else {
      out.other += length;
    }
  }
}

RankIdle ExplainRank(const Timeline& t, const Index& ix, RankId r, TimeNs makespan) {
  RankIdle out;
  out.rank = r;
  const auto& computes = ix.computes[r];
  for (const TimelineEvent* e : computes) out.busy += e->end - e->start;
  out.idle = makespan - out.busy;
  if (computes.empty()) {
    out.warm_up = makespan;
    return out;
  }
  out.warm_up = computes.front()->start;
  out.cool_down = makespan - computes.back()->end;
  const IntervalIndex& device = ix.devices.at(DeviceOf(t, r));
  for (size_t i = 1; i < computes.size(); ++i) {
    const TimeNs g0 = computes[i - 1]->end, g1 = computes[i]->start;
    if (g1 <= g0) continue;
    SplitGap(g0, g1, WaitOf(ix, r, *computes[i]), ix.collectives[r].Overlapping(g0, g1, -1),
             device.Overlapping(g0, g1, r), SlotsOf(t, DeviceOf(t, r)), ix.sends[r].Overlapping(g0, g1, -1), out);
  }
  return out;
}

}  // namespace

namespace {

// `parts` as multiples of `unit` that add up to `total` (the nearest
// multiple of the parts' sum): each rounded down, then a unit more for the
// largest remainders (the earlier of equal ones).
std::vector<TimeNs> Apportion(const std::vector<TimeNs>& parts, TimeNs total, TimeNs unit) {
  std::vector<TimeNs> out;
  TimeNs left = total;
  for (TimeNs p : parts) {
    out.push_back(p / unit * unit);
    left -= out.back();
  }
  std::vector<size_t> order(parts.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return parts[a] % unit > parts[b] % unit; });
  for (size_t i = 0; i < order.size() && left >= unit; ++i, left -= unit) out[order[i]] += unit;
  return out;
}

TimeNs Nearest(TimeNs ns, TimeNs unit) { return (ns + unit / 2) / unit * unit; }

}  // namespace

RankIdle RoundedIdle(const RankIdle& r, TimeNs makespan, TimeNs unit) {
  RankIdle out;
  out.rank = r.rank;
  const std::vector<TimeNs> whole = Apportion({r.busy, r.idle}, Nearest(makespan, unit), unit);
  out.busy = whole[0];
  out.idle = whole[1];
  const std::vector<TimeNs> parts =
      Apportion({r.warm_up, r.cool_down, r.imbalance, r.comm, r.shared_device, r.other}, out.idle, unit);
  out.warm_up = parts[0];
  out.cool_down = parts[1];
  out.imbalance = parts[2];
  out.comm = parts[3];
  out.shared_device = parts[4];
  out.other = parts[5];
  std::vector<StageId> stages;
  std::vector<TimeNs> waits;
  for (const auto& [stage, ns] : r.imbalance_by_stage) {
    stages.push_back(stage);
    waits.push_back(ns);
  }
  const std::vector<TimeNs> shown = Apportion(waits, out.imbalance, unit);
  for (size_t i = 0; i < stages.size(); ++i) {
    if (shown[i] > 0) out.imbalance_by_stage[stages[i]] = shown[i];
  }
  return out;
}

bool CanExplainIdle(const Timeline& timeline) { return FirstOverlap(BuildIndex(timeline)).empty(); }

IdleExplanation ExplainIdle(const Timeline& timeline) {
  if (!timeline.devices.empty() && static_cast<int>(timeline.devices.size()) != timeline.ranks) {
    throw Error("explain '" + timeline.name + "': devices names " + std::to_string(timeline.devices.size()) +
                " ranks, the timeline has " + std::to_string(timeline.ranks));
  }
  const Index ix = BuildIndex(timeline);
  const std::string overlap = FirstOverlap(ix);
  if (!overlap.empty()) {
    throw Error("explain '" + timeline.name + "': " + overlap +
                "; the idle split needs one compute action at a time per rank");
  }
  IdleExplanation out;
  out.makespan = timeline.Makespan();
  for (RankId r = 0; r < timeline.ranks; ++r) out.per_rank.push_back(ExplainRank(timeline, ix, r, out.makespan));
  return out;
}

}  // namespace pplab
