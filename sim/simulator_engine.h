// The simulator's engine (sim/simulator.h runs it): one step of a plan on
// its cost model, event by event. Internal to sim/: its methods live in
// simulator_engine.cc (the run: actions, messages, devices),
// simulator_memory.cc (what each rank holds, sample by sample) and
// simulator_finish.cc (the step's work after the actions and the result).
#pragma once

#include <algorithm>
#include <functional>
#include <initializer_list>
#include <queue>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "schedules/action_kinds.h"
#include "schedules/error.h"
#include "schedules/schedule.h"
#include "sim/cost_model.h"
#include "sim/simulator.h"

namespace pplab::sim_engine {

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
  Engine(const Schedule& s, const CostModel& costs, std::mt19937_64* rng);

  // Advances ranks until each is done or parked; then grants a slot of a
  // shared device to the rank that asked for the earliest time, and goes on. When
  // no rank can advance, every compute not yet placed starts at or after the
  // earliest request in the device queue (a parked rank's message comes from
  // a rank that is itself parked or queued), so that grant is final.
  SimResult Run();

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

  void Advance(RankId r, std::vector<RankId>& runnable);

  // A SEND on rank r's communication resource: it starts when the rank has
  // reached it and the rank's previous message has left (one message at a
  // time per rank, in program order), and holds the resource for `transfer`.
  // The compute resource does not wait for it.
  void StartOnCommResource(RankId r, long ev, TimeNs transfer);

  // Whether compute part `part` of action `a` may start on rank r: raises
  // `ready` to the arrival of its message or the end of its local input and
  // keeps in `pred` the event that set it. False (the rank parks) when a
  // message it needs has not been sent yet.
  bool PartReady(RankId r, const Action& a, const Action& part, TimeNs& ready, long& pred);

  // Time of a compute action; simple kinds are resolved once per stage,
  // or drawn per action when sampling.
  TimeNs CostOf(const Action& a);

  // A quantile in [0, 1) from the generator: its top 53 bits.
  double Draw() { return static_cast<double>((*rng_)() >> 11) * 0x1.0p-53; }

  // Dense device ids, their slots (CostModel::Devices(), DeviceSlots()),
  // and which ranks share theirs: more ranks on it than it has slots.
  void MapDevices();
  // Each rank's graphed stages' slots (StageCost::graph_slot_bytes), held
  // from the step's start.
  void HoldGraphSlots();

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
  bool TakeDevice(RankId r, TimeNs& ready, long& pred);

  // Pops the earliest request; it gets the slot that frees first when that
  // is free by then, else asks again for the time it frees. Requests for
  // one time go first come, first served (then the lower rank).
  void GrantDevice(std::vector<RankId>& runnable);

  // Runs a compute action (F, B, I, W or a composite) once all its parts'
  // inputs are there and its device is free; false when the rank must park.
  bool RunCompute(RankId r, long ev, const Action& a);

  // What F of (st, m) on rank r holds until its B or I: the stage's
  // activation_bytes, less its input when that was measured received but
  // comes from the previous stage on this rank, which keeps it as its
  // outputs; more when it was measured shared so but is not here (received,
  // or handed over by a recomputed previous stage, which keeps nothing).
  Bytes ActivationOf(RankId r, StageId st, MicrobatchId m, const StageCost& c) const;

  // Message buffers (CostModel::Messages(), docs/cost-model.md "Message
  // buffers"), as the executor and its transport hold them.
  bool PostedAhead() const {
    return costs_.Messages() && costs_.Messages()->receive_posted == MessageMemory::ReceivePosted::kOneActionAhead;
  }
  // Stage st's input gradients of one microbatch as the executor holds them.
  Bytes GradBytes(StageId st) const;
  // A receive posted ahead: its buffer holds the wire bytes the sending
  // stage sends, from the post until its consumer starts.
  void HoldPosted(RankId r, TimeNs t, const Action& recv);
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
  void MessagesAtStart(RankId r, const ComputeParts& parts, TimeNs start);

