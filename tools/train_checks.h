// What `pplab train` checks once, before any worker starts, besides the plan
// and the checkpoint (train_manifest.h): flags against a plan file, the run
// folder, and what the workers hold (for tools/local_capacity.h). Each
// throws pplab::Error with one line naming the flag or path at fault and how
// to proceed.
#pragma once

#include <vector>

#include "models/llama_config.h"
#include "models/partition.h"
#include "schedules/schedule.h"
#include "tools/local_capacity.h"
#include "tools/train_options.h"

namespace pplab::cli {

// The model's weights as they will be made: a rotary scaling pplab computes
// (else --model is refused, naming the type), and with --init-from the
// files checked against the config (models/pretrained.h) and text training
// given the model's own --tokenizer. Returns how many values the files
// give (0 without --init-from), for the run to say.
int64_t CheckModelWeights(const TrainOptions& o, const LlamaConfig& config);

// --tp T and --sequence-parallel against the model and --seq-len (train
// and profile alike): T must divide its heads, key/value heads and
// intermediate size; sequence parallelism needs T >= 2 and T dividing the
// sequence.
void CheckTensorParallelFlags(const LlamaConfig& config, int tp, bool sequence_parallel, int64_t seq_len);

// A --plan fixes the schedule, K, M and v: a flag given with it that says
// otherwise is refused.
void CheckPlanFlags(const TrainOptions& o, const Schedule& schedule);

// --cuda-graphs, before any worker starts: a CUDA device and a build with
// CUDA, a plan whose backwards are whole (no I and W), and neither --tp
// nor --recompute (runtime/exec/graphed_stage.h says why).
void CheckCudaGraphs(const TrainOptions& o, const Schedule& schedule);
// The parts `pplab profile --cuda-graphs` shares: no --tp (T > 1), and a
// CUDA `device` on a build with CUDA (any device under the tests'
// stand-in, PPLAB_TEST_GRAPHS=rerun).
void CheckCudaGraphsTensorParallel(int tp);
void CheckCudaGraphsDevice(const std::string& device);

// --sim-cost, before any worker starts: the file loads as a cost model of
// the schedule's stages and, where it is a profile (meta from `pplab
// profile`), was measured with the run's microbatch size, sequence length,
// precision, partition and the model's shape; it is none of the run's
// outputs. Throws pplab::Error naming the file and what differs.
void CheckSimCost(const TrainOptions& o, const LlamaConfig& config, const Partition& partition,
                  const Schedule& schedule);

// A new run never mixes into an earlier one's run folder or checkpoints: it
// continues it (--resume), replaces it (--overwrite) or is refused. Returns
// true when there is an earlier run to replace: the caller removes it with
// RemoveEarlierRun once every check that could refuse the run has passed,
// so that a refused run never costs the one it was to replace. `given`: the
// options as parsed; `o`: with the output paths filled in (WithDefaults).
// Files given a path by flag (e.g. --trace t.json) are the user's to
// overwrite.
bool ClaimOutputs(const TrainOptions& given, const TrainOptions& o);

// Removes the earlier run's files in --out and its checkpoints (--overwrite),
// --out's own checkpoints folder too where the run's are elsewhere.
void RemoveEarlierRun(const TrainOptions& given, const TrainOptions& o);

// An exclusive lock on the run's folders (--out, --checkpoint-dir, made by
// CheckOutputs) for as long as it lives: a second run into one of them is
// refused, naming the flag, before it removes, prunes or writes anything
// (two at once both finished, each over the other's checkpoints and
// metrics). flock(2) on the folders themselves, so no file is added; the
// kernel lets go when the process ends, killed too. Forked workers close
// their copy (close-on-exec), the launcher keeps it.
class RunFolderLock {
 public:
  explicit RunFolderLock(const TrainOptions& o);
  ~RunFolderLock();
  RunFolderLock(const RunFolderLock&) = delete;
  RunFolderLock& operator=(const RunFolderLock&) = delete;

 private:
  std::vector<int> fds_;
};

// The folders a run made that were not there before it (a folder its
// parents too, deepest first). A run refused or failed leaves none of them
// behind empty: the destructor, while an exception unwinds, or
// RemoveEmpty(), removes each that is still empty (rmdir(2), which removes
// nothing else), so a refused run leaves the tree as it found it.
class MadeFolders {
 public:
  MadeFolders();
  MadeFolders(MadeFolders&& other) noexcept;
  MadeFolders& operator=(MadeFolders&&) = delete;
  MadeFolders(const MadeFolders&) = delete;
  MadeFolders& operator=(const MadeFolders&) = delete;
  ~MadeFolders();

  // Makes `dir` and its missing parents, recording those it made; returns
  // the error, empty where it exists as a folder now.
  std::string Make(const std::string& dir);
  // Removes the recorded folders that are empty.
  void RemoveEmpty();

 private:
  std::vector<std::string> made_;
  int exceptions_;  // std::uncaught_exceptions() when this began
};

// With an earlier run to replace: refuses an input (--plan, --model,
// --tokenizer, --init-from, --data) that is one of the files
// RemoveEarlierRun would remove, such as a tokenizer copy in the
// checkpoints, naming the flag.
void CheckOverwriteKeepsInputs(const TrainOptions& given, const TrainOptions& o);

// The run's outputs can be written, checked before any worker starts rather
// than by a worker at its first checkpoint or after its last step: the
// folders (--out, --checkpoint-dir, --dump-grads) are made here, and each
// file (--metrics, --trace, --sim-trace, --out's picture) must be one that
// WriteTextFile can write (CheckWritable), and none may name another or a
// file the run reads (--plan, --model, --tokenizer, --init-from, --data),
// nor take a name the checkpoints use in --checkpoint-dir; and no --data
// folder may hold --out, --checkpoint-dir or --dump-grads. Throws
// pplab::Error naming the flag and the path, leaving no folder it made.
// Returns the folders it made, for the run to remove if it fails while
// they are empty.
MadeFolders CheckOutputs(const TrainOptions& o);

// What `nproc` local processes of `copies` copies of the model (2 for
// DualPipe) hold, for CheckLocalCapacity: every replica's parameters, their
// state in host memory on a CPU device only.
LocalLoad TrainLoad(const TrainOptions& o, int nproc, const LlamaConfig& config, const Partition& partition,
                    int copies);

}  // namespace pplab::cli
