#include "runtime/train/profile.h"

#include <torch/torch.h>

#include <algorithm>
#include <memory>

#include "runtime/comm/c10d_transport.h"
#include "runtime/comm/collectives.h"
#include "runtime/comm/device_wait.h"
#include "runtime/comm/fake_transport.h"
#include "runtime/comm/wire_cast_transport.h"
#include "runtime/exec/autocast.h"
#include "runtime/exec/memory_meter.h"
#include "runtime/exec/step_clock.h"
#include "runtime/exec/weight_grads.h"
#include "runtime/train/adamw.h"
#include "runtime/train/flat_params.h"
#include "runtime/train/model_copies.h"
#include "runtime/train/profile_words.h"
#include "runtime/train/step_work.h"
#include "runtime/train/trainer.h"
#include "schedules/error.h"
#include "schedules/generators.h"
#include "schedules/lowering.h"

namespace pplab {
namespace {

using Clock = std::chrono::steady_clock;

// The time `body` takes on `clock`: the host clock on the CPU; CUDA events
// on a GPU, so the time is the GPU's work, not its launch.
template <typename F>
double TimeMs(StepClock& clock, std::chrono::milliseconds timeout, F body) {
  clock.BeginStep(Clock::now());
  const int begin = clock.Mark();
  body();
  const int end = clock.Mark();
  const std::vector<TimeNs> marks = clock.Resolve(timeout);
  return NsToMs(marks[end] - marks[begin]);
}

// The CPU time of every thread of this process so far, ms.
double ProcessCpuMs() {
  timespec t{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) / 1e6;
}

// One timed action's time, ms, and on a CPU device the share of the rank's
// cores it kept busy (StageProfile::cpu_share).
struct Timed {
  double ms = 0;
  double cpu_share = -1;
};
template <typename F>
Timed TimeAction(StepClock& clock, const ProfileOptions& options, F body) {
  const double cpu_before = ProcessCpuMs();
  Timed t;
  t.ms = TimeMs(clock, options.comm_timeout, body);
  if (options.device.is_cpu() && t.ms > 0) {
    const double cores = std::max(1, at::get_num_threads());
    t.cpu_share = std::min(1.0, (ProcessCpuMs() - cpu_before) / (t.ms * cores));
  }
  return t;
}

double Median(std::vector<double> xs) {
  if (xs.empty()) return 0;
  std::sort(xs.begin(), xs.end());
  const size_t n = xs.size();
  return n % 2 == 1 ? xs[n / 2] : (xs[n / 2 - 1] + xs[n / 2]) / 2;
}

Bytes MedianBytes(const std::vector<Bytes>& xs) {
  std::vector<double> d(xs.begin(), xs.end());
  return static_cast<Bytes>(Median(d));
}

Bytes FloatBytes(const TensorList& list) {
  Bytes total = 0;
  for (const at::Tensor& t : list) {
    if (t.defined() && at::isFloatingType(t.scalar_type())) total += t.numel() * t.element_size();
  }
  return total;
}

Bytes AllBytes(const TensorList& list) {
  Bytes total = 0;
  for (const at::Tensor& t : list) {
    if (t.defined()) total += t.numel() * t.element_size();
  }
  return total;
}

// Every rank together, before a collective is timed: ranks leave within
// the poll's spin of each other, so the collective's time is its own.
void Sync(ProcessGroupHandle* group, std::chrono::milliseconds timeout) {
  if (group != nullptr) Barrier(*group, timeout);
}

// Every rank together, before one rank (or pair) times its work while the
// others wait: through the store, so that no waiting rank's barrier kernel
// spins on a GPU the ranks share (an NCCL barrier would, and the timed
// rank's kernels would share the GPU with it).
void Turn(ProcessGroupHandle* group, std::chrono::milliseconds timeout) {
  if (group != nullptr) HostBarrier(*group, timeout);
}

// What the measuring phases need of one stage: its input (as the forward
// pass through the pipeline produced it) and a gradient for its outputs.
struct StageInput {
  TensorList inputs;
  bool received = false;    // from another rank: the transport allocates it afresh each time
  TensorList output_grads;  // empty on the last stage (the loss)
  bool grads_received = false;
};

// One forward and backward pass through the whole pipeline, stage after
// stage, with real messages: every stage gets a real input, and the sizes of
// the messages are those of training.
std::map<StageId, StageInput> ForwardThroughPipeline(const std::vector<RankId>& placement, RankId rank,
                                                     const std::map<StageId, Stage*>& stages,
                                                     const MicrobatchData& data, const LossFn& loss, double loss_scale,
                                                     Transport& transport, MemoryMeter& meter,
                                                     const ProfileOptions& options,
                                                     std::map<StageId, StageProfile>& profiles) {
  const std::chrono::milliseconds timeout = options.comm_timeout;
  const int S = static_cast<int>(placement.size());
  std::map<StageId, StageInput> result;
  std::map<StageId, TensorList> outputs;
  for (StageId s = 0; s < S; ++s) {
    if (placement[s] != rank) continue;
    StageInput& in = result[s];
    if (s == 0) {
      in.inputs = data.inputs;
    } else if (placement[s - 1] == rank) {
      in.inputs = outputs[s - 1];
    } else {
      const at::Tensor& rows = data.targets.defined() ? data.targets : data.inputs.at(0);
      transport.PostRecv(placement[s - 1], s, stages.at(s)->ReceivedSpec(true, rows.size(0), rows.size(1)));
      in.inputs = transport.WaitRecv(placement[s - 1], s, timeout);
      in.received = true;
    }
    StageSlot slot;
    RunForwardAction(*stages.at(s), slot, in.inputs, s == S - 1 ? &loss : nullptr, data.targets, loss_scale);
    StageProfile& p = profiles[s];
    p.output_bytes = FloatBytes(slot.outputs);
    // Stage 0's inputs are the batch's tokens, which the batch holds anyway.
    p.input_bytes = s == 0 ? 0 : AllBytes(in.inputs);
    if (s < S - 1) {
      outputs[s] = slot.outputs;
      p.forward_message_bytes = WireBytes(ToWire(slot.outputs, options.wire_dtype));
      for (const at::Tensor& t : slot.outputs) {
        if (t.defined() && at::isFloatingType(t.scalar_type())) in.output_grads.push_back(torch::randn_like(t) * 1e-3);
      }
      in.grads_received = placement[s + 1] != rank;
      if (in.grads_received) {
        // What the transport holds beyond the outputs, which F keeps until
        // B. The earlier sends go first: a Send may free those delivered.
        transport.WaitSends(timeout);
        const Bytes before_send = meter.Live();
        transport.Send(placement[s + 1], s + 1, slot.outputs);
        p.forward_send_bytes = std::max<Bytes>(0, meter.Live() - before_send);
      }
    }
    slot.output_grads = in.output_grads;
    RunBackwardAction(slot);
    if (s > 0) {
      p.backward_message_bytes = WireBytes(ToWire(slot.input_grads, options.wire_dtype));
      p.input_grad_bytes = FloatBytes(slot.input_grads);
    }
  }
  transport.WaitSends(timeout);
  return result;
}

// F then B, or F then I then W, on every stage of this rank, repeated.
void MeasureStages(const std::map<StageId, Stage*>& stages, std::map<StageId, StageInput>& inputs, int S,
                   const MicrobatchData& data, const LossFn& loss, double loss_scale, MemoryMeter& meter,
                   const ProfileOptions& options, bool split, std::map<StageId, StageProfile>& profiles,
                   std::map<StageId, std::vector<double>>& forward_ms,
                   std::map<StageId, std::vector<double>>& forward_shares, StepClock& clock) {
  std::map<StageId, std::vector<double>> b_ms, w_ms;
  // Each kind's CPU shares (F, B or I, W), measured runs only.
  std::map<StageId, std::array<std::vector<double>, 3>> shares;
  std::map<StageId, std::vector<Bytes>> held, f_transient, b_transient, w_transient;
  for (int i = 0; i < options.warmup + options.repeats; ++i) {
    const bool measured = i >= options.warmup;
    for (auto& [s, stage] : stages) {
      const Bytes stage_start = meter.Live();
      {
        StageInput& in = inputs.at(s);
        StageSlot slot;
        if (split) slot.deferred = std::make_shared<DeferredWeightGrads>();  // as the executor sets it
        // The output gradient exists before `before`: what B or I uses of a
        // message the cost model counts as the message's (MessageMemory),
        // not as what F or I holds.
        const TensorList output_grads = in.grads_received ? Clone(in.output_grads) : in.output_grads;
        const Bytes before = meter.Live();
        TensorList x = in.received ? Clone(in.inputs) : in.inputs;
        meter.ResetPeak();
        const Timed f = TimeAction(clock, options, [&] {
          RunForwardAction(*stage, slot, x, s == S - 1 ? &loss : nullptr, data.targets, loss_scale);
        });
        const Bytes activation = meter.Live() - before;
        // From here the slot holds the input alone, as in the executor, where
        // B or I frees a received input with the slot.
        x.clear();
        const Bytes forward_transient = meter.Peak() - meter.Live();
        slot.output_grads = output_grads;
        const Bytes before_backward = meter.Live();
        meter.ResetPeak();
        if (!split) {
          const Timed b = TimeAction(clock, options, [&] { RunBackwardAction(slot); });
          b_ms[s].push_back(b.ms);
          if (measured) shares[s][1].push_back(b.cpu_share);
          slot.input_grads.clear();
          if (measured) {
            held[s].push_back(activation);
            f_transient[s].push_back(forward_transient);
            b_transient[s].push_back(meter.Peak() - before_backward);
          }
        } else {
          const Timed i = TimeAction(clock, options, [&] { RunBackwardInputAction(slot); });
          b_ms[s].push_back(i.ms);
          if (measured) shares[s][1].push_back(i.cpu_share);
          slot.input_grads.clear();  // sent to the previous stage
          if (measured) {
            held[s].push_back(meter.Live() - before);
            b_transient[s].push_back(meter.Peak() - before_backward);
          }
          const Bytes before_weight = meter.Live();
          meter.ResetPeak();
          const Timed w = TimeAction(clock, options, [&] { RunBackwardWeightAction(slot); });
          if (measured) w_transient[s].push_back(meter.Peak() - before_weight);
          w_ms[s].push_back(w.ms);
          if (measured) shares[s][2].push_back(w.cpu_share);
        }
        if (measured) {
          forward_ms[s].push_back(f.ms);
          forward_shares[s].push_back(f.cpu_share);
        }
      }
      // What the phase's first F and B left allocated, all else freed: the
      // weight casts autocast keeps for the rest of the phase, as for the
      // rest of a training step (0 where it caches none).
      if (i == 0 && !split) profiles[s].cast_weight_bytes = std::max<Bytes>(0, meter.Live() - stage_start);
    }
  }
  for (auto& [s, stage] : stages) {
    StageProfile& p = profiles[s];
    // Without warm-up the first measured F made the phase's weight casts,
    // which its sample then holds: they are cast_weight_bytes' alone.
    if (options.warmup == 0 && !held[s].empty()) held[s][0] = std::max<Bytes>(0, held[s][0] - p.cast_weight_bytes);
    auto tail = [&](const std::vector<double>& xs) {
      return SpreadOfSamples(std::vector<double>(xs.begin() + options.warmup, xs.end()));
    };
    if (!split) {
      p.cpu_share[1] = Median(shares[s][1]);
      p.backward = tail(b_ms[s]);
      p.activation_bytes = MedianBytes(held[s]);
      p.forward_transient_bytes = MedianBytes(f_transient[s]);
      p.backward_transient_bytes = MedianBytes(b_transient[s]);
    } else {
      p.cpu_share[2] = Median(shares[s][1]);
      p.cpu_share[3] = Median(shares[s][2]);
      p.backward_input = tail(b_ms[s]);
      p.backward_weight = tail(w_ms[s]);
      p.weight_grad_bytes = MedianBytes(held[s]);
      p.backward_input_transient_bytes = MedianBytes(b_transient[s]);
      p.backward_weight_transient_bytes = MedianBytes(w_transient[s]);
    }
  }
}

// The executor's own time per action outside F and B: the real Executor runs
// a one-rank 1F1B plan of this rank's first stage (its loss, when it is not
// the last stage, is the dot product with the output gradient, so B does the
// same work as in training). 1F1B on one rank holds one microbatch's
// activations at a time: a 64 x 512 microbatch of the default preset holds
// about 36 GB, so four at once (GPipe) would not fit an 80 GB GPU.
double MeasureActionOverhead(Stage& stage, const StageInput& in, bool last, const MicrobatchData& data,
                             const LossFn& loss, double loss_scale, const ProfileOptions& options) {
  const int M = options.overhead_microbatches;
  const Schedule schedule = Lower(Generate("1f1b", {1, M, 1}));
  const TensorList grads = in.output_grads;
  LossFn surrogate = [grads](const TensorList& outputs, const at::Tensor&) {
    at::Tensor sum = torch::zeros({}, outputs.at(0).options().dtype(torch::kFloat32));
    size_t g = 0;
    for (const at::Tensor& t : outputs) {
      if (t.defined() && at::isFloatingType(t.scalar_type())) sum = sum + (t * grads.at(g++)).sum();
    }
    return sum;
  };
  FakeTransport transport(0, std::make_shared<FakeNetwork>());
  ExecutorOptions exec_options;
  exec_options.comm_timeout = options.comm_timeout;
  exec_options.clock = options.clock;
  Executor executor(schedule, 0, {{0, &stage}}, transport, last ? loss : surrogate, exec_options);
  std::vector<MicrobatchData> microbatches(M, MicrobatchData{in.inputs, data.targets});
  std::vector<double> per_action;
  for (int i = 0; i < 1 + options.repeats; ++i) {
    // The step's span and its actions' times on one clock: on a GPU both are
    // CUDA events, so the overhead is the time the GPU waited for the host.
    const StepResult r = executor.RunStep(microbatches, last ? loss_scale : 1.0, Clock::now());
    const double wall = NsToMs(r.clock_span_ns);
    double busy = 0;
    int actions = 0;
    for (const TimelineEvent& e : r.events) {
      if (!IsCompute(e.action.kind)) continue;
      busy += NsToMs(e.end - e.start);
      ++actions;
    }
    if (i >= 1 && actions > 0) per_action.push_back(std::max(0.0, wall - busy) / actions);
  }
  for (auto& [name, p] : stage.NamedParameters()) {
    if (p.grad().defined()) p.mutable_grad().zero_();
  }
  return Median(per_action);
}

// Ping-pong between `a` (which times) and `b`; every other rank returns at once.
void PingPong(RankId rank, RankId a, RankId b, Transport& transport, const ProfileOptions& options, int64_t& tag,
              LinkProfile& link, StepClock& clock, const c10::Device& device) {
  std::vector<Bytes> sizes = {1};
  sizes.insert(sizes.end(), options.link_payload_bytes.begin(), options.link_payload_bytes.end());
  link.from = a;
  link.to = b;
  for (const Bytes size : sizes) {
    const int64_t n = std::max<Bytes>(size, 1);
    const TensorList message = {torch::zeros({n}, torch::TensorOptions(torch::kUInt8).device(device))};
    const MessageSpec spec = {{c10::ScalarType::Byte, {n}}};
    std::vector<double> one_way;
    for (int i = 0; i < options.warmup + options.repeats; ++i, tag += 2) {
      if (rank == a) {
        transport.PostRecv(b, tag + 1, spec);
        const double round_trip = TimeMs(clock, options.comm_timeout, [&] {
          transport.Send(b, tag, message);
          transport.WaitRecv(b, tag + 1, options.comm_timeout);
        });
        if (i >= options.warmup) one_way.push_back(round_trip / 2);
      } else if (rank == b) {
        transport.PostRecv(a, tag, spec);
        transport.WaitRecv(a, tag, options.comm_timeout);
        transport.Send(a, tag + 1, message);
      }
      transport.WaitSends(options.comm_timeout);
    }
    if (rank == a) link.samples.push_back({WireBytes(message), Median(one_way)});
  }
  if (rank == a) FitLink(link);
}

// `warmup + repeats` runs of `body`, each after a barrier so that every rank
// starts it together (a collective's time is then its own, not the wait for
// a late peer); the spread of the timed runs.
template <typename F>
SampleSpread Repeat(StepClock& clock, ProcessGroupHandle* group, const ProfileOptions& options, F body) {
  std::vector<double> ms;
  for (int i = 0; i < options.warmup + options.repeats; ++i) {
    Sync(group, options.comm_timeout);
    const double t = TimeMs(clock, options.comm_timeout, body);
    if (i >= options.warmup) ms.push_back(t);
  }
  return SpreadOfSamples(ms);
}

// The work of a training step after the executor's actions, as the trainer
// does it (runtime/train/trainer.cc, with runtime/train/step_work.h): the
// step's one all-reduce and host read (loss, busy time and squared norm,
// three doubles), each stage's REDUCE_GRAD with replicas (StageBucket), the
// squared gradient norm (GradSquares), clipping (ScaleGradients) and the
// AdamW step. The gradients are those the F/B phases left.
StepProfile MeasureStepWork(const std::map<StageId, Stage*>& stages, const std::map<StageId, FlatBuffer>& flats,
                            ProcessGroupHandle* group, const ProfileOptions& options, StepClock& clock,
                            std::map<StageId, StageProfile>& profiles) {
  std::vector<at::Tensor> grads;
  std::vector<std::pair<std::string, at::Tensor>> named;
  std::vector<FlatBuffer> buffers;
  for (auto& [s, stage] : stages) {
    for (const at::Tensor& g : GradientsOf(flats.at(s), stage->NamedParameters())) grads.push_back(g);
    for (auto& [name, p] : stage->NamedParameters()) named.emplace_back(name, p);
    buffers.push_back(flats.at(s));
  }
  StepProfile step;
  if (group != nullptr) {
    step.loss_allreduce = Repeat(clock, group, options, [&] {
      // Made on the group's device, as the trainer stacks its sums there (a
      // host tensor's copy would add a synchronisation the step does not have).
      at::Tensor sums = torch::full({3}, 1.0, torch::TensorOptions(torch::kFloat64).device(GroupDevice(*group)));
      AllReduceSumInPlace(*group, sums, options.comm_timeout);
      (void)HostCopy(sums, options.comm_timeout, "the loss all-reduce")[0].item<double>();
    });
  }
  if (options.dp_group != nullptr && options.dp > 1) {
    for (auto& [s, stage] : stages) {
      // Every rank takes part in each barrier of Repeat, so a stage without
      // gradients (its replicas have none either) still takes its turns.
      const std::vector<at::Tensor> stage_grads = GradientsOf(flats.at(s), stage->NamedParameters());
      profiles[s].reduce_grad = Repeat(
          clock, group, options, [&] { StageBucket(stage_grads, *options.dp_group).Finish(options.comm_timeout); });
    }
  }
  // The norm's squares; their sum rides on the loss's all-reduce above, and
  // their read on its host read, so they are timed (by the step clock: CUDA
  // events on a GPU) without a read of their own.
  step.norm_allreduce = Repeat(clock, group, options, [&] { (void)GradSquares(grads); });
  step.clip = Repeat(clock, group, options, [&] { ScaleGradients(grads, 1.0); });
  AdamW optimizer(named, AdamWConfig{}, buffers);
  step.optimizer = Repeat(clock, group, options, [&] { optimizer.Step(1e-6); });
  return step;
}

}  // namespace

ProfileResult Profile(const std::vector<RankId>& placement, RankId rank, const std::map<StageId, Stage*>& stages,
                      const MicrobatchData& data, const LossFn& loss, double loss_scale, Transport& transport,
                      ProcessGroupHandle* group, MemoryMeter& meter, const ProfileOptions& options) {
  const int S = static_cast<int>(placement.size());
  const int K = S == 0 ? 0 : *std::max_element(placement.begin(), placement.end()) + 1;
  if (options.repeats < 1 || options.warmup < 0) throw Error("profile: repeats must be >= 1 and warm-up >= 0");
  const std::string who = "profile rank " + std::to_string(rank);
  HostClock host_clock;
  StepClock& clock = options.clock != nullptr ? *options.clock : host_clock;
  auto phase = [&](const char* name, auto run) {
    try {
      run();
    } catch (const Error& e) {
      throw Error(who + ", " + name + ": " + e.what());
    }
  };
  std::map<StageId, StageProfile> profiles;
  // The parameters and gradients in flat buffers, as a training step has
  // them (Train), so that B and the step's work are timed as they run there.
  std::map<StageId, FlatBuffer> flats;
  for (auto& [s, stage] : stages) {
    profiles[s].stage = s;
    profiles[s].rank = rank;
    flats[s] = FlattenParameters(stage->NamedParameters());
  }
  std::map<StageId, StageInput> inputs;
  phase("linking to the peers", [&] { transport.Connect(ProfilePeers(placement, rank), options.comm_timeout); });
  phase("forward through the pipeline", [&] {
    inputs =
        ForwardThroughPipeline(placement, rank, stages, data, loss, loss_scale, transport, meter, options, profiles);
  });
  for (const auto& [s, in] : inputs) profiles[s].input_received = in.received;
  if (options.turns < 1 || options.turn < 0 || options.turn >= options.turns) {
    throw Error(who + ": turn " + std::to_string(options.turn) + " of " + std::to_string(options.turns));
  }
  // `time` in this rank's turn; every rank passes every turn's barrier.
  auto in_turn = [&](auto time) {
    for (int t = 0; t < options.turns; ++t) {
      Turn(group, options.comm_timeout);
      if (t == options.turn) time();
    }
  };
  // The weights do not change while F, B, I and W are timed, so in bf16
  // each phase casts them once (its first, unmeasured run), as a training
  // step casts them once for all its microbatches (Executor::RunStep).
  std::map<StageId, std::vector<double>> forward_ms, forward_shares;
  phase("F and B", [&] {
    in_turn([&] {
      AutocastCacheScope weight_casts;
      MeasureStages(stages, inputs, S, data, loss, loss_scale, meter, options, false, profiles, forward_ms,
                    forward_shares, clock);
    });
  });
  phase("F, I and W", [&] {
    in_turn([&] {
      AutocastCacheScope weight_casts;
      MeasureStages(stages, inputs, S, data, loss, loss_scale, meter, options, true, profiles, forward_ms,
                    forward_shares, clock);
    });
  });
  for (auto& [s, p] : profiles) {
    p.forward = SpreadOfSamples(forward_ms[s]);
    p.cpu_share[0] = Median(forward_shares[s]);
  }
  double overhead = 0;
  if (options.overhead_microbatches > 0) {
    phase("executor overhead", [&] {
      in_turn([&] {
        if (stages.empty()) return;
        const StageId first = stages.begin()->first;
        overhead = MeasureActionOverhead(*stages.begin()->second, inputs.at(first), first == S - 1, data, loss,
                                         loss_scale, options);
      });
    });
  }
  // Neighbouring pairs, one at a time (the others wait at the barrier).
  std::vector<LinkProfile> links;
  int64_t tag = 0;
  for (RankId a = 0; a < K && K > 1; ++a) {
    const RankId b = (a + 1) % K;
    if (K == 2 && a == 1) break;  // the same pair again
    LinkProfile link;
    phase("link ping-pong", [&] {
      Turn(group, options.comm_timeout);
      PingPong(rank, a, b, transport, options, tag, link, clock, options.device);
    });
    if (rank == a) links.push_back(link);
  }
  StepProfile step;
  phase("per-step work", [&] { step = MeasureStepWork(stages, flats, group, options, clock, profiles); });
  if (!options.tied_parameters.first.empty() && K > 1) {
    // The trainer's swap of the tied embeddings' halves, last, as it leaves
    // their gradients summed (the other step work is timed by then).
    Schedule ends;
    ends.name = "profile";
    ends.ranks = K;
    ends.stages = S;
    ends.microbatches = 1;
    ends.placement = placement;
    phase("tied embeddings' swap", [&] {
      step.tied_exchange = Repeat(clock, group, options, [&] {
        SumTiedGradients(ends, rank, stages, transport, options.comm_timeout, options.tied_parameters.first,
                         options.tied_parameters.second);
      });
    });
  }
  // Gather on rank 0: stages, links and overhead per rank.
  const std::vector<int64_t> mine = PackRankProfile(profiles, links, overhead, step);
  std::vector<std::vector<int64_t>> all;
  phase("gathering the results", [&] {
    if (group != nullptr) {
      all = GatherToRank0(*group, mine, options.comm_timeout);
      // No rank leaves (and tears its communicators down) while a peer may
      // still need its bytes of the gather (trainer.cc, the end of Train).
      HostBarrier(*group, options.comm_timeout);
    } else {
      all.push_back(mine);
    }
  });
  ProfileResult result;
  result.buffers = transport.Buffers();
  const RankId world_rank = group != nullptr ? GroupRank(*group) : 0;
  if (world_rank != 0) {
    for (const auto& [s, p] : profiles) result.stages.push_back(p);
    result.step.push_back(step);
    return result;
  }
  std::map<StageId, StageProfile> every;
  const int T = std::max(1, options.tp);
  for (size_t from = 0; from < all.size(); ++from) {
    // World ranks k T (k < K) are the first replica's pipeline, which stands
    // for all; the step work counts on every rank.
    const int w = static_cast<int>(from);
    UnpackRankProfile(all[from], w < K * T && w % T == 0, every, result);
  }
  if (static_cast<int>(every.size()) != S)
    throw Error(who + ": gathered " + std::to_string(every.size()) + " stage profiles, the partition has " +
                std::to_string(S));
  for (const auto& [s, p] : every) result.stages.push_back(p);
  return result;
}

}  // namespace pplab
