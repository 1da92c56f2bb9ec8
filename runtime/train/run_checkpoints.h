// The checkpoints of one training run, as the trainer takes them: the
// check that every rank sees one directory, the resume, and each save with
// its publishing and pruning (runtime/train/checkpoint.h reads and writes
// the files).
#pragma once

#include <set>
#include <string>
#include <vector>

#include "runtime/train/checkpoint.h"
#include "runtime/train/trainer.h"
#include "schedules/schedule.h"

namespace pplab {

class AdamW;
struct ProcessGroupHandle;

class RunCheckpoints {
 public:
  // Every rank of the world builds one, with its pipeline rank and world
  // rank; `group` is the world's (null for one process). `split`: tensor
  // parallelism over options.tp_size ranks; `sharded`: the optimizer's
  // moments split over the data-parallel replicas. With a checkpoint
  // directory, rank 0 prepares it and every rank checks that it sees it
  // (pplab::Error naming --checkpoint-dir if one does not).
  RunCheckpoints(const Schedule& schedule, RankId rank, RankId world_rank, ProcessGroupHandle* group,
                 const TrainerOptions& options, bool split, bool sharded);

  // Loads the latest checkpoint into `optimizer` where the run resumes and
  // one exists; returns the step it holds (0 where none) and sets `load_ms`.
  // Throws pplab::Error when that step is past options.steps.
  int Resume(AdamW& optimizer, double& load_ms);

  // Whether the run saves after `done` steps.
  bool Due(int done) const;

  // Saves the state after `done` steps (every rank of the world calls it),
  // publishes it and prunes the oldest; returns the milliseconds it took.
  double Save(int done, AdamW& optimizer, const std::set<std::string>& first_copy_names);

 private:
  const Schedule& schedule_;
  RankId rank_, world_rank_;
  ProcessGroupHandle* group_;
  const TrainerOptions& options_;
  bool split_, sharded_;
  CheckpointIdentity identity_;
  bool gathers_shards_ = false, writes_shards_ = false;
  std::vector<std::string> published_;  // checkpoints this run may prune, oldest first
};

}  // namespace pplab
