#include "tools/train_manifest.h"

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "runtime/data/fnv.h"
#include "runtime/train/checkpoint.h"
#include "schedules/error.h"

namespace pplab::cli {

nlohmann::json MustMatch(const TrainOptions& o, const LlamaConfig& config, const PreparedText* text) {
  nlohmann::json must_match = {{"model", nlohmann::json::parse(config.ToJson())},
                               {"seed", o.seed},
                               {"batch_size", o.batch_size},
                               {"seq_len", o.seq_len}};
  if (text != nullptr) {
    must_match["tokenizer"] = FnvHex(text->tokenizer_fingerprint);
    must_match["corpus"] = FnvHex(text->corpus_fingerprint);
    must_match["packed"] = o.packed;
    must_match["val_fraction"] = o.val_fraction;  // which documents train
  } else {
    must_match["data"] = "synthetic";
  }
  return must_match;
}

std::string CheckpointTokenizerHint(const TrainOptions& o, const nlohmann::json& found) {
  if (!o.tokenizer.empty() || !found.contains("tokenizer_file") || !found["tokenizer_file"].is_string()) return "";
  const std::filesystem::path copy =
      std::filesystem::path(o.checkpoint_dir) / found["tokenizer_file"].get<std::string>();
  std::error_code ec;
  if (!std::filesystem::is_regular_file(copy, ec)) return "";
  return "; the checkpoint was trained with the tokenizer it holds: give --tokenizer " + copy.string() +
         " to continue it";
}

void CheckResumable(const TrainOptions& o, const nlohmann::json& must_match, const nlohmann::json& found) {
  // Text against synthetic tokens is one difference, said as such (the
  // fields below differ by absence: "taken with data (none)" of a
  // checkpoint trained on text).
  const bool was_text = found.contains("corpus"), is_text = must_match.contains("corpus");
  if (was_text != is_text) {
    throw Error("--resume: the checkpoint in " + o.checkpoint_dir + " was trained on " +
                (was_text ? "text (--data)" : "synthetic tokens (--synthetic)") + ", this run " +
                (is_text ? "on text" : "on synthetic tokens") + "; resume it as it was trained");
  }
  // Another tokenizer first: the model's vocab_size differs by it too, and
  // "taken with model {...}" hid the cause.
  std::vector<std::string> keys = {"tokenizer"};
  for (const auto& item : must_match.items()) {
    if (item.key() != "tokenizer") keys.push_back(item.key());
  }
  for (const std::string& key : keys) {
    if (!must_match.contains(key)) continue;
    const nlohmann::json& value = must_match[key];
    if (key == "val_fraction" && !found.contains(key)) continue;  // recorded since 2026-11-29
    if (!found.contains(key) || found[key] != value) {
      // The fingerprints say what they cover: the same files under other
      // names (another working directory, a moved folder) differ too.
      const std::string why =
          key == "corpus"      ? " (the fingerprint of the --data files' names, as given, and bytes: the same files "
                                 "named another way differ too; give them as the first run did)"
          : key == "tokenizer" ? " (the fingerprint of the tokenizer file's bytes)" + CheckpointTokenizerHint(o, found)
                               : "";
      throw Error("--resume: the checkpoint in " + o.checkpoint_dir + " was taken with " + key + " " +
                  (found.contains(key) ? found[key].dump() : std::string("(none)")) + ", this run has " + value.dump() +
                  why);
    }
  }
}

std::string PrecisionChangeNote(const TrainOptions& o, const nlohmann::json& found) {
  // A checkpoint without the field was written before precisions existed, in fp32.
  const std::string was = found.contains("precision") && found["precision"].is_string()
                              ? found["precision"].get<std::string>()
                              : std::string("fp32");
  const std::string now = PrecisionName(ParsePrecision(o.precision));
  if (was == now) return "";
  return "the checkpoint in " + o.checkpoint_dir + " was trained in " + was + "; this run continues it in " + now +
         " (weights and AdamW state are fp32 in both)";
}

std::string LrChangeNote(const TrainOptions& o, const nlohmann::json& found, int step) {
  if (!found.contains("lr_schedule") || !found["lr_schedule"].is_object()) return "";
  const nlohmann::json& l = found["lr_schedule"];
  if (!l.contains("lr") || !l.contains("warmup_steps")) return "";
  if (l["lr"] == o.lr && l["warmup_steps"] == o.warmup_steps) return "";
  return "the checkpoint was trained with --lr " + l["lr"].dump() + " --warmup-steps " + l["warmup_steps"].dump() +
         "; this run continues with --lr " + nlohmann::json(o.lr).dump() + " --warmup-steps " +
         std::to_string(o.warmup_steps) + " from step " + std::to_string(step) + " on";
}

std::string ClipChangeNote(const TrainOptions& o, const nlohmann::json& found, int step) {
  if (!found.contains("clip_norm") || !found["clip_norm"].is_number() || found["clip_norm"] == o.clip_norm) return "";
  const auto norm = [](const nlohmann::json& n) { return n == 0 ? std::string("0 (no clipping)") : n.dump(); };
  return "the checkpoint was trained with --clip-norm " + norm(found["clip_norm"]) + "; this run clips at " +
         norm(nlohmann::json(o.clip_norm)) + " from step " + std::to_string(step) + " on";
}

int CheckResumePoint(const TrainOptions& o, const std::string& latest, const nlohmann::json& must_match) {
  // A truncated or missing shard is named here, before any worker starts.
  const nlohmann::json found = nlohmann::json::parse(CheckShardSizes(latest));
  CheckResumable(o, must_match, found);
  const int step = found.at("step").get<int>();
  // A step folder renamed or swapped by hand: the run would continue from
  // the manifest's step under the other's name.
  const std::string named = std::filesystem::path(CheckpointDirName("", step)).filename().string();
  if (std::filesystem::path(latest).filename().string() != named) {
    throw Error("--resume: " + latest + " holds the checkpoint of step " + std::to_string(step) + ", whose folder is " +
                named + ": renamed by hand? Give each step folder its own name back");
  }
  if (step > o.steps) {
    throw Error("--steps " + std::to_string(o.steps) + " is below the step of the checkpoint to resume (" + latest +
                ", step " + std::to_string(step) + "): pass --steps above it to continue");
  }
  // The notes say how the continued run differs from the checkpoint's:
  // shown under -q too, which silences progress, not changes.
  if (step == o.steps) return step;
  // Later checkpoints kept beside the one `latest` names (rolled back by
  // hand, to redo steps) that this run publishes its own over: they were
  // replaced unsaid. Said here, before any is.
  std::string replaced;
  for (const auto& [n, path] : CheckpointsAbove(o.checkpoint_dir, step)) {
    if (n > o.steps || (n != o.steps && (o.checkpoint_every <= 0 || n % o.checkpoint_every != 0))) continue;
    replaced += (replaced.empty() ? "" : ", ") + path;
  }
  if (!replaced.empty()) {
    std::fprintf(stderr,
                 "pplab: note: resuming from %s, this run replaces the later checkpoint(s) %s as it reaches their "
                 "steps (move them aside to keep them)\n",
                 std::filesystem::path(latest).filename().string().c_str(), replaced.c_str());
  }
  for (const std::string& note :
       {PrecisionChangeNote(o, found), LrChangeNote(o, found, step), ClipChangeNote(o, found, step)}) {
    if (!note.empty()) std::fprintf(stderr, "pplab: note: %s\n", note.c_str());
  }
  if (found.contains("lr_schedule") && found["lr_schedule"].at("total_steps") != o.steps) {
    std::fprintf(stderr,
                 "pplab: note: the learning-rate schedule was recorded for %s steps; it now decays over --steps "
                 "%d from step %d on\n",
                 found["lr_schedule"]["total_steps"].dump().c_str(), o.steps, step);
  }
  return step;
}

nlohmann::json RunManifest(const TrainOptions& o, const nlohmann::json& must_match, const Schedule& schedule,
                           const LlamaConfig& config, const Partition& partition, Precision precision) {
  nlohmann::json manifest = must_match;
  manifest["schedule"] = schedule.name;
  manifest["ranks"] = schedule.ranks;
  manifest["dp"] = o.dp;
  manifest["tp"] = o.tp;  // not a field to match: checkpoints hold whole tensors
  manifest["sequence_parallel"] = o.sequence_parallel;
  manifest["partition"] = partition.ToString();
  // Not a field a resume must match: weights and AdamW state are fp32 in
  // both precisions, so a checkpoint continues in either (the launcher says so).
  manifest["precision"] = PrecisionName(precision);
  int64_t parameter_elements = 0;
  for (int s = 0; s < partition.NumStages(); ++s) parameter_elements += StageParams(config, partition, s);
  manifest["parameter_elements"] = parameter_elements;
  // The LR schedule is a function of the step and these; training draws no
  // random numbers beyond the seed (weights from (seed, name), the data
  // order from (seed, epoch), no dropout), so the seed and the data position
  // are the whole random state.
  manifest["lr_schedule"] = {{"lr", o.lr},
                             {"warmup_steps", o.warmup_steps},
                             {"total_steps", o.steps},
                             {"kind", "linear warm-up, cosine to 0"}};
  manifest["rng"] = {{"seed", o.seed}, {"stateful_generators", 0}};
  manifest["clip_norm"] = o.clip_norm;
  return manifest;
}

}  // namespace pplab::cli
