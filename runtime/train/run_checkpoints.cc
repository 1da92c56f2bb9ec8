#include "runtime/train/run_checkpoints.h"

#include <torch/torch.h>

#include <chrono>
#include <filesystem>

#include "runtime/comm/collectives.h"
#include "runtime/comm/device_wait.h"
#include "runtime/train/adamw.h"
#include "runtime/train/tensor_parallel_step.h"
#include "schedules/error.h"
#include "schedules/file_io.h"

namespace pplab {
namespace {

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

}  // namespace

RunCheckpoints::RunCheckpoints(const Schedule& schedule, RankId rank, RankId world_rank, ProcessGroupHandle* group,
                               const TrainerOptions& options, bool split, bool sharded)
    : schedule_(schedule),
      rank_(rank),
      world_rank_(world_rank),
      group_(group),
      options_(options),
      split_(split),
      sharded_(sharded),
      identity_{options.run_id, options.manifest_json} {
  // World rank k T of the first pipeline is its pipeline rank k
  // (runtime/train/worker_setup.h numbers them). Replica 0's pipelines
  // (world ranks 0..T K-1) gather the checkpoint's tensors; its first
  // writes them. The others hold the same values.
  const int T = split ? options.tp_size : 1;
  gathers_shards_ = world_rank < schedule.ranks * T;
  writes_shards_ = gathers_shards_ && world_rank % T == 0;
  if (!options.checkpoint_dir.empty()) {
    CheckSharedCheckpointDir(options.checkpoint_dir, options.run_id, world_rank, group, options.comm_timeout);
  }
}

int RunCheckpoints::Resume(AdamW& optimizer, double& load_ms) {
  load_ms = 0;
  if (!options_.resume || options_.checkpoint_dir.empty()) return 0;
  const std::string latest = LatestCheckpoint(options_.checkpoint_dir);
  if (latest.empty()) return 0;
  const auto start = std::chrono::steady_clock::now();
  const std::string manifest = VerifyCheckpoint(latest);
  if (options_.check_resume) options_.check_resume(manifest);
  const int step = CheckpointStep(manifest);
  if (step > options_.steps) {
    throw Error("--steps " + std::to_string(options_.steps) + " is below the step of the checkpoint to resume (" +
                latest + ", step " + std::to_string(step) + "): pass --steps above it to continue");
  }
  LoadCheckpoint(latest, manifest, optimizer,
                 split_ ? CutShare(options_.tp_rank, options_.tp_size, options_.tp_split_dim) : nullptr);
  optimizer.KeepShares();  // sharded: the whole moments loaded, down to this replica's share
  // The interrupted run's older checkpoints count against --keep-checkpoints
  // too (it would have pruned them as it went on).
  if (world_rank_ == 0) published_ = CheckpointsBelow(options_.checkpoint_dir, step);
  published_.push_back(latest);
  load_ms = MsSince(start);
  return step;
}

bool RunCheckpoints::Due(int done) const {
  return !options_.checkpoint_dir.empty() &&
         (done == options_.steps || (options_.checkpoint_every > 0 && done % options_.checkpoint_every == 0));
}

double RunCheckpoints::Save(int done, AdamW& optimizer, const std::set<std::string>& first_copy_names) {
  const auto start = std::chrono::steady_clock::now();
  const std::string tmp = CheckpointDirName(options_.checkpoint_dir, done) + ".tmp";
  // Every replica takes part; the first writes the whole moments.
  if (sharded_) GatherMoments(optimizer, *options_.dp_group, options_.comm_timeout);
  if (gathers_shards_) {
    const auto tensors =
        ShardTensors(optimizer, first_copy_names,
                     split_ ? GatherShares(*options_.tp_group, options_.tp_split_dim, options_.comm_timeout) : nullptr);
    // On a GPU the gathers above are only queued; the write's host copies
    // would wait for them without a bound where a peer never came.
    if ((sharded_ || split_) && !tensors.empty()) {
      WaitForDevice(tensors.front().second.device(), options_.comm_timeout,
                    "rank " + std::to_string(world_rank_) + " gathering its checkpoint's tensors");
    }
    if (writes_shards_) WriteShardTensors(tmp, rank_, done, identity_, tensors);
  }
  if (sharded_) optimizer.KeepShares();                            // the whole moments, gathered for the save, go
  if (group_ != nullptr) Barrier(*group_, options_.comm_timeout);  // every shard is written
  if (world_rank_ == 0) {
    published_.push_back(PublishCheckpoint(options_.checkpoint_dir, done, schedule_.ranks, identity_,
                                           options_.manifest_for_step ? options_.manifest_for_step(done) : "{}"));
    PruneCheckpoints(published_, options_.keep_checkpoints);
  }
  return MsSince(start);
}

}  // namespace pplab
