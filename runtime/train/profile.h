// Profile: what each pipeline stage and link costs on this machine, measured
// with the executor's own compute functions while every rank measures at
// once (so the ranks contend for the cores as they do in training).
//
// Every rank of the group calls Profile() with its stages. Per stage it
// measures, for one microbatch, the times of F, B, I and W (medians of
// `repeats` after `warmup` unmeasured runs), the bytes an F leaves allocated
// until its backward (MemoryMeter, not an estimate), the bytes an I leaves
// until its W, and the bytes of the message the stage sends. Per pair of
// neighbouring ranks it measures the one-way time of messages through the
// transport (ping-pong) and fits latency + bytes / bandwidth. Each rank also
// runs the real Executor on a one-rank GPipe plan of its first stage to
// measure the time per action that the executor spends outside F/B. Last,
// each rank measures the work of a training step after its actions (the
// trainer's): the loss all-reduce, each stage's gradient all-reduce over its
// data-parallel replicas (REDUCE_GRAD, when there are replicas), the
// gradient-norm all-reduce, clipping and the AdamW step. Every time is
// reported as the median, p10 and p90 of its repeats (sim/percentiles.h).
// World rank 0 gathers everything.
#pragma once

#include <c10/core/Device.h>

#include <array>
#include <chrono>
#include <limits>
#include <map>
#include <optional>
#include <vector>

#include "runtime/comm/c10d_transport.h"
#include "runtime/exec/executor.h"
#include "runtime/train/profile_link.h"
#include "sim/percentiles.h"

