// The engine's end of a step: the per-step work after the actions, and the result.
#include <algorithm>
#include <set>
#include <utility>

#include "schedules/error.h"
#include "sim/simulator_engine.h"

namespace pplab::sim_engine {

TimeNs Engine::AddStepWork(std::vector<StepEvent>& out) {
  const StepCosts& step = costs_.Step();
  auto draw = [&](TimeNs median, const std::optional<Spread>& spread) {
    return rng_ != nullptr && spread ? DrawFromSpread(median, *spread, Draw()) : median;
  };
  const TimeNs loss = draw(step.loss_allreduce, step.loss_allreduce_spread);
  const TimeNs norm = draw(step.norm_allreduce, step.norm_allreduce_spread);
  const bool sync = step.loss_allreduce + step.norm_allreduce > 0;
  // A rank is done when its actions and its all-reduces have ended.
  std::vector<TimeNs> done(s_.ranks);
  for (RankId r = 0; r < s_.ranks; ++r) done[r] = std::max(clock_[r], dp_free_[r]);
  // Two copies of the model: every two ranks that hold copies of each
  // other's stages swap their gradients once both are done, in the order of
  // the ranks (the runtime's SumCopyGradients).
  if (step.copy_exchange > 0) {
    std::set<std::pair<RankId, RankId>> pairs;
    for (StageId st = 0; st < s_.stages; ++st) {
      for (const StageId t : s_.CopiesOf(st)) {
        const RankId a = s_.placement[st], b = s_.placement[t];
        if (a != b) pairs.insert({std::min(a, b), std::max(a, b)});
      }
    }
    for (const auto& [a, b] : pairs) {
      const TimeNs start = std::max(done[a], done[b]);
      const TimeNs end = start + draw(step.copy_exchange, step.copy_exchange_spread);
      for (const RankId r : {a, b}) out.push_back({r, "copy_exchange", start, end});
      done[a] = done[b] = end;
    }
  }
  // Tied embeddings: each pipeline's two halves, on two ranks, swap their
  // gradients once both ranks are done; it ends together on both.
  if (step.tied_exchange > 0) {
    for (const auto& [first, last] : s_.PipelineEnds()) {
      const RankId a = s_.placement[first], b = s_.placement[last];
      if (a == b) continue;
      const TimeNs start = std::max(done[a], done[b]);
      const TimeNs end = start + draw(step.tied_exchange, step.tied_exchange_spread);
      for (const RankId r : {a, b}) out.push_back({r, "tied_exchange", start, end});
      done[a] = done[b] = end;
    }
  }
  const TimeNs all_done = *std::max_element(done.begin(), done.end());
  TimeNs end = all_done;
  for (RankId r = 0; r < s_.ranks; ++r) {
    TimeNs t = sync ? all_done : done[r];
    const TimeNs clip = draw(step.clip, step.clip_spread);
    const TimeNs optimizer = draw(step.optimizer, step.optimizer_spread);
    for (const auto& [name, cost] : {std::pair<const char*, TimeNs>{"loss_allreduce", loss},
                                     {"norm_allreduce", norm},
                                     {"clip", clip},
                                     {"optimizer", optimizer}}) {
      if (cost == 0) continue;
      out.push_back({r, name, t, t + cost});
      t += cost;
    }
    end = std::max(end, t);
  }
  return end;
}

void Engine::ReportStuck() const {
  std::string stuck;
  for (RankId r = 0; r < s_.ranks; ++r) {
    if (pc_[r] < s_.programs[r].size()) {
      stuck += (stuck.empty() ? "" : ", ") + std::string("rank ") + std::to_string(r) + " at step " +
               std::to_string(pc_[r]) + " (" + FormatAction(s_.programs[r][pc_[r]]) + ")";
    }
  }
  if (!stuck.empty()) {
    throw Error("simulate '" + s_.name + "': deadlock, these ranks wait for messages never sent: " + stuck +
                "; run `pplab validate` for the full report");
  }
}

SimResult Engine::Finish() {
  SimResult out;
  for (size_t key = 0; key < recv_event_.size(); ++key) {
    if (recv_event_[key] >= 0 && arrival_[key] != kUnknown) {
      TimelineEvent& e = events_[recv_event_[key]];
      e.end = std::max(e.start, arrival_[key]);
    }
  }
  long last = -1;
  for (long ev = 0; ev < static_cast<long>(events_.size()); ++ev) {
    if (!OccupiesRank(events_[ev].action.kind)) continue;
    if (last < 0 || events_[ev].end > events_[last].end) last = ev;
    out.makespan = std::max(out.makespan, events_[ev].end);
  }
  const TimeNs actions_end = out.makespan;
  // What the transport still holds, and the weight casts, are freed when
  // the step ends.
  for (RankId r = 0; r < s_.ranks; ++r) {
    Bytes held = 0;
    for (const HeldSend& h : held_sends_[r]) held += h.bytes;
    Sample(r, actions_end, -held, &MemoryParts::messages);
  }
  for (StageId st = 0; st < S_; ++st) {
    if (casts_held_[st]) {
      Sample(s_.placement[st], actions_end, -costs_.Stage(st).cast_weight_bytes, &MemoryParts::casts);
    }
  }
  out.makespan = AddStepWork(out.timeline.step_events);
  out.critical_step = out.makespan - actions_end;
  // Each event counts up to where the next on the path starts: on a shared
  // device the next rank's action may start once this one's measured share
  // of the device is done (StageCost::device_share), before it ends, and
  // counting both whole put the parts past the makespan (115.5 ms of
  // compute in a 101.1 ms step, a --tp 2 profile's shares).
  TimeNs next_start = actions_end;
  for (long ev = last; ev >= 0; ev = pred_[ev]) {
    const TimelineEvent& e = events_[ev];
    out.critical_path.push_back({e.rank, e.action, e.start, e.end});
    (IsCompute(e.action.kind) ? out.critical_compute : out.critical_comm) +=
        std::max<TimeNs>(0, std::min(e.end, next_start) - e.start);
    next_start = e.start;
  }
  std::reverse(out.critical_path.begin(), out.critical_path.end());
  for (RankMetrics& rm : metrics_) {
    if (rm.start == kUnknown) rm.start = 0;
    rm.idle = out.makespan - rm.busy;
  }
  out.per_rank = std::move(metrics_);
  out.p2p_messages = messages_;
  out.p2p_bytes = bytes_sent_;
  out.timeline.name = s_.name;
  out.timeline.source = "simulated";
  out.timeline.ranks = s_.ranks;
  out.timeline.devices = costs_.Devices();
  out.timeline.device_slots = costs_.DeviceSlots();
  out.timeline.data_parallel = costs_.DataParallelGroup().degree;
  out.timeline.events = std::move(events_);
  // Counter samples arrive rank by rank; order them by rank, then time.
  std::stable_sort(memory_.begin(), memory_.end(), [](const MemorySample& a, const MemorySample& b) {
    return a.rank != b.rank ? a.rank < b.rank : a.time < b.time;
  });
  out.timeline.memory = std::move(memory_);
  const TimelineSummary summary = Summarize(out.timeline);
  out.bubble_fraction = summary.bubble_fraction;
  out.span_bubble_fraction = summary.span_bubble_fraction;
  return out;
}

}  // namespace pplab::sim_engine
