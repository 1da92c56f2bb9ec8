#include "traces/diff.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "schedules/action_kinds.h"
#include "schedules/error.h"

namespace pplab {
namespace {

// (rank, kind, stage, microbatch, occurrence): the identity of an action in a
// timeline; the occurrence tells apart repeats of one action on one rank.
using ActionKey = std::tuple<RankId, int, StageId, MicrobatchId, int>;

struct Indexed {
  std::map<ActionKey, size_t> index;  // key -> position in Timeline::events
  std::vector<ActionKey> keys;        // per event, in order
};

Indexed IndexEvents(const Timeline& t) {
  Indexed out;
  std::map<std::tuple<RankId, int, StageId, MicrobatchId>, int> seen;
  for (size_t i = 0; i < t.events.size(); ++i) {
    const TimelineEvent& e = t.events[i];
    const auto base = std::make_tuple(e.rank, static_cast<int>(e.action.kind), e.action.stage, e.action.microbatch);
    const ActionKey key{e.rank, static_cast<int>(e.action.kind), e.action.stage, e.action.microbatch, seen[base]++};
    out.index[key] = i;
    out.keys.push_back(key);
  }
  return out;
}

std::string Describe(const TimelineEvent& e) { return "rank " + std::to_string(e.rank) + " " + FormatAction(e.action); }

// Sorts by |delta| descending, ties by predicted start then rank, keeps `top`.
template <typename Delta>
std::vector<ActionDeviation> Largest(std::vector<ActionDeviation> all, int top, Delta delta) {
  std::stable_sort(all.begin(), all.end(), [&](const ActionDeviation& a, const ActionDeviation& b) {
    const TimeNs da = std::llabs(delta(a)), db = std::llabs(delta(b));
    if (da != db) return da > db;
    if (a.predicted_start != b.predicted_start) return a.predicted_start < b.predicted_start;
    return a.rank < b.rank;
  });
  all.resize(std::min(all.size(), static_cast<size_t>(std::max(0, top))));
  return all;
}

// A timeline from its first event of any kind, as the trace reader takes it.
Timeline FromItsStart(const Timeline& timeline) {
  Timeline out = timeline;
  if (const TimeNs first = timeline.Start(); first > 0) out.ShiftEarlier(first);
  return out;
}

}  // namespace

Timeline ShiftToZero(const Timeline& timeline) {
  Timeline out = timeline;
  TimeNs first = std::numeric_limits<TimeNs>::max();
  for (const TimelineEvent& e : timeline.events) {
    if (IsCompute(e.action.kind)) first = std::min(first, e.start);
  }
  if (first == std::numeric_limits<TimeNs>::max()) return out;
  // Events before the first compute (a RECV posted at step start) keep their
  // order and may start below 0.
  out.ShiftEarlier(first);
  return out;
}

TimelineDiff DiffTimelines(const Timeline& predicted_in, const Timeline& measured_in, const DiffOptions& options,
                           const std::string& predicted_origin, const std::string& measured_origin) {
  if (predicted_in.ranks != measured_in.ranks) {
    throw Error(predicted_origin + " has " + std::to_string(predicted_in.ranks) + " ranks but " + measured_origin +
                " has " + std::to_string(measured_in.ranks) + ": not two timelines of one plan");
  }
  const Timeline predicted = ShiftToZero(predicted_in);
  const Timeline measured = ShiftToZero(measured_in);
  const Indexed p = IndexEvents(predicted);
  const Indexed m = IndexEvents(measured);

  TimelineDiff d;
  d.ranks = predicted.ranks;
  // The step as stats and explain read it, from its start: the time
  // before a side's first compute (a measured step's launch of its first
  // action) is the step's too. The actions are compared shifted.
  d.predicted = Summarize(FromItsStart(predicted_in));
  d.measured = Summarize(FromItsStart(measured_in));
  d.predicted_held = LargestHeldBytes(predicted);
  d.measured_held = LargestHeldBytes(measured);

  // Pair the events; count what one side lacks, compute and comm apart.
  std::vector<ActionDeviation> pairs;
  std::vector<size_t> pair_order;  // predicted event index of each pair, for program-order ties
  size_t p_compute = 0, m_compute = 0;
  const TimelineEvent* p_lone = nullptr;
  const TimelineEvent* m_lone = nullptr;
  size_t p_lone_compute = 0, m_lone_compute = 0;
  for (size_t i = 0; i < predicted.events.size(); ++i) {
    const TimelineEvent& e = predicted.events[i];
    const bool compute = IsCompute(e.action.kind);
    p_compute += compute;
    const auto it = m.index.find(p.keys[i]);
    if (it == m.index.end()) {
      if (compute) {
        ++p_lone_compute;
        if (p_lone == nullptr) p_lone = &e;
      } else {
        ++d.only_predicted;
        ++d.only_predicted_kinds[InfoOf(e.action.kind).name];
      }
      continue;
    }
    if (!compute) continue;
    const TimelineEvent& f = measured.events[it->second];
    pairs.push_back({e.rank, e.action, e.start, e.end, f.start, f.end});
    pair_order.push_back(i);
  }
  for (size_t i = 0; i < measured.events.size(); ++i) {
    const TimelineEvent& e = measured.events[i];
    const bool compute = IsCompute(e.action.kind);
    m_compute += compute;
    if (p.index.count(m.keys[i]) != 0) continue;
    if (compute) {
      ++m_lone_compute;
      if (m_lone == nullptr) m_lone = &e;
    } else {
      ++d.only_measured;
      ++d.only_measured_kinds[InfoOf(e.action.kind).name];
    }
  }
  if (p_compute == 0) throw Error(predicted_origin + " has no compute action (F, B, I, W)");
  if (m_compute == 0) throw Error(measured_origin + " has no compute action (F, B, I, W)");
  if (p_lone_compute > 0 || m_lone_compute > 0) {
    std::string why = predicted_origin + " and " + measured_origin + " do not run the same compute actions (";
    why += std::to_string(p_lone_compute) + " only in " + predicted_origin;
    if (p_lone) why += ", e.g. " + Describe(*p_lone);
    why += "; " + std::to_string(m_lone_compute) + " only in " + measured_origin;
    if (m_lone) why += ", e.g. " + Describe(*m_lone);
    why += "): diff two traces of one plan";
    throw Error(why);
  }
  // One plan runs each rank's compute in one order: the same actions in
  // another order (gpipe against 1f1b) are two plans, whose "drift" would
  // mean nothing.
  const auto orders = [](const Timeline& t) {
    std::vector<std::vector<const TimelineEvent*>> by_rank(t.ranks);
    for (const TimelineEvent& e : t.events) {
      if (IsCompute(e.action.kind)) by_rank[e.rank].push_back(&e);
    }
    std::vector<std::vector<std::string>> names(t.ranks);
    for (RankId r = 0; r < t.ranks; ++r) {
      std::stable_sort(by_rank[r].begin(), by_rank[r].end(),
                       [](const TimelineEvent* a, const TimelineEvent* b) { return RunsBefore(*a, *b); });
      for (const TimelineEvent* e : by_rank[r]) names[r].push_back(FormatAction(e->action));
    }
    return names;
  };
  const auto p_order = orders(predicted), m_order = orders(measured);
  for (RankId r = 0; r < d.ranks; ++r) {
    for (size_t i = 0; i < p_order[r].size() && i < m_order[r].size(); ++i) {
      if (p_order[r][i] == m_order[r][i]) continue;
      throw Error(predicted_origin + " and " + measured_origin + " run rank " + std::to_string(r) +
                  "'s compute in different orders (its action " + std::to_string(i + 1) + " is " + p_order[r][i] +
                  " in one, " + m_order[r][i] + " in the other): diff two traces of one plan");
    }
  }
  d.matched_compute = pairs.size();
  d.threshold = options.threshold ? *options.threshold : d.predicted.makespan / 20;

  // First drift: walk the pairs in predicted-start order.
  std::vector<size_t> order(pairs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (pairs[a].predicted_start != pairs[b].predicted_start)
      return pairs[a].predicted_start < pairs[b].predicted_start;
    if (pairs[a].rank != pairs[b].rank) return pairs[a].rank < pairs[b].rank;
    return pair_order[a] < pair_order[b];
  });
  for (size_t i : order) {
    if (std::llabs(pairs[i].StartDelta()) > d.threshold) {
      d.first_drift = pairs[i];
      break;
    }
  }
  d.top_start = Largest(pairs, options.top, [](const ActionDeviation& a) { return a.StartDelta(); });
  d.top_duration = Largest(pairs, options.top, [](const ActionDeviation& a) { return a.DurationDelta(); });
  return d;
}

}  // namespace pplab
