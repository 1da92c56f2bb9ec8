#include "runtime/train/trainer.h"

#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

#include "runtime/comm/c10d_transport.h"
#include "runtime/comm/collectives.h"
#include "runtime/comm/device_wait.h"
#include "runtime/exec/host_watch.h"
#include "runtime/train/adamw.h"
#include "runtime/train/checkpoint.h"
#include "runtime/train/flat_params.h"
#include "runtime/train/lr_schedule.h"
#include "runtime/train/model_copies.h"
#include "runtime/train/step_work.h"
#include "runtime/train/tensor_parallel_step.h"
#include "schedules/error.h"
#include "schedules/file_io.h"
#include "schedules/lowering.h"

namespace pplab {
namespace {

// This boot of this host: the FNV-1a hash of /proc/sys/kernel/random/boot_id,
// in 63 bits; 0 when it cannot be read.
int64_t BootId() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  if (!(in >> id)) return 0;
  uint64_t h = 14695981039346656037ULL;
  for (const unsigned char c : id) h = (h ^ c) * 1099511628211ULL;
  return static_cast<int64_t>(h >> 1);
}

// Time 0 of every rank's timelines, given this rank's reading `mine` as it
// leaves the start barrier. The processes of one host read one steady
// clock, so where every rank runs on rank 0's host (the same boot id, and
// a reading within 1 s of rank 0's, as ranks just out of one barrier are)
// all take rank 0's reading: the same instant. Otherwise each keeps its own,
// which ranks leave a barrier milliseconds apart on a busy host (a consumer
// seemed to start up to 1.9 ms before its message was sent on the 2-core
// VM, docs/fidelity.md) and which is all there is across hosts.
std::chrono::steady_clock::time_point SharedOrigin(ProcessGroupHandle& group,
                                                   std::chrono::steady_clock::time_point mine,
                                                   std::chrono::milliseconds timeout) {
  const int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(mine.time_since_epoch()).count();
  const std::vector<std::vector<int64_t>> all = AllGatherWords(group, {ns, BootId()}, timeout);
  constexpr int64_t kSecond = 1000000000;
  for (const std::vector<int64_t>& r : all) {
    if (r.at(1) == 0 || r[1] != all[0].at(1) || std::llabs(r[0] - all[0][0]) > kSecond) return mine;
  }
  return std::chrono::steady_clock::time_point(
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::nanoseconds(all[0][0])));
}

// Events travel to rank 0 as eight int64 per action: the action (with an
// overlap's backward part) and its start and end.
constexpr size_t kEventWords = 8;

std::vector<int64_t> Encode(const std::vector<TimelineEvent>& events) {
  std::vector<int64_t> out;
  out.reserve(events.size() * kEventWords);
  for (const TimelineEvent& e : events) {
    const Action& a = e.action;
    out.insert(out.end(), {static_cast<int64_t>(a.kind), a.stage, a.microbatch, static_cast<int64_t>(a.overlap_kind),
                           a.overlap_stage, a.overlap_microbatch, e.start, e.end});
  }
  return out;
}

void Decode(RankId rank, const std::vector<int64_t>& words, Timeline& into) {
  for (size_t i = 0; i + kEventWords <= words.size(); i += kEventWords) {
    TimelineEvent e;
    e.rank = rank;
    e.action.kind = static_cast<ActionKind>(words[i]);
    e.action.stage = static_cast<StageId>(words[i + 1]);
    e.action.microbatch = static_cast<MicrobatchId>(words[i + 2]);
    e.action.overlap_kind = static_cast<ActionKind>(words[i + 3]);
    e.action.overlap_stage = static_cast<StageId>(words[i + 4]);
    e.action.overlap_microbatch = static_cast<MicrobatchId>(words[i + 5]);
    e.start = words[i + 6];
    e.end = words[i + 7];
    into.events.push_back(e);
  }
}

}  // namespace

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

