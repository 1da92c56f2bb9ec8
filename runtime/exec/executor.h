// Executor: runs one rank's lowered program for one training step.
//
// F runs the stage on its input (data for stage 0, a received or local
// activation otherwise) and keeps what backward needs; on the last stage it
// also computes the microbatch's loss. B backpropagates the output gradient
// (from the next stage, or 1 for the loss) into the parameters' .grad and the
// input; I runs the backward chain for the input's gradient and leaves the
// weights' matrix products to W (runtime/exec/weight_grads.h). A stage listed in
// ExecutorOptions::recompute keeps only its inputs between F and B: its F
// runs without autograd, and its B (or I) runs the forward again first.
// Stage boundaries are cut with detach(), so each stage's autograd graph is
// its own. Each receive is posted one compute action ahead of the action
// that needs it (tags are unique within a step), with the dtypes and shapes
// the receiving stage declares (Stage::ReceivedSpec), so messages can land
// while the rank computes, and a message's buffer exists from one action
// before its use; a RECV's event spans from that post to the data's
// arrival. Every
// action is timed through a StepClock into a Timeline with the simulator's
// names.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include "runtime/comm/transport.h"
#include "runtime/exec/stage.h"
#include "runtime/exec/weight_grads.h"
#include "schedules/schedule.h"
#include "traces/timeline.h"

