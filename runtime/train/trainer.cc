#include "runtime/train/trainer.h"

#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <set>

#include "runtime/comm/c10d_transport.h"
#include "runtime/comm/collectives.h"
#include "runtime/comm/device_wait.h"
#include "runtime/exec/host_watch.h"
#include "runtime/exec/step_clock.h"
#include "runtime/train/adamw.h"
#include "runtime/train/checkpoint.h"
#include "runtime/train/flat_params.h"
#include "runtime/train/lr_schedule.h"
#include "runtime/train/model_copies.h"
#include "runtime/train/rank_timelines.h"
#include "runtime/train/run_checkpoints.h"
#include "runtime/train/step_work.h"
#include "runtime/train/tensor_parallel_step.h"
#include "schedules/error.h"
#include "schedules/lowering.h"

namespace pplab {
namespace {

// The plan with only its forward actions (and their messages): validation
// runs through the same placement without keeping activations.
Schedule ForwardOnly(const Schedule& schedule) {
  Schedule f = StripComm(schedule);
  for (Program& program : f.programs) {
    Program kept;
    for (const Action& a : program) {
      // An OVERLAP_F_B (DualPipe) keeps its forward part, an F like any other.
      if (a.kind == ActionKind::kForward || a.kind == ActionKind::kOverlapFB) {
        kept.push_back(Action{ActionKind::kForward, a.stage, a.microbatch});
      }
    }
    program = std::move(kept);
  }
  f.name = schedule.name + " (forward only)";
  return f.ranks > 1 ? Lower(f) : f;
}

// Compute time of `events` and the span from the first compute start to the
// last compute end, in ns.
std::pair<double, double> BusyAndSpan(const std::vector<TimelineEvent>& events) {
  double busy = 0;
  TimeNs first = 0, last = 0;
  bool any = false;
  for (const TimelineEvent& e : events) {
    if (!IsCompute(e.action.kind)) continue;
    busy += static_cast<double>(e.end - e.start);
    first = any ? std::min(first, e.start) : e.start;
    last = any ? std::max(last, e.end) : e.end;
    any = true;
  }
  return {busy, static_cast<double>(last - first)};
}

// Sharded optimizer: after each replica updated its share of every flat
// buffer, the replicas put the shares together. Each zeroes what it did not
// update and the buffer is summed over them: every element then holds the
// one replica's value plus zeros, which is that value exactly, so the
// parameters equal the unsharded update's bit for bit. (An all-gather would
// move half the bytes; the sum keeps to the collectives pplab already has.)
void GatherShares(AdamW& optimizer, ProcessGroupHandle& dp_group, std::chrono::milliseconds timeout) {
  torch::NoGradGuard no_grad;
  for (const AdamW::ShardPart& part : optimizer.ShardParts()) {
    at::Tensor values = part.buffer.values;  // (n), the stage's parameters
    const int64_t n = values.numel();
    values.narrow(0, 0, part.begin).zero_();
    values.narrow(0, part.end, n - part.end).zero_();
    AllReduceSumInPlace(dp_group, values, timeout);
  }
}

// The squared gradient of the tied weight's second copy (`name` on the
// first pipeline's last stage) where this rank holds it, else 0: the norm
// counts the weight once.
at::Tensor TiedCopySquares(const Schedule& schedule,
                           const std::map<StageId, std::vector<std::pair<std::string, at::Tensor>>>& params_of,
                           const std::string& name) {
  for (const auto& [s, params] : params_of) {
    if (schedule.PipelineOf(s) != 0 || schedule.ModelStage(s) != schedule.ModelStages() - 1) continue;
    for (const auto& [n, p] : params) {
      if (n == name) return GradSquares({p.grad()});
    }
  }
  return torch::zeros({}, torch::kFloat64);
}

// The stages this rank runs, with their parameters and flat buffers.
struct RankModel {
  std::vector<std::unique_ptr<Stage>> owned;
  std::map<StageId, Stage*> stages;
  // Every stage's parameters, and each stage's with (unless turned off) the
  // flat buffer holding them and another holding their gradients
  // (runtime/train/flat_params.h); undefined where there is none.
  std::vector<std::pair<std::string, at::Tensor>> named;
  std::map<StageId, std::vector<std::pair<std::string, at::Tensor>>> params_of;
  std::map<StageId, FlatBuffer> flats;
  // With several copies of the model (DualPipe), the first copy's
  // parameters: the norm counts each parameter once, and checkpoints hold one
  // copy (they load into any plan; every copy reads its part from it).
  std::set<std::string> first_copy_names;
  c10::Device device = c10::Device(c10::kCPU);  // the first copy's parameters'

