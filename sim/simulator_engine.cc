// The engine's run (actions in program order, messages, shared devices),
// and Simulate (sim/simulator.h), which checks the plan and runs it.
#include "sim/simulator_engine.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "schedules/error.h"
#include "schedules/lowering.h"

namespace pplab::sim_engine {

Engine::Engine(const Schedule& s, const CostModel& costs, std::mt19937_64* rng) : s_(s), costs_(costs), rng_(rng) {
  S_ = s.stages;
  M_ = s.microbatches;
  const size_t sm = static_cast<size_t>(S_) * M_;
  f_end_.assign(sm, kUnknown);
  bi_end_.assign(sm, kUnknown);
  i_end_.assign(sm, kUnknown);
  arrival_.assign(2 * sm, kUnknown);
  send_event_.assign(2 * sm, -1);
  recv_event_.assign(2 * sm, -1);
  waiting_.assign(2 * sm, -1);
  offset_.assign(s.ranks + 1, 0);
  for (RankId r = 0; r < s.ranks; ++r) offset_[r + 1] = offset_[r] + static_cast<long>(s.programs[r].size());
  events_.resize(offset_.back());
  pred_.assign(offset_.back(), -1);
  pc_.assign(s.ranks, 0);
  clock_.assign(s.ranks, 0);
  comm_free_.assign(s.ranks, 0);
  dp_free_.assign(s.ranks, 0);
  last_send_.assign(s.ranks, -1);
  last_compute_.assign(s.ranks, -1);
  inflight_.assign(s.ranks, 0);
  bytes_.assign(s.ranks, 0);
  held_parts_.assign(s.ranks, {});
  held_sends_.assign(s.ranks, {});
  if (costs.Messages()) recv_held_.assign(2 * sm, 0);  // only the message rules use it
  computed_.assign(s.ranks, false);
  casts_held_.assign(S_, false);
  for (StageId st = 0; st < S_; ++st) any_casts_ = any_casts_ || costs.Stage(st).cast_weight_bytes > 0;
  metrics_.resize(s.ranks);
  grads_done_.assign(S_, 0);
  gathered_.assign(S_, 0);
  // Resolved compute times per (stage, kind); -1 until first needed, so a
  // cost model only has to give the times the schedule uses.
  time_of_.assign(static_cast<size_t>(S_) * 4, kUnknown);
  for (RankId r = 0; r < s.ranks; ++r) {
    metrics_[r].rank = r;
    metrics_[r].start = kUnknown;
  }
  MapDevices();
  HoldGraphSlots();
}

void Engine::HoldGraphSlots() {
  // A graphed stage keeps a slot per microbatch it has in flight at most:
  // an F takes a free one (captured in the run's first step when none is
  // free) and its B frees it. The slots outlive the step, so a step of a
  // run holds them all from its start, as pplab train --measure-memory
  // counts them (Stage::HeldBytes).
  // Costs without graphs (eager profiles, analytic costs) hold none: one
  // pass over the stages, not one over the ranks' programs.
  bool graphed = false;
  for (StageId st = 0; st < S_ && !graphed; ++st) graphed = costs_.Stage(st).graph_slot_bytes.has_value();
  if (!graphed) return;
  for (RankId r = 0; r < s_.ranks; ++r) {
    // By stage this rank runs: its microbatches in flight, now and at most
    // (a map, not a vector over every stage: a rank runs few of them).
    std::map<StageId, std::pair<int, int>> flight;
    for (const Action& a : s_.programs[r]) {
      const ComputeParts parts = PartsOf(a);
      for (const Action& part : parts) {
        if (part.kind != ActionKind::kForward) continue;
        auto& [now, most] = flight[part.stage];
        most = std::max(most, ++now);
      }
      for (const Action& part : parts) {
        if (part.kind == ActionKind::kBackward) --flight[part.stage].first;
      }
    }
    for (const auto& [st, f] : flight) {
      const std::optional<Bytes>& slot = costs_.Stage(st).graph_slot_bytes;
      if (slot && f.second > 0) Sample(r, 0, f.second * *slot, &MemoryParts::graphs);
    }
  }
}

SimResult Engine::Run() {
  std::vector<RankId> runnable;
  for (RankId r = s_.ranks - 1; r >= 0; --r) runnable.push_back(r);
  while (true) {
    while (!runnable.empty()) {
      const RankId r = runnable.back();
      runnable.pop_back();
      Advance(r, runnable);
    }
    if (device_queue_.empty()) break;
    GrantDevice(runnable);
  }
  ReportStuck();
  return Finish();
}

void Engine::Advance(RankId r, std::vector<RankId>& runnable) {
  const Program& program = s_.programs[r];
  while (pc_[r] < program.size()) {
    const Action& a = program[pc_[r]];
    const long ev = offset_[r] + static_cast<long>(pc_[r]);
    TimelineEvent& e = events_[ev];
    e.rank = r;
    e.action = a;
    const StageId st = a.stage;
    const MicrobatchId m = a.microbatch;
    switch (a.kind) {
      case ActionKind::kSendF:
      case ActionKind::kSendB: {
        const bool fwd = a.kind == ActionKind::kSendF;
        const StageId to = PeerStage(a);
        if (to < 0 || to >= S_) Stuck(r, a, "sends to a stage that does not exist");
        if ((fwd ? f_end_[Key(st, m)] : bi_end_[Key(st, m)]) == kUnknown) {
          Stuck(r, a, "sends data its rank has not produced yet");
        }
        const size_t key = MsgKey(fwd, to, m);
        if (arrival_[key] != kUnknown) Stuck(r, a, "sends a message that was already sent");
        const Bytes bytes = costs_.Stage(st).message_bytes;
        StartOnCommResource(r, ev, costs_.TransferTime(r, s_.placement[to], bytes));
        HoldSent(r, fwd ? costs_.Stage(st).forward_send_bytes.value_or(bytes) : bytes, a, e.end);
        arrival_[key] = e.end;
        send_event_[key] = ev;
        ++messages_;
        bytes_sent_ += bytes;
        if (waiting_[key] >= 0) {
          runnable.push_back(waiting_[key]);
          waiting_[key] = -1;
        }
        break;
      }
      case ActionKind::kRecvF:
      case ActionKind::kRecvB: {
        const size_t key = MsgKey(a.kind == ActionKind::kRecvF, st, m);
        e.start = e.end = clock_[r];  // end is set to the arrival in Finish()
        recv_event_[key] = ev;
        // Posted at the step's start: no compute action came before it.
        if (PostedAhead() && !computed_[r]) HoldPosted(r, clock_[r], a);
        break;
      }
      default:
        if (IsPerStage(a.kind)) {
          RunPerStage(r, ev, a);
        } else if (!RunCompute(r, ev, a)) {
          return;  // parked until a message it needs is sent
        }
        break;
    }
    ++pc_[r];
  }
}

void Engine::StartOnCommResource(RankId r, long ev, TimeNs transfer) {
  TimelineEvent& e = events_[ev];
  const bool queued = comm_free_[r] > clock_[r];
  e.start = queued ? comm_free_[r] : clock_[r];
  e.end = e.start + transfer;
  pred_[ev] = queued ? last_send_[r] : last_compute_[r];
  comm_free_[r] = e.end;
  last_send_[r] = ev;
}

bool Engine::PartReady(RankId r, const Action& a, const Action& part, TimeNs& ready, long& pred) {
  const StageId st = part.stage;
  const MicrobatchId m = part.microbatch;
  auto need_message = [&](bool forward) {
    const size_t key = MsgKey(forward, st, m);
    if (arrival_[key] == kUnknown) {
      waiting_[key] = r;
      return false;
    }
    if (arrival_[key] >= ready) {
      ready = arrival_[key];
      pred = send_event_[key];
    }
    return true;
  };
  auto need_local = [&](TimeNs end, const char* what) {
    if (end == kUnknown) Stuck(r, a, std::string("needs ") + what + ", which its rank has not run before it");
  };
  if (part.kind == ActionKind::kForward) {
    if (st > s_.FirstStage(m)) {
      if (s_.placement[st - 1] == r) {
        need_local(f_end_[Key(st - 1, m)], "the forward of the previous stage");
      } else if (!need_message(true)) {
        return false;
      }
    }
  } else if (IsInputGrad(part.kind)) {
    need_local(f_end_[Key(st, m)], "its own forward");
    if (st < s_.LastStage(m)) {
      if (s_.placement[st + 1] == r) {
        need_local(bi_end_[Key(st + 1, m)], "the backward of the next stage");
      } else if (!need_message(false)) {
        return false;
      }
    }
  } else {  // W
    need_local(i_end_[Key(st, m)], "its I");
  }
  return true;
}

TimeNs Engine::CostOf(const Action& a) {
  if (a.kind == ActionKind::kOverlapFB) return costs_.ComputeTime(a);
  if (rng_ != nullptr) return costs_.SampleComputeTime(a, Draw());
  TimeNs& cached = time_of_[static_cast<size_t>(a.stage) * 4 + static_cast<int>(a.kind)];
  if (cached == kUnknown) cached = costs_.ComputeTime(a);
  return cached;
}

void Engine::MapDevices() {
  const std::vector<int>& given = costs_.Devices();
  const std::vector<int>& slots = costs_.DeviceSlots();
  std::map<int, int> dense;
  std::vector<int> slots_of;
  device_.resize(s_.ranks);
  for (RankId r = 0; r < s_.ranks; ++r) {
    const int id = given.empty() ? r : given[r];
    const auto [it, added] = dense.emplace(id, static_cast<int>(dense.size()));
    if (added) slots_of.push_back(static_cast<size_t>(id) < slots.size() ? slots[id] : 1);
    device_[r] = it->second;
  }
  std::vector<int> ranks_on(dense.size(), 0);
  for (RankId r = 0; r < s_.ranks; ++r) ++ranks_on[device_[r]];
  shared_.resize(s_.ranks);
  for (RankId r = 0; r < s_.ranks; ++r) shared_[r] = ranks_on[device_[r]] > slots_of[device_[r]];
  slot_free_.assign(dense.size(), {});
  slot_last_.assign(dense.size(), {});
  for (size_t d = 0; d < dense.size(); ++d) {
    slot_free_[d].assign(std::min(slots_of[d], ranks_on[d]), 0);
    slot_last_[d].assign(slot_free_[d].size(), -1);
  }
  grant_.assign(s_.ranks, kUnknown);
  grant_slot_.assign(s_.ranks, -1);
}

bool Engine::TakeDevice(RankId r, TimeNs& ready, long& pred) {
  if (!shared_[r]) return true;
  if (grant_[r] == kUnknown) {
    device_queue_.push({ready, ready, r});
    return false;
  }
  if (grant_[r] > ready) pred = slot_last_[device_[r]][grant_slot_[r]];
  ready = grant_[r];
  grant_[r] = kUnknown;
  return true;
}

void Engine::GrantDevice(std::vector<RankId>& runnable) {
  const auto [t, since, r] = device_queue_.top();
  device_queue_.pop();
  const int slot = FirstFreeSlot(device_[r]);
  const TimeNs free = slot_free_[device_[r]][slot];
  if (free > t) {
    device_queue_.push({free, since, r});
    return;
  }
  grant_[r] = t;
  grant_slot_[r] = slot;
  runnable.push_back(r);
}

bool Engine::RunCompute(RankId r, long ev, const Action& a) {
  TimelineEvent& e = events_[ev];
  TimeNs ready = clock_[r];
  long pred = last_compute_[r];
  const ComputeParts parts = PartsOf(a);
  for (const Action& part : parts) {
    if (!PartReady(r, a, part, ready, pred)) return false;
  }
  if (!TakeDevice(r, ready, pred)) return false;
  const TimeNs cost = CostOf(a);
  e.start = ready;
  e.end = ready + cost;
  pred_[ev] = pred;
  clock_[r] = e.end;
  last_compute_[r] = ev;
  if (shared_[r]) {
    // The slot is free for the next rank once the action's share of it is
    // done (StageCost::device_share; the whole action unless measured).
    const double share = costs_.Stage(a.stage).DeviceShareOf(a.kind);
    slot_free_[device_[r]][grant_slot_[r]] =
        e.start + static_cast<TimeNs>(std::llround(share * static_cast<double>(cost)));
    slot_last_[device_[r]][grant_slot_[r]] = ev;
  }
  RankMetrics& rm = metrics_[r];
  rm.busy += cost;
  if (rm.start == kUnknown) rm.start = e.start;
  rm.end = e.end;
  if (costs_.Messages()) MessagesAtStart(r, parts, e.start);
  for (const Action& part : parts) {
    if (!any_casts_) break;
    // A stage's first compute makes the weight casts the step then keeps;
    // a recomputed stage's F runs without autograd, which neither uses
    // nor fills the cache: its first B or I does.
    const bool no_cache = part.kind == ActionKind::kForward && costs_.Stage(part.stage).recomputed_bytes > 0;
    if (!casts_held_[part.stage] && !no_cache) {
      casts_held_[part.stage] = true;
      Sample(r, e.start, costs_.Stage(part.stage).cast_weight_bytes, &MemoryParts::casts);
    }
  }
  // While it runs, the action also holds its temporaries: on top of what
  // is held before it (and, for a forward, its own activations).
  Bytes activations = 0, workspace = 0;
  for (const Action& part : parts) {
    const StageCost& sc = costs_.Stage(part.stage);
    if (part.kind == ActionKind::kForward) activations += ActivationOf(r, part.stage, part.microbatch, sc);
    // A recomputed stage's B or I rebuilds its activations first.
    if (part.kind == ActionKind::kBackward || part.kind == ActionKind::kBackwardInput) {
      activations += sc.recomputed_bytes;
    }
    workspace = std::max(workspace, sc.WorkspaceOf(part.kind));
  }
  if (bytes_[r] + activations + workspace > rm.peak_activation_bytes) {
    rm.peak_activation_bytes = bytes_[r] + activations + workspace;
    rm.peak_parts = held_parts_[r];
    rm.peak_parts.activations += activations;
    rm.peak_parts.workspace = workspace;
  }
  for (const Action& part : parts) FinishPart(r, a, part, e);
  if (costs_.Messages()) {
    for (const Action& part : parts) MessagesAtEnd(r, part, e.end);
  }
  return true;
}

void Engine::FinishPart(RankId r, const Action& a, const Action& part, const TimelineEvent& e) {
  const StageId st = part.stage;
  const MicrobatchId m = part.microbatch;
  const StageCost& sc = costs_.Stage(st);
  RankMetrics& rm = metrics_[r];
  switch (InfoOf(part.kind).memory) {
    case KindMemory::kHoldActivations:
      if (f_end_[Key(st, m)] != kUnknown) Stuck(r, a, "runs a forward twice");
      f_end_[Key(st, m)] = e.end;
      ++inflight_[r];
      rm.peak_inflight = std::max(rm.peak_inflight, inflight_[r]);
      Sample(r, e.start, ActivationOf(r, st, m, sc), &MemoryParts::activations);
      break;
    case KindMemory::kReleaseActivations:
    case KindMemory::kSwapActivationsForStash: {
      if (bi_end_[Key(st, m)] != kUnknown) Stuck(r, a, "runs a backward twice");
      bi_end_[Key(st, m)] = e.end;
      const bool split = part.kind == ActionKind::kBackwardInput;
      if (split) i_end_[Key(st, m)] = e.end;
      if (!split) ++grads_done_[st];
      --inflight_[r];
      Sample(r, e.end,
             {{&MemoryParts::activations, -ActivationOf(r, st, m, sc)},
              {&MemoryParts::weight_grads, split ? sc.weight_grad_bytes : 0}});
      KeepSentOutputs(r, st, m, e.end);
      break;
    }
    default:  // W
      ++grads_done_[st];
      Sample(r, e.end, -sc.weight_grad_bytes, &MemoryParts::weight_grads);
  }
}

void Engine::RunPerStage(RankId r, long ev, const Action& a) {
  TimelineEvent& e = events_[ev];
  const StageId st = a.stage;
  if (a.kind == ActionKind::kReduceGrad && grads_done_[st] < s_.MicrobatchesThrough(st)) {
    Stuck(r, a, "reduces its stage's gradients before every B and W of the stage has run");
  }
  const bool overlapped = InfoOf(a.kind).resource == KindResource::kOverlappedCollective;
  e.start = overlapped ? std::max(clock_[r], dp_free_[r]) : clock_[r];
  // A measured REDUCE_GRAD with a spread is drawn when sampling; nothing
  // else is, so plans without such spreads draw as before.
  const bool drawn = rng_ != nullptr && a.kind == ActionKind::kReduceGrad && costs_.DataParallelGroup().degree > 1 &&
                     costs_.SpreadOf(a).has_value();
  e.end = e.start + (drawn ? costs_.SampleCollectiveTime(a, Draw()) : costs_.CollectiveTime(a));
  pred_[ev] = last_compute_[r];
  if (overlapped) {
    dp_free_[r] = e.end;
    return;
  }
  clock_[r] = e.end;
  last_compute_[r] = ev;
  const KindMemory memory = InfoOf(a.kind).memory;
  if (memory == KindMemory::kHoldParams && gathered_[st] == 0) {
    const int D = costs_.DataParallelGroup().degree;
    gathered_[st] = costs_.Stage(st).param_bytes / D * (D - 1);
    Sample(r, e.start, gathered_[st], &MemoryParts::params);
  } else if (memory == KindMemory::kReleaseParams) {
    Sample(r, e.end, -gathered_[st], &MemoryParts::params);
    gathered_[st] = 0;
  }
}

}  // namespace pplab::sim_engine

