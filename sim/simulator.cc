#include "sim/simulator.h"

#include <algorithm>
#include <functional>
#include <initializer_list>
#include <map>
#include <queue>
#include <tuple>

#include "schedules/action_kinds.h"
#include "schedules/error.h"
#include "schedules/lowering.h"

namespace pplab {
namespace {

constexpr TimeNs kUnknown = -1;

// Runs the programs rank by rank: a rank advances until it needs a message
// that has not been sent yet, then parks until the SEND of that message runs.
// Every action is visited once, so the cost is linear in the number of
// actions. Time of each event is fixed by its dependencies alone (each rank
// has its own compute and communication resources), so the order in which
// ranks are advanced does not change any result. The one exception is a
// device shared by more ranks than it has slots: there a compute action also
// waits in the device queue, which grants a slot in time order (Run,
// GrantDevice); plans without shared devices never touch it.
class Engine {
 public:
  Engine(const Schedule& s, const CostModel& costs, std::mt19937_64* rng) : s_(s), costs_(costs), rng_(rng) {
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
  }

  // Advances ranks until each is done or parked; then grants a slot of a
  // shared device to the rank that asked for the earliest time, and goes on. When
  // no rank can advance, every compute not yet placed starts at or after the
  // earliest request in the device queue (a parked rank's message comes from
  // a rank that is itself parked or queued), so that grant is final.
  SimResult Run() {
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

 private:
  size_t Key(StageId st, MicrobatchId m) const { return static_cast<size_t>(st) * M_ + m; }
  // Message into `to_stage`: forward activations (dir 0) or gradients (dir 1).
  size_t MsgKey(bool forward, StageId to_stage, MicrobatchId m) const {
    return (forward ? 0 : static_cast<size_t>(S_) * M_) + Key(to_stage, m);
  }

  [[noreturn]] void Stuck(RankId r, const Action& a, const std::string& why) const {
    throw Error("simulate '" + s_.name + "': rank " + std::to_string(r) + " step " + std::to_string(pc_[r]) + " (" +
                FormatAction(a) + ") " + why + "; run `pplab validate` for the full report");
  }

  void Advance(RankId r, std::vector<RankId>& runnable) {
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

  // A SEND on rank r's communication resource: it starts when the rank has
  // reached it and the rank's previous message has left (one message at a
  // time per rank, in program order), and holds the resource for `transfer`.
  // The compute resource does not wait for it.
  void StartOnCommResource(RankId r, long ev, TimeNs transfer) {
    TimelineEvent& e = events_[ev];
    const bool queued = comm_free_[r] > clock_[r];
    e.start = queued ? comm_free_[r] : clock_[r];
    e.end = e.start + transfer;
    pred_[ev] = queued ? last_send_[r] : last_compute_[r];
    comm_free_[r] = e.end;
    last_send_[r] = ev;
  }

  // Whether compute part `part` of action `a` may start on rank r: raises
  // `ready` to the arrival of its message or the end of its local input and
  // keeps in `pred` the event that set it. False (the rank parks) when a
  // message it needs has not been sent yet.
  bool PartReady(RankId r, const Action& a, const Action& part, TimeNs& ready, long& pred) {
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

  // Time of a compute action; simple kinds are resolved once per stage,
  // or drawn per action when sampling.
  TimeNs CostOf(const Action& a) {
    if (a.kind == ActionKind::kOverlapFB) return costs_.ComputeTime(a);
    if (rng_ != nullptr) return costs_.SampleComputeTime(a, Draw());
    TimeNs& cached = time_of_[static_cast<size_t>(a.stage) * 4 + static_cast<int>(a.kind)];
    if (cached == kUnknown) cached = costs_.ComputeTime(a);
    return cached;
  }

  // A quantile in [0, 1) from the generator: its top 53 bits.
  double Draw() { return static_cast<double>((*rng_)() >> 11) * 0x1.0p-53; }

  // Dense device ids, their slots (CostModel::Devices(), DeviceSlots()),
  // and which ranks share theirs: more ranks on it than it has slots.
  void MapDevices() {
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

  // The slot of device d that frees first (the lowest on ties).
  int FirstFreeSlot(int d) const {
    const std::vector<TimeNs>& free = slot_free_[d];
    return static_cast<int>(std::min_element(free.begin(), free.end()) - free.begin());
  }

  // A compute action whose inputs are there at `ready` on a device that
  // more ranks share than it has slots: the rank queues for a slot (false:
  // it parks) unless GrantDevice has granted it one; then `ready` is the
  // granted start, and `pred` the slot's previous action when the device
  // delayed it.
  bool TakeDevice(RankId r, TimeNs& ready, long& pred) {
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

  // Pops the earliest request; it gets the slot that frees first when that
  // is free by then, else asks again for the time it frees. Requests for
  // one time go first come, first served (then the lower rank).
  void GrantDevice(std::vector<RankId>& runnable) {
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

  // Runs a compute action (F, B, I, W or a composite) once all its parts'
  // inputs are there and its device is free; false when the rank must park.
  bool RunCompute(RankId r, long ev, const Action& a) {
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
      slot_free_[device_[r]][grant_slot_[r]] = e.end;
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

  // What F of (st, m) on rank r holds until its B or I: the stage's
  // activation_bytes, less its input when that was measured received but
  // comes from the previous stage on this rank, which keeps it as its
  // outputs; more when it was measured shared so but is not here (received,
  // or handed over by a recomputed previous stage, which keeps nothing).
  Bytes ActivationOf(RankId r, StageId st, MicrobatchId m, const StageCost& c) const {
    if (!c.activation_includes_input || st <= s_.FirstStage(m)) return c.activation_bytes;
    const Bytes input = c.input_bytes.value_or(c.message_bytes);
    const bool shared = s_.placement[st - 1] == r && costs_.Stage(st - 1).recomputed_bytes == 0;
    if (*c.activation_includes_input && shared) return std::max<Bytes>(0, c.activation_bytes - input);
    if (!*c.activation_includes_input && !shared) return c.activation_bytes + input;
    return c.activation_bytes;
  }

  // Message buffers (CostModel::Messages(), docs/cost-model.md "Message
  // buffers"), as the executor and its transport hold them.
  bool PostedAhead() const {
    return costs_.Messages() && costs_.Messages()->receive_posted == MessageMemory::ReceivePosted::kOneActionAhead;
  }
  // Stage st's input gradients of one microbatch as the executor holds them.
  Bytes GradBytes(StageId st) const {
    const StageCost& c = costs_.Stage(st);
    return c.input_grad_bytes.value_or(c.message_bytes);
  }
  // A receive posted ahead: its buffer holds the wire bytes the sending
  // stage sends, from the post until its consumer starts.
  void HoldPosted(RankId r, TimeNs t, const Action& recv) {
    const size_t key = MsgKey(recv.kind == ActionKind::kRecvF, recv.stage, recv.microbatch);
    recv_held_[key] = costs_.Stage(PeerStage(recv)).message_bytes;
    Sample(r, t, recv_held_[key], &MemoryParts::messages);
  }
  // Whether `part` (F, or B/I) takes its input from another rank's message.
  bool ReceivesForward(RankId r, const Action& part) const {
    return part.kind == ActionKind::kForward && part.stage > s_.FirstStage(part.microbatch) &&
           s_.placement[part.stage - 1] != r;
  }
  bool ReceivesGrads(RankId r, const Action& part) const {
    return IsInputGrad(part.kind) && part.stage < s_.LastStage(part.microbatch) && s_.placement[part.stage + 1] != r;
  }

  // At the start of a compute action (before its peak is taken): the
  // receives posted with it, when receives are posted ahead (those before
  // the next compute action in the program) get their buffers. Each part's
  // received message becomes what the part uses: an F's input, which its
  // activations hold from now; a B's or I's output gradients, as the
  // transport hands them over (after a cast back from the wire's dtype),
  // held until the B ends or the I's W ends.
  void MessagesAtStart(RankId r, const ComputeParts& parts, TimeNs start) {
    computed_[r] = true;
    if (PostedAhead()) {
      const Program& program = s_.programs[r];
      for (size_t i = pc_[r] + 1; i < program.size() && !IsCompute(program[i].kind); ++i) {
        if (IsRecv(program[i].kind)) HoldPosted(r, start, program[i]);
      }
    }
    for (const Action& part : parts) {
      const bool forward = ReceivesForward(r, part);
      if (!forward && !ReceivesGrads(r, part)) continue;
      Bytes& posted = recv_held_[MsgKey(forward, part.stage, part.microbatch)];
      Sample(r, start, (forward ? 0 : GradBytes(part.stage + 1)) - posted, &MemoryParts::messages);
      posted = 0;
    }
  }

  // At the end of a B, I or W part: a B frees the output gradients it used
  // (a received message, or the next stage's input gradients on this
  // rank), a W those its I used; a B or I holds the input gradients it made
  // until the previous stage's B or I on this rank takes them, or its SEND_B.
  void MessagesAtEnd(RankId r, const Action& part, TimeNs end) {
    const StageId st = part.stage;
    const MicrobatchId m = part.microbatch;
    const bool frees_used = part.kind == ActionKind::kBackward || part.kind == ActionKind::kBackwardWeight;
    if (frees_used && st < s_.LastStage(m)) Sample(r, end, -GradBytes(st + 1), &MemoryParts::messages);
    if (IsInputGrad(part.kind) && st > s_.FirstStage(m)) Sample(r, end, GradBytes(st), &MemoryParts::messages);
  }

  // A SEND issued on rank r at clock_[r], its message arriving at
  // `delivered`: the transport holds `bytes` (a SEND_F's forward_send_bytes;
  // a SEND_B's wire bytes, in place of the input gradients the executor
  // drops) until it frees the message (MessageMemory::SentFreed).
  void HoldSent(RankId r, Bytes bytes, const Action& send, TimeNs delivered) {
    if (!costs_.Messages()) return;
    std::vector<std::pair<TimeNs, Bytes>>& held = held_sends_[r];
    if (costs_.Messages()->sent_freed == MessageMemory::SentFreed::kNextSendAfterDelivery) {
      Bytes freed = 0;
      held.erase(std::remove_if(held.begin(), held.end(),
                                [&](const std::pair<TimeNs, Bytes>& h) {
                                  if (h.first > clock_[r]) return false;
                                  freed += h.second;
                                  return true;
                                }),
                 held.end());
      Sample(r, clock_[r], -freed, &MemoryParts::messages);
    }
    Sample(r, clock_[r], bytes - (send.kind == ActionKind::kSendB ? GradBytes(send.stage) : 0), &MemoryParts::messages);
    held.push_back({delivered, bytes});
  }

  // Records the end of one compute part: its output time and what it holds
  // or releases (the kind table's memory rule).
  void FinishPart(RankId r, const Action& a, const Action& part, const TimelineEvent& e) {
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
        break;
      }
      default:  // W
        ++grads_done_[st];
        Sample(r, e.end, -sc.weight_grad_bytes, &MemoryParts::weight_grads);
    }
  }

  // A per-stage collective (REDUCE_GRAD, UNSHARD, RESHARD) for
  // CostModel::CollectiveTime. UNSHARD and RESHARD block their rank in
  // program order (the stage's weights are needed, or freed). REDUCE_GRAD
  // overlaps: it starts when the rank reaches it (and its previous one has
  // ended: a rank's all-reduces run one after another), runs while the rank
  // computes on, as the trainer's bucket all-reduces do, and the step's work
  // waits for it (AddStepWork).
  void RunPerStage(RankId r, long ev, const Action& a) {
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
                       costs_.SpreadOf(a) != nullptr;
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

  // The per-step work (CostModel::Step()) after each rank's last action:
  // the all-reduces start when the last rank is done (they need every
  // rank), then each rank clips and steps its optimizer; without
  // all-reduces each rank goes on at once. Returns the step's end.
  // Sampling draws, for each cost with a spread, in this order: the loss
  // and the norm all-reduce once (a collective ends together on every
  // rank), a tied embedding's exchange once per pipeline, then clip and
  // optimizer once per rank, rank by rank.
  TimeNs AddStepWork(std::vector<StepEvent>& out) {
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

  // Changes what rank r holds at time t, by kind, as one sample of its
  // memory track.
  using Part = Bytes MemoryParts::*;
  void Sample(RankId r, TimeNs t, std::initializer_list<std::pair<Part, Bytes>> deltas) {
    Bytes delta = 0;
    for (const auto& [part, d] : deltas) {
      held_parts_[r].*part += d;
      delta += d;
    }
    Record(r, t, delta);
  }
  void Sample(RankId r, TimeNs t, Bytes delta, Part part) {
    if (delta == 0) return;
    held_parts_[r].*part += delta;
    Record(r, t, delta);
  }
  void Record(RankId r, TimeNs t, Bytes delta) {
    if (delta == 0) return;
    bytes_[r] += delta;
    if (bytes_[r] > metrics_[r].peak_activation_bytes) {
      metrics_[r].peak_activation_bytes = bytes_[r];
      metrics_[r].peak_parts = held_parts_[r];
    }
    memory_.push_back({r, t, bytes_[r]});
  }

  void ReportStuck() const {
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

  SimResult Finish() {
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
      for (const auto& h : held_sends_[r]) held += h.second;
      Sample(r, actions_end, -held, &MemoryParts::messages);
    }
    for (StageId st = 0; st < S_; ++st) {
      if (casts_held_[st]) {
        Sample(s_.placement[st], actions_end, -costs_.Stage(st).cast_weight_bytes, &MemoryParts::casts);
      }
    }
    out.makespan = AddStepWork(out.timeline.step_events);
    out.critical_step = out.makespan - actions_end;
    for (long ev = last; ev >= 0; ev = pred_[ev]) {
      const TimelineEvent& e = events_[ev];
      out.critical_path.push_back({e.rank, e.action, e.start, e.end});
      (IsCompute(e.action.kind) ? out.critical_compute : out.critical_comm) += e.end - e.start;
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

  const Schedule& s_;
  const CostModel& costs_;
  std::mt19937_64* rng_;  // null: no sampling
  int S_ = 0, M_ = 0;
  std::vector<TimeNs> time_of_;
  std::vector<TimeNs> f_end_, bi_end_, i_end_;
  std::vector<TimeNs> arrival_;
  std::vector<long> send_event_, recv_event_;
  std::vector<RankId> waiting_;
  std::vector<long> offset_;
  std::vector<TimelineEvent> events_;
  std::vector<long> pred_;
  std::vector<size_t> pc_;
  std::vector<TimeNs> clock_;                   // per rank: when its compute resource is free
  std::vector<TimeNs> comm_free_;               // per rank: when its communication resource is free
  std::vector<TimeNs> dp_free_;                 // per rank: when its last data-parallel all-reduce (REDUCE_GRAD) ends
  std::vector<int> device_;                     // per rank: its device, dense ids
  std::vector<bool> shared_;                    // per rank: whether its device has fewer slots than ranks
  std::vector<std::vector<TimeNs>> slot_free_;  // per shared device and slot: end of its latest compute action
  std::vector<std::vector<long>> slot_last_;    // per shared device and slot: its latest compute event
  std::vector<TimeNs> grant_;                   // per rank: the start GrantDevice gave it, or kUnknown
  std::vector<int> grant_slot_;                 // per rank: the slot GrantDevice gave it
  // Requests for a slot of a shared device: (time wanted, ready since, rank), earliest first.
  std::priority_queue<std::tuple<TimeNs, TimeNs, RankId>, std::vector<std::tuple<TimeNs, TimeNs, RankId>>,
                      std::greater<>>
      device_queue_;
  std::vector<long> last_send_;  // per rank: its latest SEND event
  std::vector<long> last_compute_;
  std::vector<int> inflight_;
  std::vector<int> grads_done_;  // per stage: B and W run so far
  std::vector<Bytes> gathered_;  // per stage: bytes an UNSHARD holds until its RESHARD
  std::vector<Bytes> bytes_;
  std::vector<MemoryParts> held_parts_;  // per rank: bytes_ by kind (workspace always 0)
  // Per rank: (delivery time, bytes) of each sent message its transport holds.
  std::vector<std::vector<std::pair<TimeNs, Bytes>>> held_sends_;
  std::vector<Bytes> recv_held_;  // per message (MsgKey): the bytes its posted receive buffer holds now
  std::vector<bool> computed_;    // per rank: whether a compute action has started
  std::vector<bool> casts_held_;  // per stage: whether its weight casts are made
  bool any_casts_ = false;        // whether any stage keeps weight casts
  std::vector<RankMetrics> metrics_;
  std::vector<MemorySample> memory_;
  long messages_ = 0;
  Bytes bytes_sent_ = 0;
};

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
        time += static_cast<double>(costs.TransferTime(r, s.placement[to], message));
        // The message, and what its sender and receiver buffers hold.
        bytes += static_cast<double>(2 * message + costs.Stage(a.stage).forward_send_bytes.value_or(message));
      }
    }
  }
  if (time > kLimit || bytes > kLimit) {
    throw Error("simulate '" + s.name + "': the costs add up to more than int64 nanoseconds or bytes can hold (" +
                std::to_string(time) + " ns, " + std::to_string(bytes) + " bytes); use smaller times or sizes");
  }
}

}  // namespace

SimResult Simulate(const Schedule& schedule, const CostModel& costs, std::mt19937_64* rng) {
  CheckShape(schedule);
  costs.CheckStages(schedule.stages, schedule.name);
  costs.CheckDevices(schedule.ranks, schedule.name);
  CheckTotals(schedule, costs, rng != nullptr);
  if (!schedule.HasComm() && schedule.ranks > 1) {
    const Schedule lowered = Lower(schedule);
    return Engine(lowered, costs, rng).Run();
  }
  return Engine(schedule, costs, rng).Run();
}

}  // namespace pplab
