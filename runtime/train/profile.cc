#include "runtime/train/profile.h"

#include <torch/torch.h>

#include <algorithm>
#include <memory>

#include "runtime/comm/c10d_transport.h"
#include "runtime/comm/collectives.h"
#include "runtime/comm/wire_cast_transport.h"
#include "runtime/exec/autocast.h"
#include "runtime/exec/graphed_stage.h"
#include "runtime/exec/memory_meter.h"
#include "runtime/exec/step_clock.h"
#include "runtime/exec/weight_grads.h"
#include "runtime/train/flat_params.h"
#include "runtime/train/model_copies.h"
#include "runtime/train/profile_steps.h"
#include "runtime/train/profile_timing.h"
#include "runtime/train/profile_words.h"
#include "runtime/train/trainer.h"
#include "schedules/error.h"

namespace pplab {
namespace {

using namespace profile_detail;

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
  if (!options.graphed) {
    phase("F, I and W", [&] {
      in_turn([&] {
        AutocastCacheScope weight_casts;
        MeasureStages(stages, inputs, S, data, loss, loss_scale, meter, options, true, profiles, forward_ms,
                      forward_shares, clock);
      });
    });
  } else {
    // What each slot holds; F and B ran one microbatch at a time, so each
    // stage captured one slot of the shape.
    for (auto& [s, stage] : stages) {
      const auto* graphed = dynamic_cast<const GraphedStage*>(stage);
      if (graphed == nullptr) throw Error(who + ": stage " + std::to_string(s) + " is not graphed");
      const GraphStats stats = graphed->Stats();
      if (stats.slots < 1) throw Error(who + ": stage " + std::to_string(s) + " captured no graph");
      profiles[s].graph_slot_bytes = stats.slot_bytes / stats.slots;
    }
  }
  for (auto& [s, p] : profiles) {
    p.forward = SpreadOfSamples(forward_ms[s]);
    p.cpu_share[0] = Median(forward_shares[s]);
  }
  ActionOverhead overhead;
  if (options.overhead_microbatches > 0) {
    phase("executor overhead", [&] {
      in_turn([&] {
        if (stages.empty()) return;
        const StageId first = stages.begin()->first;
        const StageInput& in = inputs.at(first);
        overhead = MeasureActionOverhead(*stages.begin()->second, in.inputs, in.output_grads, first == S - 1, data,
                                         loss, loss_scale, options);
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
