// What a `pplab train` run records in its checkpoints, and what a resumed
// run must share with the run that wrote them.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "models/llama_config.h"
#include "models/partition.h"
#include "runtime/data/text_prepare.h"
#include "schedules/schedule.h"
#include "sim/precision.h"
#include "tools/train_options.h"

namespace pplab::cli {

// The fields a resumed run must share with the run that wrote the checkpoint
// for its data and weights to continue exactly: the model, seed, batch and
// sequence length, and the tokenizer, corpus and packing of text data. Plan,
// K, D and partition may change (parameters and optimizer state are stored
// by name). `config` has the tokenizer's vocabulary; `text` is null for
// synthetic data.
nlohmann::json MustMatch(const TrainOptions& o, const LlamaConfig& config, const PreparedText* text);

// Where a run resumes without --tokenizer a checkpoint whose manifest
// `found` names the tokenizer copy it holds: "; the checkpoint was trained
// with the tokenizer it holds: give --tokenizer PATH ...", to end an error
// with; else "".
std::string CheckpointTokenizerHint(const TrainOptions& o, const nlohmann::json& found);

// Throws pplab::Error naming the first field of `must_match` that the
// checkpoint's manifest `found` lacks or holds otherwise; a field manifests
// gained later (val_fraction) may be missing from an older one.
void CheckResumable(const TrainOptions& o, const nlohmann::json& must_match, const nlohmann::json& found);

// A resume may change the precision: the checkpoint holds fp32 weights and
// AdamW moments in either, so it continues exactly as far as its state goes;
// only the arithmetic of the steps to come changes. Returns the line that
// says so ("" when the precision is the same).
std::string PrecisionChangeNote(const TrainOptions& o, const nlohmann::json& found);

// A resume may change --lr and --warmup-steps: the schedule then follows the
// new values from the checkpoint's step on. Returns the line that says so
// ("" when they are the checkpoint's, or it recorded none).
std::string LrChangeNote(const TrainOptions& o, const nlohmann::json& found, int step);

// Likewise --clip-norm (recorded in checkpoints since 2026-12-07): the line
// that says a resume clips gradients at another norm, or "".
std::string ClipChangeNote(const TrainOptions& o, const nlohmann::json& found, int step);

// Checks the checkpoint to resume, step directory `latest`, against this run
// before any worker starts (its fields; the workers verify its shards) and
// returns its step. Throws pplab::Error when a field differs or --steps is
// below that step. Says on stderr, unless --quiet, when the precision or the
// length of the learning-rate schedule changes.
int CheckResumePoint(const TrainOptions& o, const std::string& latest, const nlohmann::json& must_match);

// The manifest every checkpoint of the run records: `must_match`, then the
// plan, K, D, partition, precision, parameter count, the learning-rate
// schedule and the random state (the seed: training draws no other random
// numbers).
nlohmann::json RunManifest(const TrainOptions& o, const nlohmann::json& must_match, const Schedule& schedule,
                           const LlamaConfig& config, const Partition& partition, Precision precision);

}  // namespace pplab::cli
