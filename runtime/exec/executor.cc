#include "runtime/exec/executor.h"

#include <torch/torch.h>

#include <algorithm>
#include <memory>
#include <optional>

#include "runtime/comm/device_wait.h"
#include "runtime/exec/autocast.h"
#include "runtime/exec/host_watch.h"
#include "runtime/exec/memory_meter.h"
#include "runtime/exec/step_clock.h"
#include "schedules/error.h"

namespace pplab {

namespace {

bool IsFloat(const at::Tensor& t) { return t.defined() && at::isFloatingType(t.scalar_type()); }

TensorList Floats(const TensorList& list) {
  TensorList out;
  for (const at::Tensor& t : list) {
    if (IsFloat(t)) out.push_back(t);
  }
  return out;
}

// Received or handed-over activations become leaves of this stage's graph.
TensorList AsStageInputs(const TensorList& list) {
  TensorList out;
  for (const at::Tensor& t : list) out.push_back(IsFloat(t) ? t.detach().requires_grad_(true) : t);
  return out;
}

}  // namespace

at::Tensor RunForwardAction(Stage& stage, StageSlot& slot, const TensorList& inputs, const LossFn* loss,
                            const at::Tensor& targets, double loss_scale) {
  slot.inputs = AsStageInputs(inputs);
  TensorList outputs;
  {
    DeferWeightGradsScope defer(slot.deferred);
    outputs = stage.Forward(slot.inputs);
  }
  if (loss == nullptr) {
    slot.outputs = std::move(outputs);
    return {};
  }
  at::Tensor value = (*loss)(outputs, targets) * loss_scale;
  slot.outputs = {value};
  return value.detach();
}

void RunBackwardAction(StageSlot& slot) {
  const TensorList ins = Floats(slot.inputs);
  torch::autograd::backward(Floats(slot.outputs), slot.output_grads);
  slot.input_grads.clear();
  for (const at::Tensor& t : ins) slot.input_grads.push_back(t.grad());
  slot.inputs.clear();
  slot.outputs.clear();
  slot.output_grads.clear();
}

// The same backward as B: the products that F recorded for deferral hand
// their weights' gradients to slot.deferred instead of computing them. The
// other parameters' gradients (norms, biases, the embedding) are made here.
void RunBackwardInputAction(StageSlot& slot) { RunBackwardAction(slot); }

TensorList Clone(const TensorList& list) {
  TensorList out;
  for (const at::Tensor& t : list) out.push_back(t.defined() ? t.clone() : t);
  return out;
}

void RunBackwardWeightAction(StageSlot& slot) {
  if (slot.deferred) slot.deferred->Run();
}

int64_t MessageTag(const Schedule& schedule, const Action& a) {
  const MessageKey key = MessageOf(a);
  return ((key.forward ? 0 : 1) * static_cast<int64_t>(schedule.stages) + key.to_stage) * schedule.microbatches +
         key.microbatch;
}

Executor::Executor(const Schedule& schedule, RankId rank, std::map<StageId, Stage*> stages, Transport& transport,
                   LossFn loss, ExecutorOptions options)
    : schedule_(schedule),
      rank_(rank),
      stages_(std::move(stages)),
      transport_(transport),
      loss_(std::move(loss)),
      options_(options) {
  for (StageId s : schedule.StagesOf(rank)) {
    if (stages_.count(s) == 0 || stages_[s] == nullptr) {
      throw Error("executor rank " + std::to_string(rank) + ": no module for stage " + std::to_string(s));
    }
  }
  std::vector<RankId> peers;
  for (const Action& a : schedule.programs.at(rank)) {
    if (IsRecv(a.kind) || IsSend(a.kind)) peers.push_back(schedule.placement[PeerStage(a)]);
    if (!IsCompute(a.kind)) continue;
    const ComputeParts parts = PartsOf(a);
    for (int i = 0; i < parts.count; ++i) {
      if (parts.part[i].kind == ActionKind::kBackwardInput)
        split_.insert({parts.part[i].stage, parts.part[i].microbatch});
    }
  }
  // With two copies of the model (DualPipe), the ranks holding copies of one
  // part exchange their gradients after each step (SumCopyGradients): they
  // are peers too, linked here in the same global order, or two such ranks
  // could each block in a different communicator's creation in that step.
  if (schedule.NumPipelines() > 1) {
    for (StageId s : schedule.StagesOf(rank)) {
      for (StageId t : schedule.CopiesOf(s)) {
        if (schedule.placement[t] != rank) peers.push_back(schedule.placement[t]);
      }
    }
  }
  peers.insert(peers.end(), options_.extra_peers.begin(), options_.extra_peers.end());
  transport_.Connect(peers, options_.comm_timeout);
}

StepResult Executor::RunStep(const std::vector<MicrobatchData>& microbatches, double loss_scale,
                             std::chrono::steady_clock::time_point origin) {
  const int M = schedule_.microbatches;
  auto recomputes = [&](StageId s) { return options_.recompute.count(s) > 0; };
  if (static_cast<int>(microbatches.size()) != M) {
    throw Error("executor: " + std::to_string(microbatches.size()) + " microbatches given, the schedule has " +
                std::to_string(M));
  }
  // The weights are fixed for the step (the optimizer runs after it), so the
  // first forward's bf16 cast of a weight serves every microbatch, and the
  // backwards share its graph node (the cast saves no tensor, so a backward
  // that frees its graph leaves it usable for the next). Ends with RunStep,
  // on this thread, which runs every action.
  std::optional<AutocastCacheScope> weight_casts;
  if (options_.share_weight_casts) weight_casts.emplace();
  // Event times are clock marks during the step, resolved to ns at its end.
  HostClock host_clock;
  StepClock& clock = options_.clock != nullptr ? *options_.clock : host_clock;
  clock.BeginStep(origin);
  auto now = [&]() -> TimeNs { return clock.Mark(); };
  const int step_begin = clock.Mark();
  std::map<std::pair<StageId, MicrobatchId>, StageSlot> slots;
  // Where a send is a view kept to the step's end (Gloo on the CPU), a
  // SEND_B sends a copy of the input gradients: under a split backward they
  // may share their buffer with what I keeps for W (autograd hands a summed
  // gradient's buffer on), which the cost model counts apart from the
  // message. Measured on the tiny model's zb-h1: with the copy the predicted
  // peak is exact (with a view it was 0.9-1.1 % over); it costs a copy of
  // each gradient message.
  const Transport::BufferRules rules = transport_.Buffers();
  const bool copy_sent_grads = rules.sends_view_tensors && !rules.sends_freed_after_delivery;
  // The losses this rank computes, left on the device until the step ends.
  std::map<MicrobatchId, at::Tensor> losses;
  // What the stages hold from earlier steps for their activations counts
  // as the step's own (the allocator may hold it outside its live bytes,
  // as CUDA graphs' pools do).
  Bytes memory_base = 0;
  if (options_.memory != nullptr) {
    memory_base = options_.memory->Live();
    for (const auto& [s, stage] : stages_) memory_base -= stage->HeldBytes();
    options_.memory->ResetPeak();
  }
  // Receives posted and not yet waited for: their event index, by tag.
  std::map<int64_t, size_t> posted;
  StepResult result;
  const Program& program = schedule_.programs[rank_];
  result.events.reserve(program.size());

  // Waits for the message a RECV posted; sets the RECV's end to the arrival.
  auto receive = [&](const Action& recv) -> TensorList {
    const int64_t tag = MessageTag(schedule_, recv);
    const RankId peer = schedule_.placement[PeerStage(recv)];
    const auto it = posted.find(tag);
    if (it == posted.end()) {
      throw Error("executor rank " + std::to_string(rank_) + ": " + FormatAction(recv) +
                  " is needed but was not posted");
    }
    TensorList data;
    try {
      data = transport_.WaitRecv(peer, tag, options_.comm_timeout);
    } catch (const Error& e) {
      throw Error("rank " + std::to_string(rank_) + " waiting on " + FormatAction(recv) + " from rank " +
                  std::to_string(peer) + ": " + e.what());
    }
    result.events[it->second].end = now();
    posted.erase(it);
    return data;
  };

  // Each receive is posted one compute action ahead of the one that needs
  // it: when the rank starts the last compute action before the RECV in its
  // program, or at the step's start when none comes before. The message can
  // land while that action runs, and its buffer exists from then on only.
  // (Posting all of a step's receives at its start kept a buffer for every
  // message of the step alive from the start: M activations or gradients
  // per channel, on a GPU too.) Receives are posted in program order, which
  // keeps each channel's order, as NCCL needs. Tags are unique within a step.
  std::map<long, std::vector<size_t>> posts_at;  // compute action's index (-1: the step's start) -> RECVs
  {
    long last_compute = -1;
    for (size_t i = 0; i < program.size(); ++i) {
      if (IsCompute(program[i].kind)) last_compute = static_cast<long>(i);
      if (IsRecv(program[i].kind)) posts_at[last_compute].push_back(i);
    }
  }
  std::map<size_t, TimeNs> post_marks;  // RECV's index -> when it was posted
  auto post_receives = [&](long at) {
    const auto it = posts_at.find(at);
    if (it == posts_at.end()) return;
    for (size_t i : it->second) {
      const Action& a = program[i];
      try {
        // The microbatch's rows and length, from its data (every rank has it).
        const MicrobatchData& data = microbatches[a.microbatch];
        const at::Tensor& shape_of = data.targets.defined() ? data.targets : data.inputs.at(0);
        const MessageSpec spec =
            stages_[a.stage]->ReceivedSpec(a.kind == ActionKind::kRecvF, shape_of.size(0), shape_of.size(1));
        transport_.PostRecv(schedule_.placement[PeerStage(a)], MessageTag(schedule_, a), spec);
      } catch (const Error& e) {
        throw Error("rank " + std::to_string(rank_) + " posting " + FormatAction(a) + ": " + e.what());
      }
      post_marks[i] = now();
    }
  };
  // The message an F (activations) or a B/I (output gradients) needs from
  // another rank, if it needs one.
  auto fetch = [&](const Action& part) -> std::optional<TensorList> {
    const StageId s = part.stage;
    const MicrobatchId m = part.microbatch;
    if (part.kind == ActionKind::kForward && s > schedule_.FirstStage(m) && schedule_.placement[s - 1] != rank_) {
      return receive({ActionKind::kRecvF, s, part.microbatch});
    }
    if (IsInputGrad(part.kind) && s < schedule_.LastStage(m) && schedule_.placement[s + 1] != rank_) {
      return receive({ActionKind::kRecvB, s, part.microbatch});
    }
    return std::nullopt;
  };
  // One F, B, I or W, as its own action or as a part of an OVERLAP_F_B (on
  // the CPU the two parts of an overlap run one after the other), with what
  // fetch() received for it.
  auto run_part = [&](const Action& part, std::optional<TensorList> received) {
    const StageId s = part.stage;
    const MicrobatchId m = part.microbatch;
    // Microbatch m enters at its pipeline's first stage and takes its loss
    // at the last (stages 0 and S-1 with one pipeline; DualPipe's second
    // copy of the model is a second pipeline).
    const bool first = s == schedule_.FirstStage(m), last = s == schedule_.LastStage(m);
    StageSlot& slot = slots[{s, m}];
    const LossFn* loss_fn = last ? &loss_ : nullptr;
    switch (part.kind) {
      case ActionKind::kForward: {
        TensorList inputs;
        if (received) {
          inputs = std::move(*received);
        } else if (first) {
          inputs = microbatches[m].inputs;
        } else if (recomputes(s - 1)) {
          // Outputs without a graph: stage s-1's B makes them again.
          inputs = std::move(slots[{s - 1, m}].outputs);
        } else {
          inputs = slots[{s - 1, m}].outputs;
        }
        if (split_.count({s, m}) > 0) slot.deferred = std::make_shared<DeferredWeightGrads>();
        std::optional<torch::NoGradGuard> no_graph;
        if (recomputes(s)) no_graph.emplace();
        at::Tensor loss = RunForwardAction(*stages_[s], slot, inputs, loss_fn, microbatches[m].targets, loss_scale);
        if (last) losses[m] = std::move(loss);
        return;
      }
      case ActionKind::kBackward:
      case ActionKind::kBackwardInput: {
        if (received) {
          slot.output_grads = std::move(*received);
        } else if (!last) {
          slot.output_grads = std::move(slots[{s + 1, m}].input_grads);
        } else {
          slot.output_grads = {};  // the loss: implicit gradient 1
        }
        if (recomputes(s)) {
          // The forward again, now with its graph, from the inputs F kept.
          const TensorList kept = std::move(slot.inputs);
          RunForwardAction(*stages_[s], slot, kept, loss_fn, microbatches[m].targets, loss_scale);
        }
        if (part.kind == ActionKind::kBackward) {
          RunBackwardAction(slot);
        } else {
          RunBackwardInputAction(slot);
        }
        return;
      }
      case ActionKind::kBackwardWeight:
        RunBackwardWeightAction(slot);
        return;
      default:
        throw Error("executor: " + FormatAction(part) + " is not a compute action");
    }
  };
  // Which action the host is inside, for the watch (when there is one); it
  // leaves once the step's actions are queued, or on an error.
  HostWatch* const watch = options_.host_watch;
  struct Leaving {
    HostWatch* watch;
    ~Leaving() {
      if (watch != nullptr) watch->Leave();
    }
  } leaving{watch};
  post_receives(-1);
  for (size_t index = 0; index < program.size(); ++index) {
    const Action& a = program[index];
    if (watch != nullptr) watch->Enter(a);
    TimelineEvent ev;
    ev.rank = rank_;
    ev.action = a;
    switch (a.kind) {
      case ActionKind::kRecvF:
      case ActionKind::kRecvB: {
        ev.start = ev.end = post_marks.at(index);  // the end becomes the arrival, in receive()
        posted[MessageTag(schedule_, a)] = result.events.size();
        result.events.push_back(ev);
        if (options_.memory != nullptr) result.live_after.push_back(std::nullopt);
        continue;
      }
      case ActionKind::kSendF:
      case ActionKind::kSendB: {
        const bool fwd = a.kind == ActionKind::kSendF;
        StageSlot& slot = slots[{a.stage, a.microbatch}];
        const RankId peer = schedule_.placement[PeerStage(a)];
        ev.start = now();
        try {
          transport_.Send(peer, MessageTag(schedule_, a),
                          fwd ? slot.outputs : (copy_sent_grads ? Clone(slot.input_grads) : slot.input_grads));
        } catch (const Error& e) {
          throw Error("rank " + std::to_string(rank_) + " on " + FormatAction(a) + " to rank " + std::to_string(peer) +
                      ": " + e.what());
        }
        ev.end = now();
        // Sent: nothing else on this rank needs them (a recomputing stage's
        // outputs carry no graph; its B makes them again).
        if (!fwd) slot.input_grads.clear();
        if (fwd && recomputes(a.stage)) slot.outputs.clear();
        break;
      }
      case ActionKind::kForward:
      case ActionKind::kBackward:
      case ActionKind::kBackwardInput:
      case ActionKind::kBackwardWeight:
      case ActionKind::kOverlapFB: {
        // The messages the parts need are waited for before the event
        // starts, so the event is the computation alone.
        post_receives(static_cast<long>(index));  // the messages of the actions after this one
        const ComputeParts parts = PartsOf(a);
        std::vector<std::optional<TensorList>> received;
        for (const Action& part : parts) received.push_back(fetch(part));
        ev.start = now();
        for (int i = 0; i < parts.count; ++i) run_part(parts.part[i], std::move(received[i]));
        ev.end = now();
        break;
      }
      case ActionKind::kReduceGrad:
        // The stage's gradients are complete here (the plan puts REDUCE_GRAD
        // after its last B or W); the hook starts their data-parallel sum,
        // which overlaps the rest of the step.
        ev.start = now();
        if (options_.on_reduce_grad) options_.on_reduce_grad(a.stage);
        ev.end = now();
        break;
      case ActionKind::kUnshard:
      case ActionKind::kReshard:
        throw Error("executor: " + FormatAction(a) + ": pplab has no FSDP yet, so it cannot run UNSHARD/RESHARD");
    }
    result.events.push_back(ev);
    if (options_.memory != nullptr) result.live_after.push_back(options_.memory->Live() - memory_base);
  }
  if (watch != nullptr) watch->Leave();
  try {
    transport_.WaitSends(options_.comm_timeout);
  } catch (const Error& e) {
    throw Error("rank " + std::to_string(rank_) + " at the end of the step: " + e.what());
  }
  at::Tensor all_losses;
  if (!losses.empty()) {
    std::vector<at::Tensor> values;
    for (const auto& [m, loss] : losses) values.push_back(loss.reshape({}).to(torch::kFloat64));
    all_losses = torch::stack(values);
    result.loss_sum = all_losses.sum();
  }
  if (options_.memory != nullptr) result.peak_activation_bytes = options_.memory->Peak() - memory_base;
  const int step_end = clock.Mark();
  // The first wait of the host for the device, bounded: nothing above reads
  // a GPU value.
  std::vector<TimeNs> marks;
  try {
    marks = clock.Resolve(options_.comm_timeout);
  } catch (const Error& e) {
    // Name where the device stopped: the first action (in program order)
    // whose end it has not reached; events still hold mark indices here.
    std::string where;
    const int pending = clock.FirstUnfinishedMark();
    if (pending >= 0) {
      for (const TimelineEvent& ev : result.events) {
        if (ev.end < pending) continue;
        where = "; the first action it has not finished is " + FormatAction(ev.action);
        break;
      }
    }
    throw Error("rank " + std::to_string(rank_) + " at the end of the step: " + e.what() + where);
  }
  if (all_losses.defined() && options_.microbatch_losses) {
    // One read for the whole step, bounded: on a GPU it waits for the last
    // stage's work, which may wait for a message (the evaluator's clock is
    // the host's, so nothing above has waited for the device).
    const at::Tensor host =
        HostCopy(all_losses, options_.comm_timeout, "rank " + std::to_string(rank_) + " reading the step's losses");
    size_t i = 0;
    for (const auto& [m, loss] : losses) result.losses[m] = host[static_cast<int64_t>(i++)].item<double>();
  }
  result.clock_span_ns = marks.at(step_end) - marks.at(step_begin);
  const std::vector<TimeNs> host = clock.HostMarks();
  if (host.size() == marks.size()) {
    result.host_span_ns = host[step_end] - host[step_begin];
    result.host_times.reserve(result.events.size());
    for (const TimelineEvent& ev : result.events) result.host_times.emplace_back(host[ev.start], host[ev.end]);
  }
  for (TimelineEvent& ev : result.events) {
    ev.start = marks.at(ev.start);
    ev.end = marks.at(ev.end);
  }
  return result;
}

void WarmUpStages(const Schedule& schedule, RankId rank, const std::map<StageId, Stage*>& stages,
                  const std::vector<MicrobatchData>& microbatches, const LossFn& loss) {
  if (microbatches.empty()) return;
  const MicrobatchData& any = microbatches.front();
  const at::Tensor& shape_of = any.targets.defined() ? any.targets : any.inputs.at(0);
  for (StageId s : schedule.StagesOf(rank)) {
    Stage& stage = *stages.at(s);
    std::optional<MicrobatchId> enters, leaves;  // a microbatch whose pipeline starts or ends here
    for (MicrobatchId m = 0; m < static_cast<MicrobatchId>(microbatches.size()); ++m) {
      if (!enters && schedule.FirstStage(m) == s) enters = m;
      if (!leaves && schedule.LastStage(m) == s) leaves = m;
    }
    TensorList inputs;
    if (enters) {
      inputs = microbatches[*enters].inputs;
    } else {
      const MessageSpec spec = stage.ReceivedSpec(true, shape_of.size(0), shape_of.size(1));
      if (spec.empty()) continue;
      const auto params = stage.NamedParameters();
      const at::Device device = params.empty() ? shape_of.device() : params.front().second.device();
      for (const TensorSpec& t : spec) {
        const auto options = at::TensorOptions().dtype(t.dtype).device(device);
        inputs.push_back(at::isFloatingType(t.dtype) ? at::zeros(t.shape, options) : at::ones(t.shape, options));
      }
    }
    StageSlot slot;
    const at::Tensor targets = leaves ? microbatches[*leaves].targets : at::Tensor();
    RunForwardAction(stage, slot, inputs, leaves ? &loss : nullptr, targets, 1.0);
    if (!leaves) {
      for (const at::Tensor& t : Floats(slot.outputs)) slot.output_grads.push_back(at::zeros_like(t));
    }
    RunBackwardAction(slot);
    torch::NoGradGuard no_grad;
    for (auto& [name, p] : stage.NamedParameters()) {
      if (p.grad().defined()) p.mutable_grad().zero_();
    }
  }
}

double MedianDeviceLagMs(const StepResult& result) {
  if (result.host_times.size() != result.events.size()) return 0;
  std::vector<TimeNs> lags;
  for (size_t i = 0; i < result.events.size(); ++i) {
    if (IsCompute(result.events[i].action.kind)) lags.push_back(result.events[i].start - result.host_times[i].first);
  }
  if (lags.empty()) return 0;
  std::sort(lags.begin(), lags.end());
  const size_t mid = lags.size() / 2;
  const double median = lags.size() % 2 == 1
                            ? static_cast<double>(lags[mid])
                            : (static_cast<double>(lags[mid - 1]) + static_cast<double>(lags[mid])) / 2;
  return median / 1e6;
}

}  // namespace pplab