namespace pplab {
namespace {

using sim_engine::Engine;

// Every time and byte count of the run is bounded by these sums; refusing
// plans whose sums do not fit far inside int64 keeps every figure exact.
void CheckTotals(const Schedule& s, const CostModel& costs, bool sampled) {
  constexpr double kLimit = 4e18;
  double time = 0, bytes = 0;
  for (RankId r = 0; r < s.ranks; ++r) {
    for (const Action& a : s.programs[r]) {
      if (IsCompute(a.kind)) {
        // A drawn time is at most the top of its spread.
        time += static_cast<double>(sampled ? costs.SampleComputeTime(a, 1.0) : costs.ComputeTime(a));
        for (const Action& part : PartsOf(a)) {
          // What a part may hold: its activations with an input, temporaries
          // and rebuilt activations, and an input and an output gradient.
          const StageCost& c = costs.Stage(part.stage);
          for (const Bytes b : {c.activation_bytes, c.input_bytes.value_or(c.message_bytes), c.WorkspaceOf(part.kind),
                                c.recomputed_bytes, c.input_grad_bytes.value_or(c.message_bytes), c.message_bytes,
                                c.cast_weight_bytes}) {
            bytes += static_cast<double>(b);
          }
          if (part.kind == ActionKind::kBackwardInput) {
            bytes += static_cast<double>(costs.Stage(part.stage).weight_grad_bytes);
          }
        }
      } else if (IsPerStage(a.kind)) {
        time += static_cast<double>(sampled ? costs.SampleCollectiveTime(a, 1.0) : costs.CollectiveTime(a));
        bytes += static_cast<double>(costs.Stage(a.stage).param_bytes);
      } else if (IsSend(a.kind)) {
        const StageId to = PeerStage(a);
        if (to < 0 || to >= s.stages) continue;  // reported when the action runs
        const Bytes message = costs.Stage(a.stage).message_bytes;
        time += costs.TransferTimeNs(r, s.placement[to], message);
        // The message, and what its sender and receiver buffers hold.
        bytes += static_cast<double>(2 * message + costs.Stage(a.stage).forward_send_bytes.value_or(message));
      }
    }
  }
  if (time > kLimit || bytes > kLimit) {
    char figures[96];
    std::snprintf(figures, sizeof figures, "%.3g ns, %.3g bytes", time, bytes);
    throw OverflowError("simulate '" + s.name +
                        "': the costs add up to more than int64 nanoseconds or bytes can hold (" + figures +
                        "); use smaller times or sizes");
  }
}

}  // namespace

SimResult Simulate(const Schedule& schedule, const CostModel& costs, std::mt19937_64* rng) {
  CheckShape(schedule);
  costs.CheckStages(schedule.stages, schedule.name);
  costs.CheckDevices(schedule.ranks, schedule.name);
  if (costs.Graphed() && schedule.HasSplitBackward()) {
    throw Error(costs.Origin() + ": its stages ran as CUDA graphs (graph_slot_bytes), which run whole backwards; " +
                schedule.name + " splits B into I and W");
  }
  CheckTotals(schedule, costs, rng != nullptr);
  if (!schedule.HasComm() && schedule.ranks > 1) {
    const Schedule lowered = Lower(schedule);
    return Engine(lowered, costs, rng).Run();
  }
  return Engine(schedule, costs, rng).Run();
}

}  // namespace pplab
