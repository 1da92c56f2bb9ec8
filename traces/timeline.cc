#include "traces/timeline.h"

#include <algorithm>
#include <limits>
#include <map>
#include <utility>

namespace pplab {

TimeNs Timeline::Makespan() const {
  TimeNs end = 0;
  for (const TimelineEvent& e : events) {
    if (OccupiesRank(e.action.kind)) end = std::max(end, e.end);
  }
  for (const StepEvent& e : step_events) end = std::max(end, e.end);
  return end;
}

void Timeline::ShiftEarlier(TimeNs earlier) {
  for (TimelineEvent& e : events) {
    e.start -= earlier;
    e.end -= earlier;
  }
  for (StepEvent& e : step_events) {
    e.start -= earlier;
    e.end -= earlier;
  }
  for (MemorySample& m : memory) m.time -= earlier;
}

TimeNs Timeline::Start() const {
  TimeNs first = std::numeric_limits<TimeNs>::max();
  for (const TimelineEvent& e : events) first = std::min(first, e.start);
  for (const StepEvent& e : step_events) first = std::min(first, e.start);
  for (const MemorySample& m : memory) first = std::min(first, m.time);
  return first == std::numeric_limits<TimeNs>::max() ? 0 : first;
}

TimelineSummary Summarize(const Timeline& timeline) {
  TimelineSummary out;
  out.per_rank.resize(timeline.ranks);
  std::vector<bool> seen(timeline.ranks, false);
  for (const TimelineEvent& e : timeline.events) {
    if (e.rank < 0 || e.rank >= timeline.ranks) continue;
    if (OccupiesRank(e.action.kind)) out.makespan = std::max(out.makespan, e.end);
    if (!IsCompute(e.action.kind)) continue;
    RankSummary& r = out.per_rank[e.rank];
    r.busy += e.end - e.start;
    r.start = seen[e.rank] ? std::min(r.start, e.start) : e.start;
    r.end = seen[e.rank] ? std::max(r.end, e.end) : e.end;
    seen[e.rank] = true;
  }
  for (const StepEvent& e : timeline.step_events) out.makespan = std::max(out.makespan, e.end);
  TimeNs total_busy = 0;
  for (const RankSummary& r : out.per_rank) {
    total_busy += r.busy;
    if (r.end > r.start) {
      out.span_bubble_fraction =
          std::max(out.span_bubble_fraction, 1.0 - static_cast<double>(r.busy) / static_cast<double>(r.end - r.start));
    }
  }
  if (out.makespan > 0 && timeline.ranks > 0) {
    out.bubble_fraction = 1.0 - static_cast<double>(total_busy) /
                                    (static_cast<double>(timeline.ranks) * static_cast<double>(out.makespan));
  }
  return out;
}

std::vector<std::vector<MemorySample>> MemoryByRank(const Timeline& timeline) {
  std::vector<std::vector<MemorySample>> by_rank(static_cast<size_t>(std::max(0, timeline.ranks)));
  for (const MemorySample& m : timeline.memory) {
    if (m.rank >= 0 && m.rank < timeline.ranks) by_rank[static_cast<size_t>(m.rank)].push_back(m);
  }
  for (std::vector<MemorySample>& samples : by_rank) {
    std::stable_sort(samples.begin(), samples.end(),
                     [](const MemorySample& a, const MemorySample& b) { return a.time < b.time; });
  }
  return by_rank;
}

std::vector<std::optional<Bytes>> LargestHeldBytes(const Timeline& timeline) {
  std::vector<std::optional<Bytes>> largest(static_cast<size_t>(std::max(0, timeline.ranks)));
  for (const MemorySample& m : timeline.memory) {
    if (m.rank < 0 || m.rank >= timeline.ranks) continue;
    std::optional<Bytes>& l = largest[static_cast<size_t>(m.rank)];
    if (!l || m.bytes > *l) l = m.bytes;
  }
  return largest;
}

std::vector<DeviceUse> SharedDeviceUse(const Timeline& timeline) {
  std::map<int, DeviceUse> by_device;
  for (RankId r = 0; r < timeline.ranks && static_cast<size_t>(r) < timeline.devices.size(); ++r) {
    DeviceUse& d = by_device[timeline.devices[r]];
    d.device = timeline.devices[r];
    d.ranks.push_back(r);
  }
  std::vector<DeviceUse> out;
  for (auto& [device, use] : by_device) {
    if (use.ranks.size() < 2) continue;
    if (device >= 0 && static_cast<size_t>(device) < timeline.device_slots.size()) {
      use.slots = timeline.device_slots[device];
    }
    // A sweep over the starts (+1) and ends (-1) of the ranks' compute
    // actions, ends first at a tie: back-to-back actions never overlap.
    std::vector<std::pair<TimeNs, int>> edges;
    for (const TimelineEvent& e : timeline.events) {
      if (!IsCompute(e.action.kind) || e.end <= e.start) continue;
      if (!std::binary_search(use.ranks.begin(), use.ranks.end(), e.rank)) continue;
      edges.push_back({e.start, +1});
      edges.push_back({e.end, -1});
      use.compute += e.end - e.start;
    }
    std::sort(edges.begin(), edges.end());
    int running = 0;
    for (size_t i = 0; i < edges.size(); ++i) {
      running += edges[i].second;
      const TimeNs next = i + 1 < edges.size() ? edges[i + 1].first : edges[i].first;
      if (running > 0) use.busy += next - edges[i].first;
      if (running > use.slots) use.over_slots += next - edges[i].first;
    }
    out.push_back(std::move(use));
  }
  return out;
}

}  // namespace pplab
