// What a train run records in its checkpoints, what a resume must match, and
// the flags a plan file fixes (tools/train_manifest.h, tools/train_checks.h).
#include "tools/train_manifest.h"

#include <catch2/catch.hpp>

#include "models/partition.h"
#include "schedules/error.h"
#include "schedules/generators.h"
#include "tools/train_checks.h"

namespace pplab::cli::train_manifest_test {

TEST_CASE("a resume must match the model, seed, batch and data, and names the field that differs", "[train]") {
  TrainOptions o;
  o.checkpoint_dir = "ck";
  const LlamaConfig config = LoadLlamaConfig("tiny");
  const nlohmann::json synthetic = MustMatch(o, config, nullptr);
  CHECK(synthetic.at("data") == "synthetic");
  CHECK_FALSE(synthetic.contains("tokenizer"));
  CHECK(synthetic.at("model") == nlohmann::json::parse(config.ToJson()));
  PreparedText text;
  text.corpus_fingerprint = 0xfedcba9876543210ULL;
  text.tokenizer_fingerprint = 0x10;
  const nlohmann::json with_text = MustMatch(o, config, &text);
  CHECK(with_text.at("corpus") == "fedcba9876543210");
  CHECK(with_text.at("tokenizer") == "0000000000000010");
  CHECK(with_text.at("packed") == false);
  CHECK(with_text.at("val_fraction") == o.val_fraction);
  // Another held-out share trains on other documents: refused; a manifest
  // from before the field was recorded resumes.
  nlohmann::json text_found = with_text;
  text_found["val_fraction"] = 0.4;
  CHECK_THROWS_WITH(CheckResumable(o, with_text, text_found), Catch::Contains("was taken with val_fraction 0.4"));
  text_found.erase("val_fraction");
  CHECK_NOTHROW(CheckResumable(o, with_text, text_found));
  // A fingerprint says what it covers: the files' names count.
  nlohmann::json moved = with_text;
  moved["corpus"] = "0000000000000001";
  CHECK_THROWS_WITH(CheckResumable(o, with_text, moved),
                    Catch::EndsWith("was taken with corpus \"0000000000000001\", this run has \"fedcba9876543210\" "
                                    "(the fingerprint of the --data files' names, as given, and bytes: the same files "
                                    "named another way differ too; give them as the first run did)"));
  CHECK_FALSE(with_text.contains("data"));

  nlohmann::json found = synthetic;
  found["step"] = 4;
  found["schedule"] = "gpipe";  // plan, K, D and partition may change
  CHECK_NOTHROW(CheckResumable(o, synthetic, found));
  found["seq_len"] = o.seq_len + 1;
  CHECK_THROWS_WITH(CheckResumable(o, synthetic, found),
                    Catch::Contains("ck was taken with seq_len " + std::to_string(o.seq_len + 1)) &&
                        Catch::Contains("this run has " + std::to_string(o.seq_len)));
  found = synthetic;
  found.erase("seed");
  CHECK_THROWS_WITH(CheckResumable(o, synthetic, found), Catch::Contains("seed (none)"));
}

TEST_CASE("a change of precision on resume is said in one line, none when it stays", "[train]") {
  TrainOptions o;
  o.checkpoint_dir = "ck";
  CHECK(PrecisionChangeNote(o, {{"precision", "fp32"}}).empty());
  CHECK(PrecisionChangeNote(o, nlohmann::json::object()).empty());  // written before precisions: fp32
  o.precision = "bf16";
  CHECK(PrecisionChangeNote(o, nlohmann::json::object()) ==
        "the checkpoint in ck was trained in fp32; this run continues it in bf16 (weights and AdamW state are fp32 "
        "in both)");
  CHECK(PrecisionChangeNote(o, {{"precision", "bf16"}}).empty());
}

TEST_CASE("a change of --lr, --warmup-steps or --clip-norm on resume is said in one line, none when they stay",
          "[train]") {
  TrainOptions o;
  o.lr = 0.001;
  o.warmup_steps = 30;
  const nlohmann::json found = {{"lr_schedule", {{"lr", 0.001}, {"warmup_steps", 30}, {"total_steps", 40}}}};
  CHECK(LrChangeNote(o, found, 2).empty());
  CHECK(LrChangeNote(o, nlohmann::json::object(), 2).empty());
  o.lr = 0.5;
  o.warmup_steps = 0;
  CHECK(LrChangeNote(o, found, 2) ==
        "the checkpoint was trained with --lr 0.001 --warmup-steps 30; this run continues with --lr 0.5 "
        "--warmup-steps 0 from step 2 on");
  // --clip-norm, recorded since 2026-12-07: a change is said, none in older checkpoints.
  CHECK(ClipChangeNote(o, found, 2).empty());
  CHECK(ClipChangeNote(o, {{"clip_norm", o.clip_norm}}, 2).empty());
  CHECK(ClipChangeNote(o, {{"clip_norm", 0.0}}, 2) ==
        "the checkpoint was trained with --clip-norm 0 (no clipping); this run clips at 1.0 from step 2 on");
}

TEST_CASE("the run manifest holds what a resume must match, the plan and the learning-rate schedule", "[train]") {
  TrainOptions o;
  o.dp = 2;
  o.steps = 40;
  o.warmup_steps = 5;
  const LlamaConfig config = LoadLlamaConfig("tiny");
  const Partition partition = MakePartition(config, 2, "uniform");
  const Schedule schedule = Generate("1f1b", {2, 4, 0});
  const nlohmann::json must_match = MustMatch(o, config, nullptr);
  const nlohmann::json m = RunManifest(o, must_match, schedule, config, partition, Precision::kBf16);
  for (const auto& [key, value] : must_match.items()) CHECK(m.at(key) == value);
  CHECK(m.at("schedule") == "1f1b");
  CHECK(m.at("ranks") == 2);
  CHECK(m.at("dp") == 2);
  CHECK(m.at("partition") == partition.ToString());
  CHECK(m.at("precision") == "bf16");
  CHECK(m.at("parameter_elements") == StageParams(config, partition, 0) + StageParams(config, partition, 1));
  CHECK(m.at("lr_schedule").at("total_steps") == 40);
  CHECK(m.at("lr_schedule").at("warmup_steps") == 5);
  CHECK(m.at("rng").at("seed") == o.seed);
}

TEST_CASE("a flag that contradicts the plan file is refused by name, one that agrees is not", "[train]") {
  const Schedule schedule = Generate("interleaved-1f1b", {2, 4, 2});
  TrainOptions o;
  CHECK_NOTHROW(CheckPlanFlags(o, schedule));  // no plan file: nothing to contradict
  o.plan_file = "plan.json";
  o.ranks = 2;
  o.given_ranks = true;
  o.virtual_stages = 2;
  o.given_virtual = true;
  CHECK_NOTHROW(CheckPlanFlags(o, schedule));
  o.microbatches = 8;
  o.given_microbatches = true;
  CHECK_THROWS_WITH(CheckPlanFlags(o, schedule),
                    "--microbatches 8 conflicts with --plan plan.json (M 4): drop the flag, the plan fixes it");
  o.given_microbatches = false;
  o.virtual_stages = 1;
  CHECK_THROWS_WITH(CheckPlanFlags(o, schedule), Catch::Contains("--virtual 1") && Catch::Contains("(v 2)"));
}

}  // namespace pplab::cli::train_manifest_test