// Sharded optimizer, before a checkpoint: each flat buffer's moments, every
// replica's share put together the same way, given to the optimizer whole
// (AdamW::SetWholeMoments) for the checkpoint to write.
void GatherMoments(AdamW& optimizer, ProcessGroupHandle& dp_group, std::chrono::milliseconds timeout) {
  torch::NoGradGuard no_grad;
  const std::vector<AdamW::ShardPart> parts = optimizer.ShardParts();
  for (size_t b = 0; b < parts.size(); ++b) {
    const AdamW::ShardPart& part = parts[b];
    at::Tensor whole[2];
    const at::Tensor* mine[2] = {&part.exp_avg, &part.exp_avg_sq};
    for (int k = 0; k < 2; ++k) {
      whole[k] = torch::zeros_like(part.buffer.values);
      whole[k].narrow(0, part.begin, part.end - part.begin).copy_(*mine[k]);
      AllReduceSumInPlace(dp_group, whole[k], timeout);
    }
    optimizer.SetWholeMoments(b, whole[0], whole[1]);
  }
}

// Rank 0 removes what failed saves left and leaves a marker in `dir`; every
// rank must see it, else the ranks would write their shards to different
// places and rank 0 could not publish them.
void CheckSharedCheckpointDir(const std::string& dir, const std::string& run_id, RankId world_rank,
                              ProcessGroupHandle* group, std::chrono::milliseconds timeout) {
  namespace fs = std::filesystem;
  const fs::path marker = fs::path(dir) / (".pplab-run-" + run_id);
  if (world_rank == 0) {
    PrepareCheckpointDir(dir);
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) throw Error("--checkpoint-dir " + dir + ": cannot create: " + ec.message());
    WriteTextFile(marker.string(), run_id + "\n");
  }
  if (group == nullptr) {
    std::error_code ec;
    fs::remove(marker, ec);
    return;
  }
  Barrier(*group, timeout);
  std::error_code ec;
  const bool seen = fs::exists(marker, ec);
  const double missing = AllReduceSum(*group, seen ? 0.0 : 1.0, timeout);
  Barrier(*group, timeout);  // every rank has looked before rank 0 removes the marker
  if (world_rank == 0) fs::remove(marker, ec);
  if (missing > 0) {
    throw Error("--checkpoint-dir " + dir + " is not shared: " + std::to_string(static_cast<int>(missing)) +
                " rank(s) do not see what rank 0 writes there; checkpoints need one directory on a filesystem "
                "every node mounts");
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

}  // namespace

