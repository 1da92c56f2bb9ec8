#include "sim/measured_costs.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

namespace pplab {

std::map<std::pair<StageId, ActionKind>, double> MeanComputeMs(const Timeline& timeline) {
  // Per (stage, kind): total duration and count, for the mean.
  std::map<std::pair<StageId, ActionKind>, std::pair<TimeNs, int>> sums;
  for (const TimelineEvent& e : timeline.events) {
    if (!IsCompute(e.action.kind)) continue;
    auto& [total, count] = sums[{e.action.stage, e.action.kind}];
    total += e.end - e.start;
    ++count;
  }
  std::map<std::pair<StageId, ActionKind>, double> means;
  for (const auto& [key, sum] : sums) means[key] = NsToMs(sum.first) / sum.second;
  return means;
}

double LateGapMs(const std::vector<TimeNs>& gaps_ns) {
  if (gaps_ns.empty()) return kMinLateGapMs;
  std::vector<TimeNs> sorted = gaps_ns;
  std::sort(sorted.begin(), sorted.end());
  return std::max(kMinLateGapMs, 3 * NsToMs(sorted[sorted.size() / 2]));
}

namespace {

// The time in [from, to) during which `rank`'s device was full with other
// ranks' compute (at least its slots of them at once), from `computes` (each
// rank's compute events, in time order, one at a time); 0 where the rank has
// a device of its own, or the trace is measured.
TimeNs DeviceFullTime(const Timeline& timeline, const std::vector<std::vector<const TimelineEvent*>>& computes,
                      RankId rank, TimeNs from, TimeNs to) {
  // A measured trace's times hold the sharing: its ranks' actions ran
  // time-sliced, each stretched by the others' (docs/fidelity.md).
  if (timeline.source == "measured" || timeline.devices.size() != static_cast<size_t>(timeline.ranks) || to <= from) {
    return 0;
  }
  const int device = timeline.devices[rank];
  const int slots = device < static_cast<int>(timeline.device_slots.size()) ? timeline.device_slots[device] : 1;
  std::vector<std::pair<TimeNs, int>> edges;  // (time, +1 at a start, -1 at an end)
  for (RankId other = 0; other < timeline.ranks; ++other) {
    if (other == rank || timeline.devices[other] != device) continue;
    // A rank's actions do not overlap, so their ends rise with their starts:
    // the first that ends after `from`, then on while they start before `to`.
    const std::vector<const TimelineEvent*>& events = computes[other];
    auto it =
        std::partition_point(events.begin(), events.end(), [from](const TimelineEvent* e) { return e->end <= from; });
    for (; it != events.end() && (*it)->start < to; ++it) {
      const TimeNs a = std::max(from, (*it)->start), b = std::min(to, (*it)->end);
      if (a >= b) continue;
      edges.emplace_back(a, 1);
      edges.emplace_back(b, -1);
    }
  }
  std::sort(edges.begin(), edges.end());
  TimeNs full = 0;
  int running = 0;
  for (size_t i = 0; i < edges.size(); ++i) {
    running += edges[i].second;
    if (running >= slots && i + 1 < edges.size()) full += edges[i + 1].first - edges[i].first;
  }
  return full;
}

}  // namespace

std::vector<WaitedMessage> WaitedMessages(const Timeline& timeline) {
  // Each message: its SEND's start and rank, and when its receive was
  // posted, where the trace has it: a rank that came to its step late,
  // posting its first receive after the message was sent, had the message
  // there before it could wait for it.
  std::map<MessageKey, std::pair<TimeNs, RankId>> sent;
  std::map<MessageKey, TimeNs> posted;
  for (const TimelineEvent& e : timeline.events) {
    if (IsSend(e.action.kind)) sent[MessageOf(e.action)] = {e.start, e.rank};
    if (IsRecv(e.action.kind)) posted[MessageOf(e.action)] = e.start;
  }
  // Each rank's compute actions in time order.
  std::vector<std::vector<const TimelineEvent*>> computes(timeline.ranks);
  for (const TimelineEvent& e : timeline.events) {
    if (IsCompute(e.action.kind) && e.rank >= 0 && e.rank < timeline.ranks) computes[e.rank].push_back(&e);
  }
  for (auto& rank : computes) {
    std::stable_sort(rank.begin(), rank.end(),
                     [](const TimelineEvent* a, const TimelineEvent* b) { return RunsBefore(*a, *b); });
  }
  std::vector<WaitedMessage> waited;
  for (const auto& rank : computes) {
    std::vector<TimeNs> gaps;
    for (size_t i = 1; i < rank.size(); ++i) gaps.push_back(rank[i]->start - rank[i - 1]->end);
    const double late_gap = LateGapMs(gaps);
    for (size_t i = 0; i < rank.size(); ++i) {
      const TimelineEvent& e = *rank[i];
      // The action waited, if at all, for the last-sent of its messages (an
      // OVERLAP_F_B may take two): the other had come by then.
      int messages = 0;
      TimeNs last_sent = 0, last_posted = 0;
      RankId sender = 0;
      for (const Action& part : PartsOf(e.action)) {
        const bool forward = part.kind == ActionKind::kForward;
        if (!forward && !IsInputGrad(part.kind)) continue;
        const MessageKey key{forward, part.stage, part.microbatch};
        const auto it = sent.find(key);
        if (it == sent.end()) continue;  // its input came from its own rank
        if (messages == 0 || it->second.first > last_sent) {
          last_sent = it->second.first;
          sender = it->second.second;
          const auto post = posted.find(key);
          last_posted = post == posted.end() ? 0 : post->second;
        }
        ++messages;
      }
      if (messages == 0) continue;
      WaitedMessage w{sender, e.rank, NsToMs(e.start - last_sent), WaitedMessage::Seen::kIdle};
      if (i > 0 && last_sent < rank[i - 1]->end) {
        w.seen =
            NsToMs(e.start - rank[i - 1]->end) > late_gap ? WaitedMessage::Seen::kLate : WaitedMessage::Seen::kEarly;
      }
      if (i == 0 && last_sent < last_posted) w.seen = WaitedMessage::Seen::kEarly;
      // An action that started as its device came free (full with other
      // ranks' work up to its start) waited for the device: its message had
      // come by then, so its time is a bound.
      if (DeviceFullTime(timeline, computes, e.rank, e.start - 1, e.start) > 0) w.seen = WaitedMessage::Seen::kEarly;
      waited.push_back(w);
    }
  }
  return waited;
}

std::vector<double> SortedMs(const std::vector<WaitedMessage>& waited) {
  std::vector<double> ms;
  for (const WaitedMessage& w : waited) {
    if (w.Exact()) ms.push_back(w.ms);
  }
  std::sort(ms.begin(), ms.end());
  return ms;
}

std::vector<double> WaitedMessageMs(const Timeline& timeline) { return SortedMs(WaitedMessages(timeline)); }

std::optional<double> CensoredMedian(const std::vector<WaitedMessage>& messages) {
  const std::vector<double> exact = SortedMs(messages);
  if (exact.empty()) return std::nullopt;
  // From the longest exact time down: the share of messages that took at
  // most the current time, before its own factor (1 at the longest).
  double share = 1;
  double median = exact.front();
  for (size_t k = exact.size(); k-- > 0;) {
    const double t = exact[k];
    if (k + 1 < exact.size() && exact[k + 1] == t) continue;  // a tie, counted once
    size_t d = 0, n = 0;
    for (const WaitedMessage& w : messages) {
      if (w.ms <= t) ++n;
      if (w.Exact() && w.ms == t) ++d;
    }
    if (share > 0.5) median = t;
    share *= 1.0 - static_cast<double>(d) / static_cast<double>(n);
  }
  return median;
}

std::vector<LinkWaits> WaitedByLink(const std::vector<WaitedMessage>& waited) {
  std::map<std::pair<RankId, RankId>, std::vector<WaitedMessage>> by_pair;
  for (const WaitedMessage& w : waited) by_pair[{w.from, w.to}].push_back(w);
  std::vector<LinkWaits> out;
  for (auto& [pair, messages] : by_pair) {
    const size_t exact = SortedMs(messages).size();
    if (exact < kMinLinkSamples) continue;
    out.push_back({pair.first, pair.second, exact, messages.size() - exact, *CensoredMedian(messages)});
  }
  return out;
}

namespace {

// The step's work as the cost model's "step" (sim/cost_model.h, StepCosts),
// from the timeline's step events. The simulator starts the all-reduces
// when the last rank is done and runs the rest on every rank after them
// (sim/simulator_finish.cc), so: a collective's time is the shortest any
// rank spent in it (the last to arrive waited for no one), and each rank's
// own work the longest (the step ends with the slowest). Empty without
// step events.
nlohmann::json StepCostsOf(const Timeline& timeline) {
  std::map<std::string, std::vector<TimeNs>> by_name;
  for (const StepEvent& e : timeline.step_events) by_name[e.name].push_back(e.end - e.start);
  nlohmann::json step = nlohmann::json::object();
  for (const auto& [name, durations] : by_name) {
    const bool collective =
        name == "loss_allreduce" || name == "norm_allreduce" || name == "tied_exchange" || name == "copy_exchange";
    const TimeNs ns = collective ? *std::min_element(durations.begin(), durations.end())
                                 : *std::max_element(durations.begin(), durations.end());
    step[name + "_ms"] = NsToMs(std::max<TimeNs>(0, ns));
  }
  return step;
}

}  // namespace

std::string MeasuredCostJson(const Timeline& timeline, const std::string& origin) {
  const auto means = MeanComputeMs(timeline);
  const StageId max_stage = means.empty() ? -1 : means.rbegin()->first.first;
  static const std::pair<ActionKind, const char*> kKinds[] = {{ActionKind::kForward, "forward_ms"},
                                                              {ActionKind::kBackward, "backward_ms"},
                                                              {ActionKind::kBackwardInput, "backward_input_ms"},
                                                              {ActionKind::kBackwardWeight, "backward_weight_ms"},
                                                              // an overlap, by its forward part's stage
                                                              {ActionKind::kOverlapFB, "forward_backward_ms"}};
  // A stage's data-parallel all-reduce as the run took it (the mean of its
  // REDUCE_GRAD events): without it the file's REDUCE_GRAD took no time.
  std::map<StageId, std::pair<TimeNs, int>> reduce_grad;
  for (const TimelineEvent& e : timeline.events) {
    if (e.action.kind != ActionKind::kReduceGrad) continue;
    auto& [total, count] = reduce_grad[e.action.stage];
    total += e.end - e.start;
    ++count;
  }
  nlohmann::json stages = nlohmann::json::array();
  for (StageId s = 0; s <= max_stage; ++s) {
    nlohmann::json cost = nlohmann::json::object();
    for (const auto& [kind, key] : kKinds) {
      const auto it = means.find({s, kind});
      if (it != means.end()) cost[key] = it->second;
    }
    if (const auto it = reduce_grad.find(s); it != reduce_grad.end()) {
      cost["reduce_grad_ms"] = NsToMs(it->second.first) / it->second.second;
    }
    stages.push_back(cost);
  }
  nlohmann::json meta = {{"estimated_from", origin}, {"source", timeline.source}};
  const nlohmann::json step = StepCostsOf(timeline);
  // Their B and I already hold the recomputed forward (sim/recompute.h).
  if (!timeline.recompute.empty()) meta["recomputed"] = timeline.recompute;
  nlohmann::json cost = {{"format", "pplab.cost"}, {"version", 1}, {"stages", stages}, {"meta", meta}};
  if (!step.empty()) cost["step"] = step;
  // The replicas, whose degree makes the file's REDUCE_GRADs take their
  // reduce_grad_ms (with degree 1 they took none: a trace of 20 ms, 5 of
  // them the all-reduce, came back as 15).
  if (timeline.data_parallel > 1) cost["data_parallel"] = {{"degree", timeline.data_parallel}};
  // A simulated trace's shared devices, so that the file queues for them as
  // the trace did (its messages' times above leave that out). A measured
  // trace's times already hold the sharing, and it queues for nothing.
  if (timeline.source != "measured") {
    if (!timeline.devices.empty()) cost["devices"] = timeline.devices;
    if (!timeline.device_slots.empty()) cost["device_slots"] = timeline.device_slots;
  }
  // The messages as the run's receivers saw them, latency and all (the
  // file gives no bytes, so no bandwidth term adds to it); a wait for a
  // shared device counts as a bound (WaitedMessages).
  const std::vector<WaitedMessage> messages = WaitedMessages(timeline);
  if (const std::optional<double> median = CensoredMedian(messages)) {
    cost["link"] = {{"latency_ms", std::max(0.0, *median)}};
    meta["waited_messages"] = SortedMs(messages).size();
    cost["meta"] = meta;
  }
  // Each direction that has samples enough, its own: between two ranks on
  // one GPU the two directions took 2.4 and 5.7 ms in one run.
  nlohmann::json links = nlohmann::json::array();
  for (const LinkWaits& l : WaitedByLink(messages)) {
    links.push_back({{"from", l.from}, {"to", l.to}, {"latency_ms", std::max(0.0, l.median_ms)}});
  }
  if (!links.empty()) cost["links"] = links;
  // Round-trip through the loader so what is returned is a usable model.
  return CostModel::FromJson(cost.dump(), origin).ToJson();
}

CostModel MeasuredCostModel(const Timeline& timeline, const std::string& origin) {
  return CostModel::FromJson(MeasuredCostJson(timeline, origin), origin);
}

}  // namespace pplab