  // At the end of a B, I or W part: a B frees the output gradients it used
  // (a received message, or the next stage's input gradients on this
  // rank), a W those its I used; a B or I holds the input gradients it made
  // until the previous stage's B or I on this rank takes them, or its SEND_B.
  void MessagesAtEnd(RankId r, const Action& part, TimeNs end);

  // A SEND issued on rank r at clock_[r], its message arriving at
  // `delivered`: the transport holds `bytes` (a SEND_F's forward_send_bytes;
  // a SEND_B's wire bytes, in place of the input gradients the executor
  // drops) until it frees the message (MessageMemory::SentFreed).
  // A SEND_F whose forward_send_bytes is below message_bytes sent, where
  // the transport's sends are views (MessageMemory::sent_view), a view of
  // the outputs for the rest (the executor's outputs themselves): they
  // are in the rank's activations until the stage's B or I releases them,
  // and in the message from then until the transport frees it
  // (KeepSentOutputs).
  void HoldSent(RankId r, Bytes bytes, const Action& send, TimeNs delivered);
  // At the end of stage st's B or I of microbatch m on rank r, at `end`:
  // outputs its SEND_F sent as a view stay held by the message.
  void KeepSentOutputs(RankId r, StageId st, MicrobatchId m, TimeNs end);

  // Records the end of one compute part: its output time and what it holds
  // or releases (the kind table's memory rule).
  void FinishPart(RankId r, const Action& a, const Action& part, const TimelineEvent& e);

  // A per-stage collective (REDUCE_GRAD, UNSHARD, RESHARD) for
  // CostModel::CollectiveTime. UNSHARD and RESHARD block their rank in
  // program order (the stage's weights are needed, or freed). REDUCE_GRAD
  // overlaps: it starts when the rank reaches it (and its previous one has
  // ended: a rank's all-reduces run one after another), runs while the rank
  // computes on, as the trainer's bucket all-reduces do, and the step's work
  // waits for it (AddStepWork).
  void RunPerStage(RankId r, long ev, const Action& a);

  // The per-step work (CostModel::Step()) after each rank's last action:
  // the all-reduces start when the last rank is done (they need every
  // rank), then each rank clips and steps its optimizer; without
  // all-reduces each rank goes on at once. Returns the step's end.
  // Sampling draws, for each cost with a spread, in this order: the loss
  // and the norm all-reduce once (a collective ends together on every
  // rank), a tied embedding's exchange once per pipeline, then clip and
  // optimizer once per rank, rank by rank.
  TimeNs AddStepWork(std::vector<StepEvent>& out);

  // Changes what rank r holds at time t, by kind, as one sample of its
  // memory track.
  using Part = Bytes MemoryParts::*;
  void Sample(RankId r, TimeNs t, std::initializer_list<std::pair<Part, Bytes>> deltas);
  void Sample(RankId r, TimeNs t, Bytes delta, Part part);
  void Record(RankId r, TimeNs t, Bytes delta);

  void ReportStuck() const;

  SimResult Finish();

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
  // A sent message its transport holds: delivered at `delivered`, holding
  // `bytes` now; a SEND_F that sent a view of its stage's outputs (`view`
  // bytes of them, not in `bytes`) names them by Key(stage, microbatch).
  struct HeldSend {
    TimeNs delivered = 0;
    Bytes bytes = 0;
    long outputs = -1;  // Key(stage, microbatch) of the viewed outputs; -1: none
    Bytes view = 0;
  };
  std::vector<std::vector<HeldSend>> held_sends_;  // per rank
  std::vector<Bytes> recv_held_;  // per message (MsgKey): the bytes its posted receive buffer holds now
  std::vector<bool> computed_;    // per rank: whether a compute action has started
  std::vector<bool> casts_held_;  // per stage: whether its weight casts are made
  bool any_casts_ = false;        // whether any stage keeps weight casts
  std::vector<RankMetrics> metrics_;
  std::vector<MemorySample> memory_;
  long messages_ = 0;
  Bytes bytes_sent_ = 0;
};

}  // namespace pplab::sim_engine
