// Checkpoints of multi-process training: resumed after a kill, into another
// plan, K or precision; exported for one process; refused when corrupted or
// of another run; kept when a NaN loss, an unwritable folder or a full disk
// stops the run.
#include <torch/csrc/jit/serialization/pickle.h>
#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/train/shard_file.h"
#include "schedules/file_io.h"
#include "tests/run_pplab.h"
#include "tests/tools/train_cli_test_support.h"

namespace pplab::train_checkpoint_test {
namespace {

// Every tensor of a checkpoint's shards, by key.
std::map<std::string, at::Tensor> ReadCheckpoint(const std::string& dir) {
  std::map<std::string, at::Tensor> all;
  for (const std::string& name : ListDirectory(dir)) {
    const std::string path = dir + "/" + name;
    if (std::filesystem::path(path).extension() != ".shard") continue;
    for (auto& [key, tensor] : DecodeShard(path, ReadBinaryFile(path), nullptr)) all[key] = tensor;
  }
  return all;
}

}  // namespace

TEST_CASE("a run killed with SIGKILL and resumed ends bit-identical to an uninterrupted run", "[train][checkpoint]") {
  const std::string tmp = PPLAB_TEST_TMP_DIR;
  const std::string a = tmp + "/ck_straight", b = tmp + "/ck_killed";
  REQUIRE(std::system(("rm -rf " + a + " " + b).c_str()) == 0);
  const std::string common = "-s zb-h1 -k 2 -m 2 --steps 4 --checkpoint-every 2 --comm-timeout 5 --json";
  const PplabRun straight = Train(common + " --checkpoint-dir " + a);
  REQUIRE(straight.code == 0);
  const PplabRun killed = Train(common + " --checkpoint-dir " + b + " --kill-rank-at 1:3");
  REQUIRE(killed.code != 0);
  CHECK(ReadTextFile(b + "/latest") == "step-000002\n");
  const PplabRun resumed = Train(common + " --checkpoint-dir " + b + " --resume");
  INFO(resumed.out);
  REQUIRE(resumed.code == 0);
  const auto s = nlohmann::json::parse(straight.out.substr(straight.out.find('{')));
  const auto r = nlohmann::json::parse(resumed.out.substr(resumed.out.find('{')));
  CHECK(r["first_step"] == 2);
  CHECK(r["losses"][0] == s["losses"][2]);
  CHECK(r["losses"][1] == s["losses"][3]);
  const auto want = ReadCheckpoint(a + "/step-000004");
  const auto got = ReadCheckpoint(b + "/step-000004");
  REQUIRE(want.size() == got.size());
  for (const auto& [key, tensor] : want) {
    INFO(key);
    REQUIRE(got.count(key) == 1);
    CHECK(torch::equal(got.at(key), tensor));  // weights and AdamW state, bit for bit
  }
}

TEST_CASE("a checkpoint loads into another plan and K and a corrupted one is refused by name", "[train][checkpoint]") {
  const std::string tmp = PPLAB_TEST_TMP_DIR;
  const std::string dir = tmp + "/ck_repartition";
  REQUIRE(std::system(("rm -rf " + dir).c_str()) == 0);
  const std::string common = " --steps 4 --checkpoint-every 2 --json --checkpoint-dir " + dir;
  const PplabRun first = Train("-s 1f1b -k 2 -m 2" + common);
  REQUIRE(first.code == 0);
  WriteTextFile(dir + "/latest", "step-000002\n");  // go back to the middle of that run
  // The same steps on one rank, from the 2-rank checkpoint.
  const PplabRun single = Train("-k 1 -m 1 --resume" + common);
  INFO(single.out);
  REQUIRE(single.code == 0);
  const PplabRun reference = Train("-k 1 -m 1 --steps 4 --json");
  const auto got = nlohmann::json::parse(single.out.substr(single.out.find('{')));
  const auto want = nlohmann::json::parse(reference.out.substr(reference.out.find('{')));
  CHECK(got["first_step"] == 2);
  CHECK(got["losses"][1].get<double>() == Approx(want["losses"][3].get<double>()).epsilon(1e-5));
  // One file for single-process use holds exactly the parameters.
  const std::string model = tmp + "/model.pt";
  const PplabRun exported = Pplab("export-model --checkpoint " + dir + " -o " + model);
  INFO(exported.out);
  REQUIRE(exported.code == 0);
  CHECK_THAT(exported.out, Catch::Contains("wrote 39 parameters"));
  {
    const std::string bytes = ReadTextFile(model);
    const auto dict = torch::pickle_load(std::vector<char>(bytes.begin(), bytes.end())).toGenericDict();
    const auto shards = ReadCheckpoint(dir + "/step-000004");
    CHECK(dict.size() == 39);
    for (const auto& item : dict) CHECK(torch::equal(item.value().toTensor(), shards.at(item.key().toStringRef())));
  }
  CHECK(Pplab("export-model --checkpoint /nonexistent -o " + model).code != 0);
  // A file below a file (root too cannot write there) is one line with the reason.
  const PplabRun below_file = Pplab("export-model --checkpoint " + dir + " -o " + model + "/x.pt");
  CHECK(below_file.code == 2);
  CHECK(below_file.out == "pplab: error: -o: cannot write " + model + "/x.pt: " + model + " is not a directory\n");
  // Another seed (another model and data) cannot resume this checkpoint.
  const PplabRun other = Train("-k 1 -m 1 --resume --seed 99" + common);
  CHECK(other.code != 0);
  CHECK_THAT(other.out, Catch::Contains("--resume: the checkpoint in " + dir + " was taken with seed 1"));
  // A shard cut short: the launcher names it, before any worker starts.
  const std::string shard = dir + "/step-000004/rank-0.shard";
  std::string bytes = ReadTextFile(shard);
  WriteTextFile(shard, bytes.substr(0, bytes.size() - 1));
  const PplabRun cut = Train("-k 1 -m 1 --resume" + common + " --steps 6");
  CHECK(cut.code != 0);
  CHECK(cut.out == "pplab: error: " + shard + ": " + std::to_string(bytes.size() - 1) + " bytes, the manifest says " +
                       std::to_string(bytes.size()) + " (partial or corrupted checkpoint)\n");
  // Flip one byte of a shard: the checksum names it.
  bytes[bytes.size() / 2] ^= 0x5a;
  WriteTextFile(shard, bytes);
  const PplabRun corrupted = Train("-k 1 -m 1 --resume" + common + " --steps 6");  // step 4 is the one to load
  CHECK(corrupted.code != 0);
  CHECK_THAT(corrupted.out, Catch::Contains("rank-0.shard: checksum mismatch"));
}

TEST_CASE("a dualpipe checkpoint holds one copy of the model and resumes into another plan", "[train][checkpoint]") {
  const std::string tmp = PPLAB_TEST_TMP_DIR;
  const std::string dir = tmp + "/ck_dualpipe";
  REQUIRE(std::system(("rm -rf " + dir).c_str()) == 0);
  const std::string common = " --steps 4 --checkpoint-every 2 --json --checkpoint-dir " + dir;
  const PplabRun dual = Train("-s dualpipe -k 2 -m 4 --clip-norm 1" + common);
  INFO(dual.out);
  REQUIRE(dual.code == 0);
  // Each parameter once (with its AdamW state), as any one-copy plan writes it.
  const auto shards = ReadCheckpoint(dir + "/step-000004");
  int params = 0;
  for (const auto& [key, tensor] : shards) params += key.find('#') == std::string::npos;
  CHECK(params == 39);
  const PplabRun exported = Pplab("export-model --checkpoint " + dir + " -o " + tmp + "/dual.pt");
  INFO(exported.out);
  CHECK(exported.code == 0);
  // Steps 3 and 4 again from step 2, by 1F1B: the same losses.
  WriteTextFile(dir + "/latest", "step-000002\n");
  const PplabRun resumed = Train("-s 1f1b -k 2 -m 4 --clip-norm 1 --resume" + common);
  INFO(resumed.out);
  REQUIRE(resumed.code == 0);
  // step-000004 of the first run, past `latest`, is written over: said first.
  CHECK_THAT(resumed.out, Catch::Contains("pplab: note: resuming from step-000002, this run replaces the later "
                                          "checkpoint(s) " +
                                          dir +
                                          "/step-000004 as it reaches their steps (move them aside to keep "
                                          "them)"));
  const auto want = nlohmann::json::parse(dual.out.substr(dual.out.find('{')));
  const auto got = nlohmann::json::parse(resumed.out.substr(resumed.out.find('{')));
  CHECK(got["first_step"] == 2);
  for (int i = 0; i < 2; ++i) {
    CHECK(got["losses"][i].get<double>() == Approx(want["losses"][i + 2].get<double>()).epsilon(1e-5));
    CHECK(got["grad_norms"][i].get<double>() == Approx(want["grad_norms"][i + 2].get<double>()).epsilon(1e-5));
  }
}

TEST_CASE("a NaN loss stops every rank before the update and keeps the last checkpoint", "[train][checkpoint]") {
  const std::string dir = std::string(PPLAB_TEST_TMP_DIR) + "/ck_nan";
  REQUIRE(std::system(("rm -rf " + dir).c_str()) == 0);
  const PplabRun r = Train("-k 2 -m 2 --steps 4 --checkpoint-every 1 --nan-at 3 --checkpoint-dir " + dir);
  INFO(r.out);
  CHECK(r.code != 0);
  CHECK_THAT(r.out, Catch::Contains("step 3: the loss is nan; stopping before the update (the last checkpoint in " +
                                    dir + " is intact)"));
  CHECK(ReadTextFile(dir + "/latest") == "step-000002\n");
  CHECK(Train("-k 2 -m 2 --steps 3 --resume --checkpoint-dir " + dir).code == 0);  // and it resumes
  // Before the first checkpoint, none is claimed.
  REQUIRE(std::system(("rm -rf " + dir).c_str()) == 0);
  const PplabRun first = Train("-k 2 -m 2 --steps 4 --checkpoint-every 2 --nan-at 1 --checkpoint-dir " + dir);
  INFO(first.out);
  CHECK(first.code != 0);
  CHECK_THAT(first.out, Catch::Contains("step 1: the loss is nan; stopping before the update (no checkpoint was "
                                        "written yet)"));
  // NaN gradients under a finite loss stop the same way, with or without
  // clipping (a NaN norm is never over --clip-norm: the step was applied and
  // checkpointed, and the run then stopped, naming that checkpoint intact).
  for (const char* clip : {"0", "1"}) {
    REQUIRE(std::system(("rm -rf " + dir).c_str()) == 0);
    const PplabRun g = Train(std::string("-k 2 -m 2 --steps 4 --checkpoint-every 1 --nan-gradient-at 3 --clip-norm ") +
                             clip + " --checkpoint-dir " + dir);
    INFO(g.out);
    CHECK(g.code != 0);
    CHECK_THAT(g.out,
               Catch::Contains("step 3: the gradients' norm is nan (the loss ") &&
                   Catch::Contains("); stopping before the update (the last checkpoint in " + dir + " is intact)"));
    CHECK(ReadTextFile(dir + "/latest") == "step-000002\n");
    CHECK(Train("-k 2 -m 2 --steps 3 --resume --checkpoint-dir " + dir).code == 0);
  }
}

TEST_CASE("an unwritable checkpoint directory is one clear error", "[train][checkpoint]") {
  const PplabRun r = Train("-k 1 -m 1 --steps 1 --checkpoint-dir /proc/pplab-no-such-dir");
  INFO(r.out);
  CHECK(r.code != 0);
  // Found at start, before any step is run.
  CHECK_THAT(r.out, Catch::Contains("--checkpoint-dir /proc/pplab-no-such-dir: cannot create"));
}

TEST_CASE("a checkpoint that cannot be written (full disk) is one error and the previous one stays loadable",
          "[train][checkpoint]") {
  const std::string dir = std::string(PPLAB_TEST_TMP_DIR) + "/ck_full";
  RemoveTree(dir);
  REQUIRE(Train("-k 2 -m 2 --steps 2 --checkpoint-dir " + dir).code == 0);
  // A file-size limit of 64 KiB makes the next shard write fail as a full
  // disk would (the tiny model's shard is larger).
  const PplabRun full = Pplab(
      "train --synthetic --out '' -q --model tiny --batch-size 8 --seq-len 32 -m 2 -k 2 "
      "--steps 4 --resume --comm-timeout 5 --checkpoint-dir " +
          dir,
      /*shell_prefix=*/"ulimit -f 64; ");
  INFO(full.out);
  CHECK(full.code != 0);
  CHECK_THAT(full.out, Catch::Contains("checkpoint: cannot write " + dir + "/step-000004.tmp/rank-"));
  CHECK(ReadTextFile(dir + "/latest") == "step-000002\n");
  const PplabRun resumed = Train("-k 2 -m 2 --steps 4 --resume --json --checkpoint-dir " + dir);
  INFO(resumed.out);
  CHECK(resumed.code == 0);
  CHECK(ReadTextFile(dir + "/latest") == "step-000004\n");
}

}  // namespace pplab::train_checkpoint_test