  // The gradient tensors (flat buffers where there are), all or the first
  // copy's; taken after the backward, when every gradient exists.
  std::vector<at::Tensor> Gradients(const Schedule& schedule, bool first_copy_only) const {
    std::vector<at::Tensor> out;
    for (const auto& [s, params] : params_of) {
      if (first_copy_only && schedule.PipelineOf(s) != 0) continue;
      for (const at::Tensor& g : GradientsOf(flats.at(s), params)) out.push_back(g);
    }
    return out;
  }
  std::vector<FlatBuffer> Buffers() const {
    std::vector<FlatBuffer> buffers;
    for (const auto& [s, flat] : flats) buffers.push_back(flat);
    return buffers;
  }
};

RankModel BuildRankModel(const Schedule& schedule, RankId rank, const StageFactory& make_stage, bool flat_parameters) {
  RankModel m;
  for (StageId s : schedule.StagesOf(rank)) {
    m.owned.push_back(make_stage(s));
    m.stages[s] = m.owned.back().get();
    m.params_of[s] = m.owned.back()->NamedParameters();
    m.flats[s] = flat_parameters ? FlattenParameters(m.params_of[s]) : FlatBuffer{};
    for (auto& [name, p] : m.params_of[s]) {
      m.named.emplace_back(name, p);
      if (schedule.PipelineOf(s) == 0) {
        m.first_copy_names.insert(name);
        m.device = p.device();
      }
    }
  }
  return m;
}

// Under tensor parallelism (`split`), what this rank adds to the step's loss
// and gradient norm: the group's rank 0 counts what every rank of the group
// holds alike (the loss, the whole parameters' gradients).
struct NormShare {
  bool counts = true;
  // The whole weights inside split regions (qk_norm's): their gradients are
  // partial sums, which the group adds up.
  std::vector<at::Tensor> partial_params;
  // On the group's other ranks, the first copy's whole parameters, whose
  // squared gradients the group's rank 0 counts (a tied head is out of the
  // count already: TiedCopySquares).
  std::vector<at::Tensor> counted_elsewhere;
};

NormShare PickNormShare(const Schedule& schedule, const RankModel& model, const TrainerOptions& options, bool split) {
  NormShare share;
  share.counts = !split || options.tp_rank == 0;
  if (split) {
    for (const auto& [name, p] : model.named) {
      if (options.tp_partial_gradient(name)) share.partial_params.push_back(p);
    }
  }
  if (share.counts) return share;
  for (const auto& [s, params] : model.params_of) {
    if (schedule.PipelineOf(s) != 0) continue;
    for (const auto& [name, p] : params) {
      const bool tied_head = !options.tied_parameters.first.empty() && name == options.tied_parameters.second;
      if (options.tp_split_dim(name) < 0 && !tied_head) share.counted_elsewhere.push_back(p);
    }
  }
  return share;
}

// On a GPU the host only queues the step's work: it is watched for a CUDA
// call that blocks inside an action, a little before NCCL's watchdog (at
// comm_timeout + 10 s) would end the process with its own dump. None on the
// CPU, or without a handler.
std::unique_ptr<HostWatch> WatchHost(const c10::Device& device, const TrainerOptions& options) {
  if (!device.is_cuda() || !options.on_host_stuck) return nullptr;
  const auto bound = options.comm_timeout + std::chrono::seconds(5);
  char name[64];
  std::snprintf(name, sizeof name, "--comm-timeout (%g s) + 5 s",
                std::chrono::duration<double>(options.comm_timeout).count());
  return std::make_unique<HostWatch>(bound, name, options.on_host_stuck);
}

// A step's figures, the same on every rank.
struct StepFigures {
  double loss = 0;    // the summed loss, as the loss function scales it
  double bubble = 0;  // 1 - compute time / (K x each replica's compute span), over the world
  double norm = 0;    // the global gradient norm, before clipping
};

// The step's one host read: this rank's loss, compute time and squared
// gradient norm (the first copy's parameters, so each counts once), summed
// over the world in one all-reduce. Clipping by that global norm equals
// single-process clipping (per-stage norms would not).
StepFigures SumStepFigures(const Schedule& schedule, RankId rank, int step, const StepResult& result,
                           const RankModel& model, const NormShare& share, ProcessGroupHandle* group,
                           const TrainerOptions& options) {
  const auto [busy, span] = BusyAndSpan(result.events);
  const c10::Device& device = model.device;
  const at::Tensor loss_sum = result.loss_sum.defined() && share.counts
                                  ? result.loss_sum.to(device)
                                  : torch::zeros({}, torch::dtype(torch::kFloat64).device(device));
  at::Tensor squares = GradSquares(model.Gradients(schedule, true));
  if (!options.tied_parameters.first.empty()) {
    squares = squares - TiedCopySquares(schedule, model.params_of, options.tied_parameters.second);
  }
  if (!share.counts) {
    std::vector<at::Tensor> grads;
    for (const at::Tensor& p : share.counted_elsewhere) {
      if (p.grad().defined()) grads.push_back(p.grad());
    }
    squares = squares - GradSquares(grads).to(squares.device());
  }
  // Each replica's pipeline rank 0 computes first and last, so its span is
  // the replica's: K times it is what the replica's ranks could have computed.
  const auto scalar = [&device](double x) { return torch::full({}, x, torch::dtype(torch::kFloat64).device(device)); };
  at::Tensor sums = torch::stack({loss_sum, scalar(share.counts ? busy : 0.0), squares.to(device),
                                  scalar(share.counts && rank == 0 ? schedule.ranks * span : 0.0)});
  if (group != nullptr) {
    sums = sums.to(GroupDevice(*group));
    AllReduceSumInPlace(*group, sums, options.comm_timeout);
  }
  const at::Tensor host = HostCopy(sums, options.comm_timeout,
                                   "rank " + std::to_string(rank) + " at the end of step " + std::to_string(step));
  StepFigures f;
  f.loss = host[0].item<double>();
  f.bubble = host[3].item<double>() > 0 ? 1.0 - host[1].item<double>() / host[3].item<double>() : 0.0;
  f.norm = std::sqrt(host[2].item<double>() / (group != nullptr ? options.dp_size : 1));
  return f;
}

}  // namespace

TrainSummary Train(const Schedule& schedule, RankId rank, Transport& transport, ProcessGroupHandle* group,
                   const StageFactory& make_stage, const BatchFn& batch, const LossFn& loss,
                   const TrainerOptions& options) {
  // Set-up: the rank's stages, the optimizer over their flat buffers, how
  // this rank counts in the norm, and where a resumed run starts.
  if (group == nullptr && schedule.ranks != 1) {
    throw Error("train: a " + std::to_string(schedule.ranks) + "-rank schedule needs a process group");
  }
  if (const std::string why = WhyNotOneModel(schedule); !why.empty()) throw Error("train: " + why);
  RankModel model = BuildRankModel(schedule, rank, make_stage, options.flat_parameters);
  // Sharded optimizer (ZeRO-1): replica d of the D updates share d of each
  // flat buffer.
  const bool sharded = options.shard_optimizer && options.dp_group != nullptr && options.dp_size > 1;
  if (options.shard_optimizer && !options.flat_parameters) {
    throw Error("the sharded optimizer needs flat parameter buffers (drop --no-flat-params)");
  }
  const OptimizerShard shard =
      sharded ? OptimizerShard{GroupRank(*options.dp_group), options.dp_size} : OptimizerShard{};
  AdamW optimizer(model.named, AdamWConfig{}, model.Buffers(), shard);
  const RankId world_rank = group != nullptr ? GroupRank(*group) : 0;
  const bool split = options.tp_group != nullptr && options.tp_size > 1;
  if (split && (!options.tp_split_dim || !options.tp_partial_gradient)) {
    throw Error("train: tensor parallelism needs the parameters' layout");
  }
  const NormShare share = PickNormShare(schedule, model, options, split);
  RunCheckpoints checkpoints(schedule, rank, world_rank, group, options, split, sharded);
  TrainSummary summary;
  summary.first_step = checkpoints.Resume(optimizer, summary.checkpoint_load_ms);
  const int first_step = summary.first_step;

  // The executors. With data parallelism, each stage's all-reduce starts
  // when the executor reports its gradients complete, overlapping the rest
  // of the step.
  std::vector<std::unique_ptr<StageBucket>> buckets;
  ExecutorOptions exec_options;
  exec_options.comm_timeout = options.comm_timeout;
  exec_options.memory = options.memory;
  // The clock the executor times the actions on; the trainer marks the
  // step's work after them on the same one.
  HostClock host_clock;
  StepClock& clock = options.clock != nullptr ? *options.clock : host_clock;
  exec_options.clock = &clock;
  exec_options.recompute = options.recompute;
  exec_options.share_weight_casts = options.share_weight_casts;
  exec_options.microbatch_losses = false;  // the step reads its loss once (SumStepFigures)
  const bool tied = !options.tied_parameters.first.empty();
  if (tied) exec_options.extra_peers = TiedPeers(schedule, rank);
  if (options.dp_group != nullptr) {
    if (const std::string why = MissingReduceGrad(schedule); !why.empty()) {
      throw Error("data parallelism: the plan's " + why + " (a plan with none gets them added)");
    }
    exec_options.on_reduce_grad = [&](StageId s) {
      buckets.push_back(
          std::make_unique<StageBucket>(GradientsOf(model.flats.at(s), model.params_of.at(s)), *options.dp_group));
    };
  }
  // NCCL creates a group's communicator in its first collective, blocking
  // until every member arrives: the data-parallel group's first all-reduce
  // would otherwise come in the middle of the first step, while point-to-point
  // kernels run. One bounded all-reduce here creates it first (before the
  // pipeline pairs, which the executor links next, in the same order on
  // every rank).
  if (options.dp_group != nullptr) AllReduceSum(*options.dp_group, 0.0, options.comm_timeout);
  // The same for the tensor-parallel group, whose first all-reduce would
  // come in the first forward.
  if (split) AllReduceSum(*options.tp_group, 0.0, options.comm_timeout);
  const std::unique_ptr<HostWatch> watch = WatchHost(model.device, options);
  exec_options.host_watch = watch.get();
  Executor executor(schedule, rank, model.stages, transport, loss, exec_options);
  const Schedule eval_plan = ForwardOnly(schedule);
  ExecutorOptions eval_options;
  eval_options.comm_timeout = options.comm_timeout;
  eval_options.host_watch = watch.get();
  Executor evaluator(eval_plan, rank, model.stages, transport, loss, eval_options);
  // Mean validation loss over the learned tokens of the eval batches, on
  // every rank: each batch's mean weighted by its tokens, so the figure does
  // not depend on how the windows fall into batches (-1: no token to
  // predict). Each batch's RunStep caches its weight casts under no_grad and
  // drops them at its end, so none reaches a training step.
  auto evaluate = [&](std::chrono::steady_clock::time_point origin) {
    torch::NoGradGuard no_grad;
    const std::vector<StepBatch> batches = options.eval_batches();
    double sum = 0, tokens = 0;  // tokens: the same on every rank
    for (const StepBatch& b : batches) {
      const StepResult r = evaluator.RunStep(b.microbatches, b.loss_scale, origin);
      for (const auto& [m, l] : r.losses) sum += l * b.learned_tokens;
      tokens += b.learned_tokens;
    }
    if (!share.counts) sum = 0;
    if (group != nullptr) sum = AllReduceSum(*group, sum, options.comm_timeout);
    return tokens > 0 ? sum / tokens : -1.0;
  };
  const LrSchedule lr_schedule{options.lr, options.warmup_steps, options.steps};

  // Warm-up: on a GPU, every stage's kernels, libraries and first
  // allocations are set up before the first step posts a receive
  // (WarmUpStages). The step zeroes the gradients it leaves.
  if (options.warm_up && first_step < options.steps) {
    const auto start = std::chrono::steady_clock::now();
    WarmUpStages(schedule, rank, model.stages, batch(first_step).microbatches, loss);
    WaitForDevice(model.device, options.comm_timeout, "rank " + std::to_string(world_rank) + " warming up its stages");
    summary.warm_up_ms = MsSince(start);
  }
  // Align the ranks' clocks: everyone leaves the barrier within a few
  // microseconds and takes that moment as time 0 (on one host, rank 0's
  // moment: SharedOrigin). Twice: on NCCL a barrier is
  // a polled read-back, and ranks that reached the first more than the poll's
  // 2 ms spin apart see its end from their sleeps, up to a pause apart; all
  // reach the second within that, and see its end while spinning.
  if (group != nullptr) {
    Barrier(*group, options.comm_timeout);
    Barrier(*group, options.comm_timeout);
  }
  auto origin = std::chrono::steady_clock::now();
  if (group != nullptr) origin = SharedOrigin(*group, origin, options.comm_timeout);

  // The steps: the plan, the gradients' sums, the norm, the update.
  std::vector<TimelineEvent> last_events;
  Bytes last_peak = 0;
  std::vector<std::optional<Bytes>> last_live;
  // The last step's work after the actions (the trace's step events, as the
  // simulator's: traces/timeline.h), marked on the actions' clock: on a GPU
  // its marks are CUDA events, resolved once after the update. Earlier
  // steps take no marks, and the next step's start would reuse them.
  struct StepMarks {
    const char* name;
    int begin, end;
  };
  std::vector<StepMarks> step_marks;
  std::vector<StepEvent> last_step_events;
  bool mark_step = false;
  // Runs `work` and, in the last step, marks it as the step event `name`.
  const auto timed = [&](const char* name, auto work) {
    if (!mark_step) return work();
    const int begin = clock.Mark();
    work();
    step_marks.push_back({name, begin, clock.Mark()});
  };
  for (int step = first_step; step < options.steps; ++step) {
    if (options.on_step) options.on_step(step);
    if (watch) watch->SetStep(step + 1);
    const auto start = std::chrono::steady_clock::now();
    const StepBatch b = batch(step);
    optimizer.ZeroGrad();
    // In bf16 the step's forwards share one cast of each weight, which RunStep
    // drops before it returns (ExecutorOptions::share_weight_casts): the
    // update below is what the next step casts.
    StepResult result = executor.RunStep(b.microbatches, b.loss_scale, origin);
    mark_step = step + 1 == options.steps;
    for (auto& bucket : buckets) bucket->Finish(options.comm_timeout);
    buckets.clear();
    if (schedule.NumPipelines() > 1) {
      timed("copy_exchange", [&] { SumCopyGradients(schedule, rank, model.stages, transport, options.comm_timeout); });
    }
    if (tied) {
      timed("tied_exchange", [&] {
        SumTiedGradients(schedule, rank, model.stages, transport, options.comm_timeout, options.tied_parameters.first,
                         options.tied_parameters.second);
      });
    }
    if (step + 1 == options.nan_gradient_at && world_rank == 0) {
      torch::NoGradGuard no_grad;
      for (at::Tensor& g : model.Gradients(schedule, false)) g.fill_(std::nan(""));
    }
    // Whole weights inside a split region (qk_norm's) get the group's sum.
    if (split) SumPartialGradients(share.partial_params, *options.tp_group, options.comm_timeout);
    // The loss's all-reduce carries the norm's squares too, and its host
    // read waits for both (step_work.h): one event.
    StepFigures f;
    timed("loss_allreduce", [&] { f = SumStepFigures(schedule, rank, step, result, model, share, group, options); });
    // Every rank sees the same reduced loss, so all stop together, before an
    // update that would spoil the weights; the last checkpoint stays valid.
    // The same for the gradients' norm, which every rank has too: a NaN or
    // infinite gradient spoils the weights through AdamW's moments though
    // the loss is finite (a NaN norm was never over --clip-norm, and the
    // step was applied and checkpointed). A norm past float's range with
    // finite gradients stops too: their squares overflow, as in PyTorch's
    // clip_grad_norm_, and the run is diverging.
    const bool loss_bad = !std::isfinite(f.loss);
    if (loss_bad || !std::isfinite(f.norm)) {
      const auto text = [](double x) { return std::isnan(x) ? std::string("nan") : std::to_string(x); };
      throw Error("step " + std::to_string(step + 1) + ": " +
                  (loss_bad ? "the loss is " + text(f.loss)
                            : "the gradients' norm is " + text(f.norm) + " (the loss " + text(f.loss) + ")") +
                  "; stopping before the update" +
                  (options.checkpoint_dir.empty() ? std::string()
                   // Before the first checkpoint there is none to speak of.
                   : HoldsCheckpoints(options.checkpoint_dir)
                       ? " (the last checkpoint in " + options.checkpoint_dir + " is intact)"
                       : " (no checkpoint was written yet)"));
    }
    if (options.clip_norm > 0 && f.norm > options.clip_norm) {
      timed("clip", [&] {
        torch::NoGradGuard no_grad;
        ScaleGradients(model.Gradients(schedule, false), options.clip_norm / (f.norm + 1e-6));
      });
    }
    const double lr = lr_schedule.At(step);
    timed("optimizer", [&] {
      optimizer.Step(lr);
      if (sharded) GatherShares(optimizer, *options.dp_group, options.comm_timeout);
    });
    if (mark_step) {
      // Waits (bounded) for the device to finish the update, which the next
      // step's start or the end of training would wait for anyway.
      std::vector<TimeNs> marks;
      try {
        marks = clock.Resolve(options.comm_timeout);
      } catch (const Error& e) {
        throw Error("rank " + std::to_string(world_rank) + " after the last step's update: " + e.what());
      }
      for (const StepMarks& m : step_marks)
        last_step_events.push_back({rank, m.name, marks.at(m.begin), marks.at(m.end)});
    }
    summary.lrs.push_back(lr);
    summary.grad_norms.push_back(f.norm);
    summary.losses.push_back(f.loss);
    summary.step_times_ms.push_back(MsSince(start));
    summary.bubbles.push_back(f.bubble);
    summary.step_clock_ms.push_back(static_cast<double>(result.clock_span_ns) / 1e6);
    summary.host_issue_ms.push_back(static_cast<double>(result.host_span_ns) / 1e6);
    summary.device_lag_ms.push_back(MedianDeviceLagMs(result));
    last_events = std::move(result.events);
    last_peak = result.peak_activation_bytes;
    last_live = std::move(result.live_after);
    const int done = step + 1;
    StepReport report;
    report.step = step;
    report.loss = f.loss;
    report.lr = lr;
    report.grad_norm = f.norm;
    report.step_ms = summary.step_times_ms.back();
    report.bubble = f.bubble;
    if (options.eval_batches && options.eval_every > 0 && (done == options.steps || done % options.eval_every == 0)) {
      report.val_loss = evaluate(origin);
      summary.val_losses.emplace_back(done, report.val_loss);
    }
    // The step's report (its metrics line) before its checkpoint: a run
    // stopped between the two resumes from the checkpoint before, dropping
    // the line, where the other order lost the line of the step it resumed
    // after.
    if (options.on_step_end) options.on_step_end(report);
    if (checkpoints.Due(done)) summary.checkpoint_save_ms = checkpoints.Save(done, optimizer, model.first_copy_names);
  }

  // The end: what rank 0 reports.
  summary.optimizer_state_bytes = optimizer.StateBytes();
  if (options.after_last_step) options.after_last_step(model.stages);
  GatherLastStep(schedule, rank, group, options, split ? options.tp_size : 1, last_events, last_live, last_step_events,
                 last_peak, summary);
  return summary;
}

}  // namespace pplab