namespace pplab {

struct ProcessGroupHandle;
class StepClock;
class MemoryMeter;

struct ProfileOptions {
  int warmup = 2;
  int repeats = 5;
  // Microbatches of the executor-overhead run (one-rank GPipe); 0 skips it.
  int overhead_microbatches = 4;
  // Payload sizes of the link ping-pong besides a one-byte message.
  std::vector<Bytes> link_payload_bytes = {16 << 20};
  std::chrono::milliseconds comm_timeout{60000};
  // Times every measured region (host clock when null; CUDA events on a
  // GPU, so F, B, I, W and the link are GPU time).
  StepClock* clock = nullptr;
  // Where the stages live; the link's messages are made there.
  c10::Device device{c10::kCPU};
  // Data parallelism: this pipeline rank's replicas (null without) and
  // their number D; `group` is then the world of D x K ranks.
  ProcessGroupHandle* dp_group = nullptr;
  int dp = 1;
  // Tensor parallelism: T ranks run each pipeline rank's stages together
  // (their F, B, I and W hold the group's collectives), world rank
  // (d K + k) T + t; the first replica's t = 0 ranks stand for the pipeline.
  int tp = 1;
  // What float32 activations and gradients travel as (the worker's
  // wire_dtype): the message bytes are counted in it.
  c10::ScalarType wire_dtype = c10::ScalarType::Float;
  // Ranks that share a device past its slots take turns to time their
  // actions (MeasureTurns): this rank times its F, B, I, W and executor
  // overhead in turn `turn` of `turns`, the others waiting at a barrier, so
  // the costs are those of a rank with its share of the device to itself.
  // One turn: all ranks at once, contending as in training.
  int turn = 0;
  int turns = 1;
  // The stages are graphed (runtime/exec/graphed_stage.h, `pplab profile
  // --cuda-graphs`): their F and B replay CUDA graphs, captured in the
  // forward through the pipeline, and each stage's graph_slot_bytes is
  // read off it. Graphed stages run whole backwards, so I and W are not
  // timed.
  bool graphed = false;
  // Tied embeddings: the parameter names on the first and the last stage
  // (TrainerOptions::tied_parameters); both empty when the model has none.
  // The profile then times their gradients' swap (SumTiedGradients).
  std::pair<std::string, std::string> tied_parameters;
};

struct StageProfile {
  StageId stage = 0;
  RankId rank = 0;
  // Median, p10 and p90 over the repeats, ms (F: over both phases' repeats).
  SampleSpread forward, backward, backward_input, backward_weight;
  // The stage's REDUCE_GRAD: its flattened gradients all-reduced over the
  // replicas, as the trainer does (all zero without replicas).
  SampleSpread reduce_grad;
  // Allocated during F (plus a received input, which the transport allocates)
  // and still alive after it, with the graph alive: held until B or I.
  Bytes activation_bytes = 0;
  // Allocated from the start of F and still alive after I, once the input
  // gradient is sent: what the deferred weight products keep until W, each
  // projection's input and output gradient (runtime/exec/weight_grads.h;
  // the stage's output gradient, which one of them keeps, not counted: the
  // cost model holds it as a message's).
  Bytes weight_grad_bytes = 0;
  // Wire bytes (WireBytes, in ProfileOptions::wire_dtype) of the stage's
  // forward message (its outputs; 0 on the last stage) and backward message
  // (its input gradient; 0 on stage 0).
  Bytes forward_message_bytes = 0, backward_message_bytes = 0;
  // Bytes of the floating-point outputs of F (on the last stage: the loss).
  Bytes output_bytes = 0;
  // Bytes of the stage's inputs as it holds them (every tensor: a received
  // activation after the transport's cast, and the mask beside it); 0 on
  // stage 0, whose inputs are the batch's tokens. What F keeps when the
  // stage is recomputed (sim/recompute.h).
  Bytes input_bytes = 0;
  // Transient memory the cost model does not hold: the peak of live bytes
  // during F above what F leaves allocated, and during B and during I above
  // what was live when it started (temporaries freed before the action
  // ends; an I also keeps its weight products' tensors while it frees the
  // activations), and during W above what was live when it started (its
  // products' outputs before they are added to the gradients).
  Bytes forward_transient_bytes = 0, backward_transient_bytes = 0, backward_input_transient_bytes = 0,
        backward_weight_transient_bytes = 0;
  // Bytes the transport's Send of the forward message added to what was
  // live (a copy of the outputs, as bf16 on the wire makes, or nothing when
  // it sends them as they are); unset when the next stage is on this rank.
  std::optional<Bytes> forward_send_bytes;
  // Whether the stage's input came from another rank (then activation_bytes
  // counts the stage's own copy of it), or from the previous stage on this
  // rank or the batch.
  bool input_received = false;
  // Bytes of the floating-point input gradients B makes (0 on stage 0).
  Bytes input_grad_bytes = 0;
  // On a CPU device, the share of its cores each of F, B, I and W keeps
  // busy (median over the repeats): the process's CPU time over the wall
  // time and the rank's compute threads, at most 1; below 1 where the
  // action waits (a tensor-parallel group's collectives: Gloo's waits sleep
  // and leave the cores to other processes). -1: not measured (a GPU).
  std::array<double, 4> cpu_share = {-1, -1, -1, -1};
  // A graphed stage's (ProfileOptions::graphed): what one slot holds, its
  // graphs' pool and static tensors (GraphStats::slot_bytes over its
  // slots); unset for an eager stage.
  std::optional<Bytes> graph_slot_bytes;
  // The bf16 weight casts autocast keeps from the stage's first forward of
  // a step to its end (CUDA autocast caches nn::Linear's weights; on the
  // CPU it caches none of a Llama stage's); 0 in fp32.
  Bytes cast_weight_bytes = 0;
};

// One rank's work of a step after its actions, ms: the all-reduces of the
// loss and of the gradient norm over the world (0 in a one-process run, which
// has no group: the norm is then its local sum of squares), clipping every
// gradient, and the AdamW step of the rank's parameters.
struct StepProfile {
  SampleSpread loss_allreduce, norm_allreduce, clip, optimizer;
  // The swap of tied embeddings' gradients between the first and the last
  // stage's ranks (zero without tied embeddings or on one rank).
  SampleSpread tied_exchange;
};

// One rank's executor-overhead run (a one-rank 1F1B of its first stage):
// medians over its timed steps.
struct ActionOverhead {
  double overhead_ms = 0;  // the executor's time per action outside F and B
  // How long after the host issued a compute action the device started it
  // (MedianDeviceLagMs); NaN on the host clock, which has no lag, and where
  // the run was skipped (ProfileOptions::overhead_microbatches 0).
  double device_lag_ms = std::numeric_limits<double>::quiet_NaN();
  double action_ms = 0;  // a compute action's time
};

struct ProfileResult {
  std::vector<StageProfile> stages;             // rank 0: every stage, by stage; elsewhere: this rank's
  std::vector<LinkProfile> links;               // rank 0: one per pair of neighbouring ranks
  std::vector<ActionOverhead> action_overhead;  // rank 0: per pipeline rank
  std::vector<StepProfile> step;                // rank 0: per world rank; elsewhere: this rank's
  Transport::BufferRules buffers;               // how the transport holds message buffers
};

// Profiles pipeline rank `rank`'s `stages` (placement[s] = rank of stage s).
// `data` is one microbatch: stage 0's inputs and the last stage's targets;
// the other stages get their inputs from one forward pass through the
// pipeline. `group` is null for a single rank; with replicas or
// tensor-parallel ranks it is the world, and stages, links and overhead come
// from the first replica's first tensor-parallel rank. Throws
// pplab::Error naming the rank and phase when a peer fails or times out.
ProfileResult Profile(const std::vector<RankId>& placement, RankId rank, const std::map<StageId, Stage*>& stages,
                      const MicrobatchData& data, const LossFn& loss, double loss_scale, Transport& transport,
                      ProcessGroupHandle* group, MemoryMeter& meter, const ProfileOptions& options);

}  // namespace pplab
