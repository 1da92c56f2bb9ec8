#include "runtime/trainer.h"

#include <torch/torch.h>

#include <cmath>

#include "runtime/adamw.h"
#include "runtime/c10d_transport.h"
#include "runtime/checkpoint.h"
#include "runtime/lr_schedule.h"
#include "schedules/error.h"

namespace pplab {
namespace {

// Events travel to rank 0 as five int64 per action.
std::vector<int64_t> Encode(const std::vector<TimelineEvent>& events) {
  std::vector<int64_t> out;
  out.reserve(events.size() * 5);
  for (const TimelineEvent& e : events) {
    out.insert(out.end(), {static_cast<int64_t>(e.action.kind), e.action.stage, e.action.microbatch, e.start, e.end});
  }
  return out;
}

void Decode(RankId rank, const std::vector<int64_t>& words, Timeline& into) {
  for (size_t i = 0; i + 4 < words.size(); i += 5) {
    TimelineEvent e;
    e.rank = rank;
    e.action = {static_cast<ActionKind>(words[i]), static_cast<StageId>(words[i + 1]),
                static_cast<MicrobatchId>(words[i + 2])};
    e.start = words[i + 3];
    e.end = words[i + 4];
    into.events.push_back(e);
  }
}

}  // namespace

double GlobalGradNorm(const std::vector<at::Tensor>& params, ProcessGroupHandle* group, int replicas,
                      std::chrono::milliseconds timeout) {
  double squares = 0;
  for (const at::Tensor& p : params) {
    if (p.grad().defined()) squares += p.grad().to(torch::kFloat64).pow(2).sum().item<double>();
  }
  if (group != nullptr) squares = AllReduceSum(*group, squares, timeout) / replicas;
  return std::sqrt(squares);
}

namespace {

// Sums one stage's gradients over its data-parallel replicas as one flat
// bucket (one all-reduce per stage rather than one per parameter).
void AllReduceStageGrads(Stage& stage, ProcessGroupHandle& dp_group, std::chrono::milliseconds timeout) {
  std::vector<at::Tensor> grads;
  for (auto& [name, p] : stage.NamedParameters()) {
    if (p.grad().defined()) grads.push_back(p.grad());
  }
  if (grads.empty()) return;
  std::vector<at::Tensor> flat;
  for (const at::Tensor& g : grads) flat.push_back(g.reshape({-1}).to(torch::kCPU));
  at::Tensor bucket = torch::cat(flat);
  AllReduceSumInPlace(dp_group, bucket, timeout);
  int64_t offset = 0;
  for (at::Tensor& g : grads) {
    g.copy_(bucket.narrow(0, offset, g.numel()).view_as(g));
    offset += g.numel();
  }
}

}  // namespace

TrainSummary Train(const Schedule& schedule, RankId rank, Transport& transport, ProcessGroupHandle* group,
                   const StageFactory& make_stage, const BatchFn& batch, const LossFn& loss,
                   const TrainerOptions& options) {
  if (group == nullptr && schedule.ranks != 1) {
    throw Error("train: a " + std::to_string(schedule.ranks) + "-rank schedule needs a process group");
  }
  std::vector<std::unique_ptr<Stage>> owned;
  std::map<StageId, Stage*> stages;
  std::vector<at::Tensor> params;
  std::vector<std::pair<std::string, at::Tensor>> named;
  for (StageId s : schedule.StagesOf(rank)) {
    owned.push_back(make_stage(s));
    stages[s] = owned.back().get();
    for (auto& [name, p] : owned.back()->NamedParameters()) {
      params.push_back(p);
      named.emplace_back(name, p);
    }
  }
  AdamW optimizer(named, AdamWConfig{});
  const RankId world_rank = group != nullptr ? GroupRank(*group) : 0;
  const bool writes_shards = world_rank < schedule.ranks;  // replica 0; the others hold the same values
  int first_step = 0;
  double load_ms = 0;
  if (options.resume && !options.checkpoint_dir.empty()) {
    const std::string latest = LatestCheckpoint(options.checkpoint_dir);
    if (!latest.empty()) {
      const auto start = std::chrono::steady_clock::now();
      const std::string manifest = VerifyCheckpoint(latest);
      if (options.check_resume) options.check_resume(manifest);
      LoadCheckpoint(latest, manifest, optimizer);
      first_step = CheckpointStep(manifest);
      load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    }
  }
  ExecutorOptions executor_options;
  executor_options.comm_timeout = options.comm_timeout;
  executor_options.memory = options.memory;
  Executor executor(schedule, rank, stages, transport, loss, executor_options);
  const LrSchedule lr_schedule{options.lr, options.warmup_steps, options.steps};
  // Align the ranks' clocks: everyone leaves the barrier within a few
  // microseconds and takes that moment as time 0.
  if (group != nullptr) Barrier(*group, options.comm_timeout);
  const auto origin = std::chrono::steady_clock::now();
  TrainSummary summary;
  summary.first_step = first_step;
  summary.checkpoint_load_ms = load_ms;
  std::vector<TimelineEvent> last_events;
  Bytes last_peak = 0;
  for (int step = first_step; step < options.steps; ++step) {
    if (options.on_step) options.on_step(step);
    const auto start = std::chrono::steady_clock::now();
    const StepBatch b = batch(step);
    optimizer.ZeroGrad();
    StepResult result = executor.RunStep(b.microbatches, b.loss_scale, origin);
    double step_loss = 0;
    for (const auto& [m, l] : result.losses) step_loss += l;
    if (group != nullptr) step_loss = AllReduceSum(*group, step_loss, options.comm_timeout);
    // Every rank sees the same reduced loss, so all stop together, before an
    // update that would spoil the weights; the last checkpoint stays valid.
    if (!std::isfinite(step_loss)) {
      throw Error("step " + std::to_string(step) + ": the loss is " + std::to_string(step_loss) +
                  "; stopping before the update" +
                  (options.checkpoint_dir.empty()
                       ? std::string()
                       : " (the last checkpoint in " + options.checkpoint_dir + " is intact)"));
    }
    if (options.dp_group != nullptr) {
      for (auto& [s, stage] : stages) AllReduceStageGrads(*stage, *options.dp_group, options.comm_timeout);
    }
    // Clip by the norm over every stage of every rank, so the clipped
    // gradients equal single-process clipping (per-stage norms would not).
    const double norm = GlobalGradNorm(params, group, options.dp_size, options.comm_timeout);
    if (options.clip_norm > 0 && norm > options.clip_norm) {
      torch::NoGradGuard no_grad;
      const double scale = options.clip_norm / (norm + 1e-6);
      for (at::Tensor& p : params) {
        if (p.grad().defined()) p.grad().mul_(scale);
      }
    }
    const double lr = lr_schedule.At(step);
    optimizer.Step(lr);
    summary.lrs.push_back(lr);
    summary.grad_norms.push_back(norm);
    summary.losses.push_back(step_loss);
    summary.step_times_ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    last_events = std::move(result.events);
    last_peak = result.peak_activation_bytes;
    const int done = step + 1;
    if (!options.checkpoint_dir.empty() &&
        (done == options.steps || (options.checkpoint_every > 0 && done % options.checkpoint_every == 0))) {
      const auto save_start = std::chrono::steady_clock::now();
      const std::string tmp = CheckpointDirName(options.checkpoint_dir, done) + ".tmp";
      if (writes_shards) WriteShard(tmp, rank, optimizer);
      if (group != nullptr) Barrier(*group, options.comm_timeout);  // every shard is written
      if (world_rank == 0) PublishCheckpoint(options.checkpoint_dir, done, schedule.ranks, options.manifest_json);
      summary.checkpoint_save_ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - save_start).count();
    }
  }
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
    for (RankId r = 0; r < static_cast<RankId>(peaks.size()) && r < schedule.ranks; ++r) {
      summary.peak_activation_bytes.push_back(peaks[r].at(0));
    }
  }
  if (rank == 0) {
    Timeline& t = summary.last_step;
    t.name = schedule.name;
    t.source = "measured";
    t.ranks = schedule.ranks;
    // The first replica's pipeline (world ranks 0..K-1) stands for all.
    for (RankId r = 0; r < static_cast<RankId>(all.size()) && r < schedule.ranks; ++r) Decode(r, all[r], t);
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
