// Trainer: runs training steps of one pipeline rank with the executor,
// an AdamW step after each, and reports losses, step times and the measured
// timeline of the last step. It knows no model: stages, batches and the loss
// come in as functions.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <set>
#include <vector>

#include "runtime/exec/executor.h"
#include "traces/timeline.h"

namespace pplab {

struct ProcessGroupHandle;
class MemoryMeter;
class StepClock;

struct StepBatch {
  std::vector<MicrobatchData> microbatches;  // all M of them
  double loss_scale = 1;                     // multiplies each microbatch loss (1 / tokens in the batch)
  double learned_tokens = 0;                 // targets the loss counts, over all replicas (0: loss_scale is 1)
};

// What one step did, as every rank sees it after the step.
struct StepReport {
  int step = 0;          // 0-based index of the step just done
  double loss = 0;       // the batch loss
  double lr = 0;         // the learning rate used
  double grad_norm = 0;  // global gradient norm before clipping
  double step_ms = 0;    // wall time of the step on this rank
  // 1 - (sum of all ranks' compute time) / (sum over the replicas of K x
  // the span of their pipeline rank 0, which computes first and last in
  // every plan pplab generates): the measured bubble, the same on every rank.
  // (Against each rank's own span, with --dp 2 a faster replica's rank saw
  // the slower one's time and reported a negative bubble.)
  double bubble = 0;
  double val_loss = -1;  // the validation loss after this step, or -1
};

struct TrainerOptions {
  int steps = 1;
  // A testing aid: at this step (from 1) rank 0's gradients become NaN
  // after the backward, the loss left finite. 0: never.
  int nan_gradient_at = 0;
  double lr = 1e-3;
  int warmup_steps = 0;  // linear warm-up, then cosine decay to 0 over the remaining steps
  // Clip gradients to this global L2 norm, over all stages and ranks; 0 = off.
  double clip_norm = 0;
  // Each stage's parameters and gradients in flat buffers
  // (runtime/train/flat_params.h); false keeps them apart (the reference the
  // tests hold the buffers to).
  bool flat_parameters = true;
  // Before the first step, run each stage once, F then B, with no message
  // (WarmUpStages, runtime/exec/executor.h); the weights do not change.
  // pplab train turns it on for CUDA devices (--warm-up auto).
  bool warm_up = false;
  // Data parallelism: the group of this stage's replicas (null without), and
  // their number. Each replica runs the same plan on its own shard; after the
  // step each stage's gradients are summed over its replicas.
  ProcessGroupHandle* dp_group = nullptr;
  int dp_size = 1;
  // Tensor parallelism (models/tensor_parallel.h): the group of the ranks
  // holding the other shares of this rank's stages (null without), its
  // size and this rank's place in it, and for each parameter name the
  // dimension its share is cut along (-1: held whole) and whether its
  // gradient is a partial sum (added over the group after the backward).
  // The loss, the compute time and the whole parameters' squared gradients
  // count once per group (its rank 0's); checkpoints hold whole tensors,
  // gathered when written and cut when loaded, so they load into any T.
  // World ranks are numbered as runtime/train/worker_setup.h says: the
  // first pipeline's rank k is world rank k T.
  ProcessGroupHandle* tp_group = nullptr;
  int tp_size = 1;
  int tp_rank = 0;
  std::function<int(const std::string&)> tp_split_dim;
  std::function<bool(const std::string&)> tp_partial_gradient;
  // The sharded optimizer (ZeRO-1, runtime/train/adamw.h): with replicas,
  // each keeps and updates 1 / dp_size of the AdamW moments, and the
  // replicas then put the updated parameters together. Needs flat buffers.
  bool shard_optimizer = false;
  // Tied weights: (the name on each pipeline's first stage, the name on its
  // last), e.g. the embedding and the LM head's copy of it; both empty when
  // none. After each step's backward both get the sum of their gradients
  // (SumTiedGradients), and the global norm counts the weight once.
  std::pair<std::string, std::string> tied_parameters;
  // Checkpoints: written every `checkpoint_every` steps and after the last
  // one into `checkpoint_dir` (none when empty). With `resume`, training
  // continues from the latest checkpoint there, if any.
  std::string checkpoint_dir;
  int checkpoint_every = 0;
  bool resume = false;
  // The identity fields recorded in the manifest and hashed into every
  // shard (model, plan, partition, seed: what the caller needs to check a
  // resume against); the same on every rank.
  std::string manifest_json = "{}";
  // The run's id (the same on every rank; WorkerSetup agrees on it).
  std::string run_id = "run";
  // Checkpoints kept: the newest this many of those this run published (and
  // the one it resumed from); never another run's.
  size_t keep_checkpoints = 2;
  // Called with a verified manifest before resuming; throws to refuse it.
  std::function<void(const std::string& manifest_json)> check_resume;
  std::chrono::milliseconds comm_timeout{60000};
  // On a CUDA device, when set (pplab train sets it under NCCL): called (once, from another thread) with a
  // line naming the action when the host has stayed inside one action of a
  // step more than comm_timeout + 5 s (runtime/exec/host_watch.h), and the
  // host thread's native stack then. It should report them and end the
  // process.
  std::function<void(const std::string& line, const std::vector<std::string>& stack)> on_host_stuck;
  // Stages of this rank whose activations are recomputed in B or I
  // (ExecutorOptions::recompute); the gradients do not change.
  std::set<StageId> recompute;
  // Whether a step's forwards share one bf16 cast of each weight
  // (ExecutorOptions::share_weight_casts); off for graphed stages, whose
  // captures each cast their own.
  bool share_weight_casts = true;
  // When set, each step's peak activation bytes are measured (Executor) and
  // rank 0 gathers the last step's from every pipeline rank.
  MemoryMeter* memory = nullptr;
  // Times the actions (host clock when null; CUDA events on a GPU).
  StepClock* clock = nullptr;
  // Called at the start of each step with its index (tests inject faults).
  std::function<void(int step)> on_step;
  // Called after the last step with this rank's stages, whose parameters
  // still hold that step's gradients.
  std::function<void(const std::map<StageId, Stage*>& stages)> after_last_step;
  // Validation: every `eval_every` steps and after the last one (never when
  // 0 or when `eval_batches` is unset), the mean loss over `eval_batches`,
  // run forward only through the same placement and reduced like the loss.
  int eval_every = 0;
  std::function<std::vector<StepBatch>()> eval_batches;
  // Called on every rank after each step (and its evaluation, if any),
  // before the step's checkpoint is saved.
  std::function<void(const StepReport&)> on_step_end;
  // When set, more manifest fields (not identity fields) for the checkpoint
  // written after `steps_done` steps, as a JSON object (e.g. the data
  // position). Called on world rank 0 only.
  std::function<std::string(int steps_done)> manifest_for_step;
};

using StageFactory = std::function<std::unique_ptr<Stage>(StageId stage)>;
using BatchFn = std::function<StepBatch(int step)>;

// Milliseconds on the steady clock since `start`, as TrainSummary's *_ms
// fields are timed.
inline double MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

struct TrainSummary {
  int first_step = 0;                              // 0, or the step a resumed run started at
  double checkpoint_load_ms = 0;                   // time to verify and load the resumed checkpoint
  double warm_up_ms = 0;                           // this rank's WarmUpStages before the first step; 0 without
  double checkpoint_save_ms = 0;                   // time of the last checkpoint save (shards, barrier, publish)
  std::vector<double> losses;                      // per step, the batch loss (every rank gets it)
  std::vector<double> step_times_ms;               // per step, wall time on this rank
  std::vector<double> step_clock_ms;               // per step, the executor's step on the step clock (StepResult)
  std::vector<double> host_issue_ms;               // per step, the host's time to issue the executor's step
  std::vector<double> device_lag_ms;               // per step, MedianDeviceLagMs of the executor's step
  std::vector<double> lrs;                         // per step, the learning rate used
  std::vector<double> grad_norms;                  // per step, the global gradient norm before clipping
  std::vector<double> bubbles;                     // per step, the measured bubble (see StepReport)
  std::vector<std::pair<int, double>> val_losses;  // (steps done, validation loss)
  Timeline last_step;                              // rank 0: all ranks' actions of the last step, from 0; else empty
  // This process's AdamW moments, bytes (AdamW::StateBytes).
  int64_t optimizer_state_bytes = 0;
  // With TrainerOptions::memory, rank 0: per pipeline rank (first replica),
  // the last step's peak of bytes allocated during the step and alive at once.
  std::vector<Bytes> peak_activation_bytes;
};

// Trains pipeline rank `rank`'s stages of the lowered `schedule`. With a
// checkpoint directory, world rank 0 first removes the `.tmp` directories of
// failed saves, and every rank checks that it sees the directory rank 0
// writes to (a shared filesystem is required: throws otherwise, on every
// rank). On resume, throws when `steps` is below the checkpoint's step; at
// that step there is nothing to do and the summary holds no steps. `group` is
// the world (all pipeline ranks of all replicas); with it null the schedule
// must have one rank and there is one replica (single-process training). Throws
// pplab::Error naming the rank and action when a peer fails or times out.
TrainSummary Train(const Schedule& schedule, RankId rank, Transport& transport, ProcessGroupHandle* group,
                   const StageFactory& make_stage, const BatchFn& batch, const LossFn& loss,
                   const TrainerOptions& options);

}  // namespace pplab
