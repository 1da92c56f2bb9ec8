// Distributed checkpoints: one shard per pipeline rank, a manifest, and an
// atomic publish.
//
// Layout: DIR/step-000012/{rank-0.pt, rank-1.pt, ..., manifest.json} and
// DIR/latest holding "step-000012". A checkpoint is written into
// DIR/step-000012.tmp and renamed when every shard and the manifest are
// there; `latest` is replaced (write + rename) only after that, so a crash
// at any moment leaves the previous checkpoint loadable. A shard maps each
// parameter's global name to its value and AdamW moments, so a checkpoint
// loads into any partition, schedule or number of ranks.
#pragma once

#include <string>
#include <vector>

#include "runtime/train/adamw.h"
#include "schedules/units.h"

namespace pplab {

// Writes this rank's shard (parameters and optimizer state of `optimizer`)
// into `tmp_dir`, creating it if needed.
void WriteShard(const std::string& tmp_dir, RankId rank, AdamW& optimizer);

// Rank 0, once every rank's shard is in `tmp_dir`: writes the manifest
// (`manifest_json` plus step and per-file sizes and checksums), renames
// `tmp_dir` to DIR/step-NNNNNN, points DIR/latest at it and removes
// checkpoints older than the previous one. Throws pplab::Error naming the
// path that cannot be written; the previous checkpoint stays intact.
void PublishCheckpoint(const std::string& dir, int step, int shards, const std::string& manifest_json);

// The path of DIR's latest checkpoint, or "" if DIR has none.
std::string LatestCheckpoint(const std::string& dir);

// Reads and verifies a checkpoint's manifest: every shard present with the
// recorded size and checksum. Returns the manifest JSON text. Throws
// pplab::Error naming the file that is missing or corrupted.
std::string VerifyCheckpoint(const std::string& path);

// Loads every parameter of `optimizer` (and its AdamW state) by name from
// the shards of the checkpoint at `path`, whose manifest VerifyCheckpoint()
// returned. Throws pplab::Error naming a parameter the checkpoint lacks or
// whose shape differs.
void LoadCheckpoint(const std::string& path, const std::string& manifest_json, AdamW& optimizer);

// Writes the parameters (no optimizer state) of DIR's latest checkpoint, or
// of the checkpoint directory `path` itself, as one file for single-process
// use: a pickled dictionary from global name to tensor (`torch.load` reads
// it). Returns the number of parameters written.
int ExportModel(const std::string& path, const std::string& out_file);

// `path` itself when it is a checkpoint (holds manifest.json), else the
// latest checkpoint of the checkpoint directory `path`. Throws pplab::Error
// when there is none.
std::string ResolveCheckpoint(const std::string& path);

// The number of steps a verified manifest records.
int CheckpointStep(const std::string& manifest_json);

std::string CheckpointDirName(const std::string& dir, int step);

}  // namespace pplab
