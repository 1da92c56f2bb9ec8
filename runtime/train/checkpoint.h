// Distributed checkpoints: one shard per pipeline rank, a manifest, and an
// atomic publish.
//
// Layout: DIR/step-000012/{rank-0.shard, rank-1.shard, ..., manifest.json}
// and DIR/latest holding "step-000012". A checkpoint is written into
// DIR/step-000012.tmp and renamed when every shard and the manifest are
// there; `latest` is replaced (write + rename) only after that, so a crash
// at any moment leaves the previous checkpoint loadable. A shard (pplab's own
// format, shard_file.h) maps each parameter's global name to its value and
// AdamW moments, so a checkpoint loads into any partition, schedule or
// number of ranks.
//
// Identity: every shard records the run id, the step, its rank and a hash
// of the manifest's identity fields (IdentityHash); loading checks all four
// against the manifest, so shards of two runs or two steps never mix even
// when their checksums are right.
#pragma once

#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "runtime/train/adamw.h"
#include "schedules/units.h"

namespace pplab {

// What every rank knows about the checkpoint it is writing.
struct CheckpointIdentity {
  std::string run_id;         // the run that writes it
  std::string manifest_json;  // the identity fields: a JSON object, the same on every rank
};

// FNV-1a 64 (hex) of the run id, the step and `fields` (a JSON object).
std::string IdentityHash(const std::string& run_id, int64_t step, const std::string& fields_json);

// A tensor as the checkpoint holds it, from this rank's tensor `t` of
// parameter `name` (its value or a moment), or the way back. Checkpoints
// hold the whole model: under tensor parallelism (models/tensor_parallel.h)
// a rank holds a share of some parameters, gathered from its group on the
// way out (every rank of the group makes the same calls in the same order)
// and cut again on the way in.
using TensorMap = std::function<at::Tensor(const std::string& name, const at::Tensor& t)>;

// Writes this rank's shard (parameters and optimizer state of `optimizer`,
// only those named in `only` when it is given) of step `step` into
// `tmp_dir`, creating it if needed.
void WriteShard(const std::string& tmp_dir, RankId rank, int step, const CheckpointIdentity& id, AdamW& optimizer,
                const std::set<std::string>& only = {});
// What WriteShard writes, each tensor through `whole` (null: as it is).
std::vector<std::pair<std::string, at::Tensor>> ShardTensors(AdamW& optimizer, const std::set<std::string>& only,
                                                             const TensorMap& whole);
// Writes `tensors` (ShardTensors) as rank `rank`'s shard.
void WriteShardTensors(const std::string& tmp_dir, RankId rank, int step, const CheckpointIdentity& id,
                       const std::vector<std::pair<std::string, at::Tensor>>& tensors);

// Rank 0, once every rank's shard is in `tmp_dir`: writes the manifest (the
// identity fields, `extra_json`'s fields, the step, the run id and per-file
// sizes and checksums), renames `tmp_dir` to DIR/step-NNNNNN and points
// DIR/latest at it. Returns the published path. Throws pplab::Error naming
// the path that cannot be written; the previous checkpoint stays intact.
std::string PublishCheckpoint(const std::string& dir, int step, int shards, const CheckpointIdentity& id,
                              const std::string& extra_json = "{}");

// Removes all but the last `keep` of `published` (oldest first): the
// checkpoints this run wrote, and the one it resumed from. Never the last
// one, and never a directory this run did not list (another run's, or a
// higher step left by an earlier run).
void PruneCheckpoints(std::vector<std::string>& published, size_t keep);

// The checkpoints of DIR below step `step` (step-NNNNNN folders), oldest
// first: those an interrupted run left when a resumed run continues after
// them, for it to prune.
std::vector<std::string> CheckpointsBelow(const std::string& dir, int step);

// The checkpoints of DIR above step `step`, by step, with their steps:
// those past the one `latest` names (rolled back by hand), which a resumed
// run must not write over.
std::vector<std::pair<int, std::string>> CheckpointsAbove(const std::string& dir, int step);

// The path of DIR's latest checkpoint, or "" if DIR has no `latest`.
// Throws pplab::Error (one printable line) when `latest` is not a
// checkpoint name or names a directory that does not exist.
// `for_training`: the error's hint names train's --overwrite (generate and
// export-model have none).
std::string LatestCheckpoint(const std::string& dir, bool for_training = true);

// The checkpoint a run continues from: removes `*.tmp` directories left by
// failed saves, and returns LatestCheckpoint(dir). When step directories
// exist but `latest` does not, throws: the run would silently start over.
std::string PrepareCheckpointDir(const std::string& dir);

// True when `dir` holds checkpoints (a `latest` file or step-* directories).
bool HoldsCheckpoints(const std::string& dir);

// Whether an entry of a checkpoint directory by this name is the
// checkpoints' own: `latest`, a step-* directory (or its .tmp), a tokenizer
// copy (tokenizer-*.model or .json). RemoveCheckpoints removes those, and
// saving replaces them.
bool IsCheckpointEntry(const std::string& name);

// Removes DIR's checkpoints: its IsCheckpointEntry entries; nothing else.
void RemoveCheckpoints(const std::string& dir);

// Reads and checks a checkpoint's manifest: every field of the right type
// and range (the error names the file and the field), shard names plain
// names inside the checkpoint. Does not read the shards. Returns it as JSON text.
std::string ReadManifest(const std::string& path);

// ReadManifest, then every shard present with the recorded size, from the
// file system (cheap: for the launcher, before the workers read them).
// Throws pplab::Error naming the file that is missing or of another size.
// Returns the manifest as JSON text.
std::string CheckShardSizes(const std::string& path);

// ReadManifest, then every shard present with the recorded size and
// checksum. Throws pplab::Error naming the file that is missing or corrupted.
std::string VerifyCheckpoint(const std::string& path);

// Loads every parameter of `optimizer` (and its AdamW state) by name from
// the shards of the checkpoint at `path`, whose manifest VerifyCheckpoint()
// returned, each tensor through `share` (null: as it is). Throws
// pplab::Error naming a shard of another run or step, a parameter the
// checkpoint lacks or whose shape differs.
void LoadCheckpoint(const std::string& path, const std::string& manifest_json, AdamW& optimizer,
                    const TensorMap& share = nullptr);

// Writes the parameters (no optimizer state) of DIR's latest checkpoint, or
// of the checkpoint directory `path` itself, as one file for single-process
// use: a pickled dictionary from global name to tensor (`torch.load` reads
// it); or, where `out_file` ends in .safetensors, a safetensors file under
// Hugging Face's names (a tied head left to the embedding), in F32 or, with
// `bf16`, BF16, which `train --init-from` and Hugging Face's loaders read;
// or, where `out_file` is a folder (it exists, or ends in '/'), a model's
// folder as Hugging Face keeps one: model.safetensors, config.json
// (HuggingFaceConfigJson) and, from a run on text, its tokenizer
// (tokenizer.model, or tokenizer.json when the run read one).
// Throws unless every parameter of the model (the manifest's
// `parameter_elements`) is written. Returns the number of tensors written.
int ExportModel(const std::string& path, const std::string& out_file, bool bf16 = false);

// `path` itself when it is a checkpoint (holds manifest.json), else the
// latest checkpoint of the checkpoint directory `path`. Throws pplab::Error
// when there is none.
std::string ResolveCheckpoint(const std::string& path);

// The number of steps a checked manifest records.
int CheckpointStep(const std::string& manifest_json);

std::string CheckpointDirName(const std::string& dir, int step);

}  // namespace pplab