TrainSummary Train(const Schedule& schedule, RankId rank, Transport& transport, ProcessGroupHandle* group,
                   const StageFactory& make_stage, const BatchFn& batch, const LossFn& loss,
                   const TrainerOptions& options) {
  if (group == nullptr && schedule.ranks != 1) {
    throw Error("train: a " + std::to_string(schedule.ranks) + "-rank schedule needs a process group");
  }
  if (const std::string why = WhyNotOneModel(schedule); !why.empty()) throw Error("train: " + why);
  std::vector<std::unique_ptr<Stage>> owned;
  std::map<StageId, Stage*> stages;
  std::vector<std::pair<std::string, at::Tensor>> named;
  // Each stage's parameters, and (unless turned off) the flat buffer
  // holding them and another holding their gradients
  // (runtime/train/flat_params.h); undefined where there is none.
  std::map<StageId, std::vector<std::pair<std::string, at::Tensor>>> params_of;
  std::map<StageId, FlatBuffer> flats;
  // With several copies of the model (DualPipe), the first copy's
  // parameters: the norm counts each parameter once, and checkpoints hold one
  // copy (they load into any plan; every copy reads its part from it).
  std::set<std::string> first_copy_names;
  c10::Device device(c10::kCPU);
  for (StageId s : schedule.StagesOf(rank)) {
    owned.push_back(make_stage(s));
    stages[s] = owned.back().get();
    params_of[s] = owned.back()->NamedParameters();
    flats[s] = options.flat_parameters ? FlattenParameters(params_of[s]) : FlatBuffer{};
    for (auto& [name, p] : params_of[s]) {
      named.emplace_back(name, p);
      if (schedule.PipelineOf(s) == 0) {
        first_copy_names.insert(name);
        device = p.device();
      }
    }
  }
  // The rank's gradient tensors (flat buffers where there are), all or the
  // first copy's; taken after the backward, when every gradient exists.
  auto gradients = [&](bool first_copy_only) {
    std::vector<at::Tensor> out;
    for (const auto& [s, params] : params_of) {
      if (first_copy_only && schedule.PipelineOf(s) != 0) continue;
      for (const at::Tensor& g : GradientsOf(flats.at(s), params)) out.push_back(g);
    }
    return out;
  };
  std::vector<FlatBuffer> buffers;
  for (const auto& [s, flat] : flats) buffers.push_back(flat);
  // Sharded optimizer (ZeRO-1): replica d of the D updates share d of each
  // flat buffer.
  const bool sharded = options.shard_optimizer && options.dp_group != nullptr && options.dp_size > 1;
  if (options.shard_optimizer && !options.flat_parameters) {
    throw Error("the sharded optimizer needs flat parameter buffers (drop --no-flat-params)");
  }
  const OptimizerShard shard =
      sharded ? OptimizerShard{GroupRank(*options.dp_group), options.dp_size} : OptimizerShard{};
  AdamW optimizer(named, AdamWConfig{}, buffers, shard);
  const RankId world_rank = group != nullptr ? GroupRank(*group) : 0;
  // Tensor parallelism: the group's rank 0 counts what every rank of the
  // group holds alike (the loss, the whole parameters' gradients).
  const bool split = options.tp_group != nullptr && options.tp_size > 1;
  if (split && (!options.tp_split_dim || !options.tp_partial_gradient)) {
    throw Error("train: tensor parallelism needs the parameters' layout");
  }
  const bool counts = !split || options.tp_rank == 0;
  // Picked once: the whole weights inside split regions (their gradients
  // are partial sums), and on the group's other ranks the first copy's
  // whole parameters, whose squared gradients the group's rank 0 counts (a
  // tied head is out of the count already, below).
  std::vector<at::Tensor> partial_params, counted_elsewhere;
  if (split) {
    for (const auto& [name, p] : named) {
      if (options.tp_partial_gradient(name)) partial_params.push_back(p);
    }
  }
  if (!counts) {
    for (const auto& [s, params] : params_of) {
      if (schedule.PipelineOf(s) != 0) continue;
      for (const auto& [name, p] : params) {
        const bool tied_head = !options.tied_parameters.first.empty() && name == options.tied_parameters.second;
        if (options.tp_split_dim(name) < 0 && !tied_head) counted_elsewhere.push_back(p);
      }
    }
  }
  // World rank k T of the first pipeline is its pipeline rank k
  // (runtime/train/worker_setup.h numbers them).
  const int T = split ? options.tp_size : 1;
  // Replica 0's pipelines (world ranks 0..T K-1) gather the checkpoint's
  // tensors; its first writes them. The others hold the same values.
  const bool gathers_shards = world_rank < schedule.ranks * T;
  const bool writes_shards = gathers_shards && world_rank % T == 0;
  int first_step = 0;
  double load_ms = 0;
  // Checkpoints this run may prune, oldest first.
  std::vector<std::string> published;
  const CheckpointIdentity identity{options.run_id, options.manifest_json};
  if (!options.checkpoint_dir.empty()) {
    CheckSharedCheckpointDir(options.checkpoint_dir, options.run_id, world_rank, group, options.comm_timeout);
  }
  if (options.resume && !options.checkpoint_dir.empty()) {
    const std::string latest = LatestCheckpoint(options.checkpoint_dir);
    if (!latest.empty()) {
      const auto start = std::chrono::steady_clock::now();
      const std::string manifest = VerifyCheckpoint(latest);
      if (options.check_resume) options.check_resume(manifest);
      first_step = CheckpointStep(manifest);
      if (first_step > options.steps) {
        throw Error("--steps " + std::to_string(options.steps) + " is below the step of the checkpoint to resume (" +
                    latest + ", step " + std::to_string(first_step) + "): pass --steps above it to continue");
      }
      LoadCheckpoint(latest, manifest, optimizer,
                     split ? CutShare(options.tp_rank, options.tp_size, options.tp_split_dim) : nullptr);
      optimizer.KeepShares();  // sharded: the whole moments loaded, down to this replica's share
      published.push_back(latest);
      load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    }
  }
  // With data parallelism, each stage's all-reduce starts when the executor
  // reports its gradients complete, overlapping the rest of the step.
  std::vector<std::unique_ptr<StageBucket>> buckets;
  ExecutorOptions exec_options;
  exec_options.comm_timeout = options.comm_timeout;
  exec_options.memory = options.memory;
  exec_options.clock = options.clock;
  exec_options.recompute = options.recompute;
  exec_options.microbatch_losses = false;  // the step reads its loss once, below
  const bool tied = !options.tied_parameters.first.empty();
  if (tied) exec_options.extra_peers = TiedPeers(schedule, rank);
  if (options.dp_group != nullptr) {
    // Every stage of this rank must reach a REDUCE_GRAD, or its replicas
    // would update with unreduced gradients.
    for (StageId s : schedule.StagesOf(rank)) {
      bool found = false;
      for (const Action& a : schedule.programs[rank])
        found = found || (a.kind == ActionKind::kReduceGrad && a.stage == s);
      if (!found) {
        throw Error("data parallelism: the plan has no REDUCE_GRAD for stage " + std::to_string(s) + " on rank " +
                    std::to_string(rank) + " (AddReduceGrad inserts them)");
      }
    }
    exec_options.on_reduce_grad = [&](StageId s) {
      buckets.push_back(std::make_unique<StageBucket>(GradientsOf(flats.at(s), params_of.at(s)), *options.dp_group));
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
  // On a GPU the host only queues the step's work: it is watched for a CUDA
  // call that blocks inside an action, a little before NCCL's watchdog (at
  // comm_timeout + 10 s) would end the process with its own dump.
  std::unique_ptr<HostWatch> watch;
  if (device.is_cuda() && options.on_host_stuck) {
    const auto bound = options.comm_timeout + std::chrono::seconds(5);
    char name[64];
    std::snprintf(name, sizeof name, "--comm-timeout (%g s) + 5 s",
                  std::chrono::duration<double>(options.comm_timeout).count());
    watch = std::make_unique<HostWatch>(bound, name, options.on_host_stuck);
    exec_options.host_watch = watch.get();
  }
  Executor executor(schedule, rank, stages, transport, loss, exec_options);
  const Schedule eval_plan = ForwardOnly(schedule);
  ExecutorOptions eval_options;
  eval_options.comm_timeout = options.comm_timeout;
  eval_options.host_watch = watch.get();
  Executor evaluator(eval_plan, rank, stages, transport, loss, eval_options);
  // Mean validation loss over the eval batches, on every rank. Each batch's
  // RunStep caches its weight casts under no_grad and drops them at its end,
  // so none reaches a training step.
  auto evaluate = [&](std::chrono::steady_clock::time_point origin) {
    torch::NoGradGuard no_grad;
    const std::vector<StepBatch> batches = options.eval_batches();
    double sum = 0;
    for (const StepBatch& b : batches) {
      const StepResult r = evaluator.RunStep(b.microbatches, b.loss_scale, origin);
      for (const auto& [m, l] : r.losses) sum += l;
    }
    if (!counts) sum = 0;
    if (group != nullptr) sum = AllReduceSum(*group, sum, options.comm_timeout);
    return batches.empty() ? -1.0 : sum / static_cast<double>(batches.size());
  };
  const LrSchedule lr_schedule{options.lr, options.warmup_steps, options.steps};
  // On a GPU, every stage's kernels, libraries and first allocations are set
  // up before the first step posts a receive (WarmUpStages). The step zeroes
  // the gradients it leaves.
  double warm_up_ms = 0;
  if (options.warm_up && first_step < options.steps) {
    const auto start = std::chrono::steady_clock::now();
    WarmUpStages(schedule, rank, stages, batch(first_step).microbatches, loss);
    WaitForDevice(device, options.comm_timeout, "rank " + std::to_string(world_rank) + " warming up its stages");
    warm_up_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
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
  TrainSummary summary;
  summary.first_step = first_step;
  summary.checkpoint_load_ms = load_ms;
  summary.warm_up_ms = warm_up_ms;
  std::vector<TimelineEvent> last_events;
  Bytes last_peak = 0;
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
    const auto [busy, span] = BusyAndSpan(result.events);
    for (auto& bucket : buckets) bucket->Finish(options.comm_timeout);
    buckets.clear();
    SumCopyGradients(schedule, rank, stages, transport, options.comm_timeout);
    if (tied) {
      SumTiedGradients(schedule, rank, stages, transport, options.comm_timeout, options.tied_parameters.first,
                       options.tied_parameters.second);
    }
    // Whole weights inside a split region (qk_norm's) get the group's sum.
    if (split) SumPartialGradients(partial_params, *options.tp_group, options.comm_timeout);
    // The step's one host read: this rank's loss, compute time and squared
    // gradient norm (the first copy's parameters, so each counts once),
    // summed over the world in one all-reduce. Clipping by that global norm
    // equals single-process clipping (per-stage norms would not).
    const at::Tensor loss_sum = result.loss_sum.defined() && counts
                                    ? result.loss_sum.to(device)
                                    : torch::zeros({}, torch::dtype(torch::kFloat64).device(device));
    at::Tensor squares = GradSquares(gradients(true));
    if (tied) squares = squares - TiedCopySquares(schedule, params_of, options.tied_parameters.second);
    if (!counts) {
      std::vector<at::Tensor> grads;
      for (const at::Tensor& p : counted_elsewhere) {
        if (p.grad().defined()) grads.push_back(p.grad());
      }
      squares = squares - GradSquares(grads).to(squares.device());
    }
    at::Tensor sums =
        torch::stack({loss_sum, torch::full({}, counts ? busy : 0.0, torch::dtype(torch::kFloat64).device(device)),
                      squares.to(device)});
    if (group != nullptr) {
      sums = sums.to(GroupDevice(*group));
      AllReduceSumInPlace(*group, sums, options.comm_timeout);
    }
    const at::Tensor host = HostCopy(sums, options.comm_timeout,
                                     "rank " + std::to_string(rank) + " at the end of step " + std::to_string(step));
    const double step_loss = host[0].item<double>();
    const double bubble = span > 0 ? 1.0 - host[1].item<double>() / options.dp_size / (schedule.ranks * span) : 0.0;
    const double norm = std::sqrt(host[2].item<double>() / (group != nullptr ? options.dp_size : 1));
    // Every rank sees the same reduced loss, so all stop together, before an
    // update that would spoil the weights; the last checkpoint stays valid.
    if (!std::isfinite(step_loss)) {
      throw Error("step " + std::to_string(step) + ": the loss is " + std::to_string(step_loss) +
                  "; stopping before the update" +
                  (options.checkpoint_dir.empty()
                       ? std::string()
                       : " (the last checkpoint in " + options.checkpoint_dir + " is intact)"));
    }
    if (options.clip_norm > 0 && norm > options.clip_norm) {
      torch::NoGradGuard no_grad;
      ScaleGradients(gradients(false), options.clip_norm / (norm + 1e-6));
    }
    const double lr = lr_schedule.At(step);
    optimizer.Step(lr);
    if (sharded) GatherShares(optimizer, *options.dp_group, options.comm_timeout);
    summary.lrs.push_back(lr);
    summary.grad_norms.push_back(norm);
    summary.losses.push_back(step_loss);
    summary.step_times_ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    summary.bubbles.push_back(bubble);
    summary.step_clock_ms.push_back(static_cast<double>(result.clock_span_ns) / 1e6);
    summary.host_issue_ms.push_back(static_cast<double>(result.host_span_ns) / 1e6);
    summary.device_lag_ms.push_back(MedianDeviceLagMs(result));
    last_events = std::move(result.events);
    last_peak = result.peak_activation_bytes;
    const int done = step + 1;
    StepReport report;
    report.step = step;
    report.loss = step_loss;
    report.lr = lr;
    report.grad_norm = norm;
    report.step_ms = summary.step_times_ms.back();
    report.bubble = bubble;
    if (options.eval_batches && options.eval_every > 0 && (done == options.steps || done % options.eval_every == 0)) {
      report.val_loss = evaluate(origin);
      summary.val_losses.emplace_back(done, report.val_loss);
    }
    if (!options.checkpoint_dir.empty() &&
        (done == options.steps || (options.checkpoint_every > 0 && done % options.checkpoint_every == 0))) {
      const auto save_start = std::chrono::steady_clock::now();
      const std::string tmp = CheckpointDirName(options.checkpoint_dir, done) + ".tmp";
      // Every replica takes part; the first writes the whole moments.
      if (sharded) GatherMoments(optimizer, *options.dp_group, options.comm_timeout);
      if (gathers_shards) {
        const auto tensors =
            ShardTensors(optimizer, first_copy_names,
                         split ? GatherShares(*options.tp_group, options.tp_split_dim, options.comm_timeout) : nullptr);
        if (writes_shards) WriteShardTensors(tmp, rank, done, identity, tensors);
      }
      if (sharded) optimizer.KeepShares();                          // the whole moments, gathered for the save, go
      if (group != nullptr) Barrier(*group, options.comm_timeout);  // every shard is written
      if (world_rank == 0) {
        published.push_back(PublishCheckpoint(options.checkpoint_dir, done, schedule.ranks, identity,
                                              options.manifest_for_step ? options.manifest_for_step(done) : "{}"));
        PruneCheckpoints(published, options.keep_checkpoints);
      }
      summary.checkpoint_save_ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - save_start).count();
    }
    if (options.on_step_end) options.on_step_end(report);
  }
  summary.optimizer_state_bytes = optimizer.StateBytes();
  if (options.after_last_step) options.after_last_step(stages);
  // Gather the last step's timeline on rank 0, shifted to start at 0.
  std::vector<std::vector<int64_t>> all;
  if (group != nullptr) {
    all = GatherToRank0(*group, Encode(last_events), options.comm_timeout);
  } else {
    all.push_back(Encode(last_events));
  }
  if (options.memory != nullptr) {
    const std::vector<std::vector<int64_t>> peaks = group != nullptr
                                                        ? GatherToRank0(*group, {last_peak}, options.comm_timeout)
                                                        : std::vector<std::vector<int64_t>>{{last_peak}};
    for (RankId r = 0; r * T < static_cast<RankId>(peaks.size()) && r < schedule.ranks; ++r) {
      summary.peak_activation_bytes.push_back(peaks[r * T].at(0));
    }
  }
  // A collective's result on one rank does not mean its own bytes reached
  // the others: over NCCL's socket transport they may still be on their way
  // when it returns and tears its communicators down (ProcessGroupNCCL's
  // destructor aborts them). Every rank has read the gathers' results once
  // all have passed this barrier, which runs through the store alone, so no
  // collective is left in flight behind it.
  if (group != nullptr) HostBarrier(*group, options.comm_timeout);
  if (rank == 0) {
    Timeline& t = summary.last_step;
    t.name = schedule.name;
    t.source = "measured";
    t.ranks = schedule.ranks;
    // The first pipeline (world ranks 0, T, .. (K-1) T) stands for all.
    for (RankId r = 0; r * T < static_cast<RankId>(all.size()) && r < schedule.ranks; ++r) Decode(r, all[r * T], t);
    TimeNs first = t.events.empty() ? 0 : t.events.front().start;
    for (const TimelineEvent& e : t.events) first = std::min(first, e.start);
    for (TimelineEvent& e : t.events) {
      e.start -= first;
      e.end -= first;
    }
  }
  return summary;
}

}  // namespace pplab