namespace pplab {

struct MicrobatchData {
  TensorList inputs;   // first-stage inputs, e.g. {tokens (B,T), attention_mask (B,T)}
  at::Tensor targets;  // what the loss compares the last stage's outputs with
};

// Loss of one microbatch as a scalar: the executor multiplies it by the
// step's loss scale, so that the M microbatch losses add up to the batch's.
using LossFn = std::function<at::Tensor(const TensorList& outputs, const at::Tensor& targets)>;

class MemoryMeter;
class StepClock;
class HostWatch;

struct ExecutorOptions {
  std::chrono::milliseconds comm_timeout{60000};
  // Called at each REDUCE_GRAD(stage) of the program (placed after the
  // stage's last B or W: its gradients are complete), e.g. to start the
  // data-parallel all-reduce of that stage while the rank goes on computing.
  std::function<void(StageId stage)> on_reduce_grad;
  // When set, each step reports the peak of the meter's live bytes over the
  // step minus its live bytes when the step began (StepResult).
  MemoryMeter* memory = nullptr;
  // Times the actions (runtime/exec/step_clock.h); the host clock when null.
  // On a GPU, a CUDA-event clock measures the work, not its launch.
  StepClock* clock = nullptr;
  // Whether StepResult::losses is filled. It costs one device-to-host copy
  // at the end of the step; a trainer that reduces loss_sum itself skips it,
  // so the step reads nothing back from the device.
  bool microbatch_losses = true;
  // Whether the step's forwards share autocast's bf16 casts of the weights
  // (an AutocastCacheScope over RunStep: each weight is cast once a step,
  // not once a microbatch). Sound because the weights do not change within
  // RunStep; the scope ends before it returns, so an update made after it
  // is seen by the next step. Without autocast it does nothing.
  bool share_weight_casts = true;
  // When set, told which action the host is inside (runtime/exec/host_watch.h):
  // on a GPU, where the host only queues work, a host that stays inside one
  // is blocked in a CUDA call, and the watch says where.
  HostWatch* host_watch = nullptr;
  // Stages whose activations are recomputed (activation checkpointing at
  // the granularity of a stage). Their F runs without autograd and keeps
  // only the stage's inputs (its outputs are dropped once sent or handed to
  // the next stage); their B or I first runs the forward again with
  // autograd on those inputs, then backpropagates as usual. That trades one
  // more forward per microbatch for the activations a microbatch would
  // otherwise hold from its F to its B. The stage's Forward must be a pure
  // function of its inputs and weights (no dropout, no state): the gradients
  // are then those of the run without recomputation, bit for bit.
  std::set<StageId> recompute{};
  // Ranks this rank exchanges with after each step besides its program's
  // peers (the other half of tied embeddings: TiedPeers), linked with them
  // when the executor is made.
  std::vector<RankId> extra_peers{};
};

struct StepResult {
  // Scaled loss of each microbatch this rank computed (last stage only; empty
  // elsewhere, and empty unless ExecutorOptions::microbatch_losses); their
  // sum is the step's loss.
  std::map<MicrobatchId, double> losses;
  // Their sum as a 0-dim float64 tensor on the stage's device, with no host
  // read; undefined when this rank computed no loss.
  at::Tensor loss_sum;
  std::vector<TimelineEvent> events;  // this rank's actions in program order
  // With ExecutorOptions::memory: the most bytes allocated during the step
  // and alive at once (weights, and gradients that existed before, excluded).
  Bytes peak_activation_bytes = 0;
  // With ExecutorOptions::memory, parallel to `events`: the bytes alive, as
  // peak_activation_bytes counts them, when each event ended (what the
  // simulator's "activation bytes" counter holds between actions; an
  // action's temporaries are gone by then; below 0 where the step freed
  // more than it made). None for a RECV, whose buffer arrives while other
  // work runs. Empty without a meter.
  std::vector<std::optional<Bytes>> live_after;
  // The whole step on the step clock: from before the first action to after
  // the last send left (on a GPU: CUDA events around the step's stream work).
  TimeNs clock_span_ns = 0;
  // The host's side of each event, parallel to `events`: when the host took
  // its start and end marks (StepClock::HostMarks), in ns since the step's
  // origin. The same as the events' times on the host clock; on a GPU, an
  // event's start minus its host start is how long the device trailed the
  // host there. Empty when the clock gives no host marks.
  std::vector<std::pair<TimeNs, TimeNs>> host_times;
  // The host's time from the step's first mark to its last: how long the
  // host took to issue the step (on a GPU, without waiting for it).
  TimeNs host_span_ns = 0;
};

// Runs each of `rank`'s stages once, F then B, on one microbatch and
// without any message: `microbatches`' data where the stage is a
// pipeline's first, zeros in the shapes the stage receives (ReceivedSpec;
// ones for integers, such as the mask) elsewhere, the loss where it is a
// pipeline's last, and zero output gradients otherwise. The weights do not
// change; every parameter's gradient is left zero. On a GPU this makes the
// kernels' first launches, the libraries' set-up (cuBLAS and cuDNN handles
// and workspaces, lazily opened libraries) and the allocator's first blocks
// happen before any receive is posted: a first launch that waits for the
// device to drain would otherwise wait for a posted receive that only a
// peer in the same state can complete (docs/gpu.md). A stage that declares
// no received shapes and is not a pipeline's first is skipped. Collectives
// inside the stages (tensor parallelism) run as in a step, in the same
// order on every rank of the group.
void WarmUpStages(const Schedule& schedule, RankId rank, const std::map<StageId, Stage*>& stages,
                  const std::vector<MicrobatchData>& microbatches, const LossFn& loss);

// The median, over the step's compute actions, of how long after the host
// issued an action the device started it (event start minus host start), in
// ms; 0 without compute actions or host times. Near 0 the device waits for
// the host to queue work (launch-bound); a large lag means the host runs
// ahead and the device is busy (or waits for a message).
double MedianDeviceLagMs(const StepResult& result);
// Whether a device lag of `lag_ms` against a median compute action of
// `action_ms` says the device waited for the host to launch its kernels:
// the lag is under kLaunchBoundShare of the action (pplab train's
// launch_bound, pplab profile's launch_bound_per_rank). A judgement: the
// H200's rows that waited for the host had lags of 0.000-0.257 ms against
// actions of milliseconds, the GPU-bound ones 107 ms and more.
constexpr double kLaunchBoundShare = 0.1;
inline bool LaunchBoundLag(double lag_ms, double action_ms) { return lag_ms < kLaunchBoundShare * action_ms; }

// What one (stage, microbatch) keeps between its actions.
struct StageSlot {
  TensorList inputs;        // stage inputs; floating ones are leaves requiring grad
  TensorList outputs;       // stage outputs as produced (on the last stage: {loss})
  TensorList output_grads;  // gradient of each floating output (for B, or kept from I for W)
  TensorList input_grads;   // gradient of each floating input, once B/I ran
  // Set before F when the backward is split: where the forward's matrix
  // products leave their weights' gradients, from I to W.
  std::shared_ptr<DeferredWeightGrads> deferred;
};

// The compute actions exactly as the executor runs them; the profiler
// (runtime/profile.h) times these same functions.
// F: `inputs` become the stage's leaves (floating ones detached, requiring
// grad), the stage runs, and on the last stage (`loss` given) the outputs
// become {loss(outputs, targets) * loss_scale}. Returns that loss, detached
// and still on the device (no host read), or an undefined tensor without.
at::Tensor RunForwardAction(Stage& stage, StageSlot& slot, const TensorList& inputs, const LossFn* loss,
                            const at::Tensor& targets, double loss_scale);
// B: backpropagates slot.output_grads (empty for the loss) into the
// parameters' .grad and slot.input_grads, and frees the graph.
void RunBackwardAction(StageSlot& slot);
// I: the backward into slot.input_grads and the parameters' .grad, with the
// weights' matrix products deferred to slot.deferred (which F set); frees
// the graph. Without slot.deferred the whole backward runs here.
void RunBackwardInputAction(StageSlot& slot);
// W: the products I deferred, into the parameters' .grad.
void RunBackwardWeightAction(StageSlot& slot);
// Fresh copies of the defined tensors (undefined ones stay undefined).
TensorList Clone(const TensorList& list);

class Executor {
 public:
  // `stages` maps each stage placed on `rank` to its module. `schedule` must
  // be lowered. Throws pplab::Error if a stage of this rank has no module.
  Executor(const Schedule& schedule, RankId rank, std::map<StageId, Stage*> stages, Transport& transport, LossFn loss,
           ExecutorOptions options = {});

  // Runs the rank's program once. `microbatches` holds all M microbatches
  // (the first and last stage use theirs); `loss_scale` multiplies each
  // microbatch loss. Gradients accumulate into the parameters' .grad.
  // Times are measured from `origin`. Throws pplab::Error naming the action
  // when a wait times out or a message is malformed.
  StepResult RunStep(const std::vector<MicrobatchData>& microbatches, double loss_scale,
                     std::chrono::steady_clock::time_point origin);

 private:
  const Schedule& schedule_;
  RankId rank_;
  std::map<StageId, Stage*> stages_;
  Transport& transport_;
  LossFn loss_;
  ExecutorOptions options_;
  // The (stage, microbatch) pairs whose backward the program splits into I
  // and W: their forwards defer the weights' products to W.
  std::set<std::pair<StageId, MicrobatchId>> split_;
};

// Message tag of `action` (a SEND or RECV): the same on both ends of one
// message and different for every message of a step.
int64_t MessageTag(const Schedule& schedule, const Action& action);

}  // namespace pplab
