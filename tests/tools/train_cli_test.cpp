// Multi-process training through the pplab binary (Gloo over loopback).
#include <sys/wait.h>
#include <torch/csrc/jit/serialization/pickle.h>
#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "models/partition.h"
#include "runtime/train/shard_file.h"
#include "schedules/file_io.h"
#include "schedules/generators.h"
#include "schedules/schedule_io.h"
#include "tests/run_pplab.h"
#include "tests/tools/grad_files.h"
#include "traces/chrome_trace.h"
#include "traces/explain.h"

namespace pplab {
namespace {

// `pplab train` with small test settings in front of `args` (a flag given
// twice takes the last value): synthetic tokens, the tiny model, no output
// files unless asked, no progress line.
PplabRun Train(const std::string& args) {
  return Pplab(
      "train --synthetic --out '' -q --model tiny --batch-size 8 --seq-len 32 --steps 10 -m 4 --warmup-steps 0 "
      "--clip-norm 0 --eval-every 0 " +
      args);
}

std::vector<double> Losses(const std::string& args) {
  const PplabRun r = Train(args + " --json");
  INFO(args << "\n" << r.out);
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out.substr(r.out.find('{')));
  return j["losses"].get<std::vector<double>>();
}

// One step of `args` that writes every parameter's gradient into `dir`.
void DumpGrads(const std::string& args, const std::string& dir) {
  REQUIRE(std::system(("rm -rf " + dir + " && mkdir -p " + dir).c_str()) == 0);
  const PplabRun r = Train(args + " --steps 1 --json --dump-grads " + dir);
  INFO(args << "\n" << r.out);
  REQUIRE(r.code == 0);
}

}  // namespace

TEST_CASE("every schedule across processes gives the single-process loss sequence", "[train]") {
  const std::string common = " --model tiny --batch-size 8 --seq-len 16 --steps 3 --seed 5";
  const std::vector<double> reference = Losses("-k 1 -m 1" + common);  // the whole batch at once
  REQUIRE(reference.size() == 3);
  for (const char* plan :
       {"-s gpipe -k 2 -m 4", "-s 1f1b -k 2 -m 4", "-s interleaved-1f1b -k 2 -m 4 -v 2", "-s looped-bfs -k 2 -m 4 -v 2",
        "-s zb-h1 -k 2 -m 4", "-s zb-h2 -k 2 -m 4", "-s zb-v -k 2 -m 4", "-s 1f1b -k 4 -m 8",
        "-s zb-h1 -k 3 -m 4 --partition 1,2,1", "--dp 2 -s 1f1b -k 2 -m 2",
        // two copies of the model, which must stay equal from step to step
        "-s dualpipe -k 2 -m 4"}) {
    const std::vector<double> losses = Losses(std::string(plan) + common);
    INFO(plan);
    REQUIRE(losses.size() == reference.size());
    for (size_t i = 0; i < losses.size(); ++i) CHECK(losses[i] == Approx(reference[i]).epsilon(1e-5));
  }
}

TEST_CASE("across processes every parameter gradient equals the single-process one", "[train]") {
  const std::string tmp = PPLAB_TEST_TMP_DIR;
  const std::string common = " --model tiny --batch-size 8 --seq-len 16 --seed 3";
  DumpGrads("-k 1 -m 1" + common, tmp + "/grads_ref");  // the whole batch at once
  for (const char* plan : {"-s 1f1b -k 2 -m 4", "-s zb-h1 -k 2 -m 4", "-s zb-v -k 2 -m 4",
                           "-s interleaved-1f1b -k 2 -m 4 -v 2", "-s zb-h2 -k 4 -m 8",
                           // data parallelism: plain DDP, and the DP x PP grid (world 4), whose
                           // all-reduces start at each stage's REDUCE_GRAD, after its last B or W
                           "--dp 2 -k 1 -m 2", "--dp 2 -s 1f1b -k 2 -m 2", "--dp 2 -s zb-h1 -k 2 -m 2"}) {
    DumpGrads(plan + common, tmp + "/grads_pp");
    const GradError e = CompareGrads(tmp + "/grads_ref", tmp + "/grads_pp");
    std::printf("multi-process gradient parity %-38s %d tensors, max abs error %.2e, max relative error %.2e\n", plan,
                e.compared, e.max_abs, e.max_rel);
    INFO(plan);
    CHECK(e.compared == 39);  // tiny: embedding, 4 layers x 9, norm, head
    CHECK(e.max_rel <= 1e-5);
  }
}

TEST_CASE(
    "dualpipe and dualpipev (overlapped F&B), interleaved-zb, v-half, v-min and a PyTorch REDUCE_GRAD plan give the "
    "single-process gradients",
    "[train]") {
  // The small preset (8 layers), so that K=4 dualpipev has its 8 stages.
  const std::string tmp = PPLAB_TEST_TMP_DIR;
  const std::string common = " --model small --batch-size 8 --seq-len 16 --seed 4";
  DumpGrads("-k 1 -m 1" + common, tmp + "/grads_new_ref");
  const std::string data = PPLAB_TEST_DATA_DIR;
  const std::vector<std::string> plans = {
      "-s dualpipev -k 2 -m 4", "-s dualpipev -k 4 -m 8", "-s interleaved-zb -k 2 -m 4 -v 2",
      "-s interleaved-zb -k 4 -m 8 -v 2", "--dp 2 -s dualpipev -k 2 -m 4",
      // V-Half and V-Min on the V placement over processes
      "-s v-half -k 4 -m 8", "-s v-min -k 4 -m 8",
      // two copies of the model: each part's gradient summed over both
      "-s dualpipe -k 2 -m 4", "-s dualpipe -k 4 -m 8", "--dp 2 -s dualpipe -k 2 -m 4",
      // PyTorch's own GPipe file, with its REDUCE_GRAD actions
      "--plan " + data + "/pytorch/gpipe_k2_m2_compute_only.csv -m 2"};
  for (const std::string& plan : plans) {
    DumpGrads(plan + common, tmp + "/grads_new");
    const GradError e = CompareGrads(tmp + "/grads_new_ref", tmp + "/grads_new");
    std::printf("multi-process gradient parity %-60s %d tensors, max relative error %.2e\n", plan.c_str(), e.compared,
                e.max_rel);
    INFO(plan);
    CHECK(e.compared == 8 * 9 + 3);  // small: embedding, 8 layers x 9, norm, head
    CHECK(e.max_rel <= 1e-5);
  }
}

TEST_CASE("a compute partition takes the plan's placement and --seq-len, and is refused for two copies", "[train]") {
  // The small preset (8 layers) in a V on 2 ranks: the layers the workers
  // use, reported in --json, are the ones PartitionByCompute gives.
  const PplabRun r = Train("--model small -s v-half -k 2 --steps 1 --partition compute --json");
  INFO(r.out);
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out.substr(r.out.find('{')));
  CHECK(j["partition"] == PartitionByCompute(LlamaPreset("small"), VPlacement(2), 32).ToString());
  const PplabRun dual = Train("-s dualpipe -k 2 --steps 1 --partition compute");
  CHECK(dual.code == 2);
  CHECK_THAT(dual.out, Catch::Contains("--partition compute: needs the plan's placement of one copy of the model"));
}

TEST_CASE("plan's line for a partition refitted to the memory limit trains that layer list", "[train][plan]") {
  // The small preset on 4 ranks at 25 MiB: interleaved-zb over memory with
  // its named partitions fits with layers moved off the ranks over the limit (plan_search.h,
  // "fitted"), the fastest plan that fits; its train line names the layers.
  const std::string plan = std::string(PPLAB_TEST_TMP_DIR) + "/refitted-plan.json";
  const PplabRun r = Pplab(
      "plan --model small --ranks 4 --global-batch 16 --seq-len 128 --memory-per-rank 25MiB "
      "--recompute none --json -o " +
      plan);
  INFO(r.out);
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  REQUIRE(j["best"]["partition"] == "fitted");
  CHECK(j["refit"]["fit"].get<int>() >= 1);
  const std::string layers = j["best"]["layers_per_stage"];
  const std::string line = j["train_command"];
  CHECK_THAT(line, Catch::Contains(" --partition " + layers + " "));
  const PplabRun t = Pplab(line.substr(line.find("train ")) + " --synthetic --out '' -q --steps 1 --json");
  INFO(t.out);
  REQUIRE(t.code == 0);
  CHECK(nlohmann::json::parse(t.out.substr(t.out.find('{')))["partition"] == layers);
}

TEST_CASE("gradients clipped by the global norm across processes equal single-process clipping", "[train]") {
  const std::string tmp = PPLAB_TEST_TMP_DIR;
  const std::string common = " --model tiny --batch-size 8 --seq-len 16 --steps 1 --seed 9 --json --dump-grads ";
  auto run = [&](const std::string& args, const std::string& dir) {
    REQUIRE(std::system(("rm -rf " + dir + " && mkdir -p " + dir).c_str()) == 0);
    const PplabRun r = Train(args + common + dir);
    INFO(args << "\n" << r.out);
    REQUIRE(r.code == 0);
    return nlohmann::json::parse(r.out.substr(r.out.find('{')));
  };
  const auto plain = run("-k 1 -m 1", tmp + "/clip_ref");
  const double norm = plain["grad_norms"][0].get<double>();
  const double clip = norm / 4;  // clipping is active
  const auto single = run("-k 1 -m 1 --clip-norm " + std::to_string(clip), tmp + "/clip_single");
  const auto piped = run("-s zb-h1 -k 2 -m 4 --clip-norm " + std::to_string(clip), tmp + "/clip_pp");
  // The global norm is the same in both runs, measured before clipping.
  CHECK(piped["grad_norms"][0].get<double>() == Approx(norm).epsilon(1e-5));
  double worst = 0;
  int compared = 0;
  for (const std::string& name : ListDirectory(tmp + "/clip_ref")) {
    at::Tensor unclipped, want, got;
    torch::load(unclipped, tmp + "/clip_ref/" + name);
    torch::load(want, tmp + "/clip_single/" + name);
    torch::load(got, tmp + "/clip_pp/" + name);
    // Single-process clipping scales everything by clip / norm ...
    CHECK(torch::allclose(want, unclipped * (clip / (norm + 1e-6)), 1e-5, 1e-9));
    // ... and so does the pipeline, which sees only its stages' gradients.
    const double scale = std::max(want.abs().max().item<double>(), 1e-30);
    worst = std::max(worst, (got - want).abs().max().item<double>() / scale);
    ++compared;
  }
  std::printf("global clipping across 2 processes: %d tensors, max relative error %.2e\n", compared, worst);
  CHECK(compared == 39);
  CHECK(worst <= 1e-5);
}

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
  // Another seed (another model and data) cannot resume this checkpoint.
  const PplabRun other = Train("-k 1 -m 1 --resume --seed 99" + common);
  CHECK(other.code != 0);
  CHECK_THAT(other.out, Catch::Contains("--resume: the checkpoint in " + dir + " was taken with seed 1"));
  // Flip one byte of a shard: the checksum names it.
  const std::string shard = dir + "/step-000004/rank-0.shard";
  std::string bytes = ReadTextFile(shard);
  bytes[bytes.size() / 2] ^= 0x5a;
  WriteTextFile(shard, bytes);
  const PplabRun corrupted = Train("-k 1 -m 1 --resume" + common + " --steps 6");  // step 4 is the one to load
  CHECK(corrupted.code != 0);
  CHECK_THAT(corrupted.out, Catch::Contains("rank-0.shard: checksum mismatch"));
}

TEST_CASE("in bf16 the two dualpipe copies add their gradients in full precision", "[train]") {
  // bf16 rounds activations and their gradients on the wire in both plans,
  // at the same stage boundary; the copies' sum must not be rounded too
  // (that would cost about 1e-3 relative, bf16's precision).
  const std::string tmp = PPLAB_TEST_TMP_DIR;
  const std::string common = " --model tiny --batch-size 8 --seq-len 16 --seed 4 --precision bf16 -k 2 -m 4";
  DumpGrads("-s 1f1b" + common, tmp + "/grads_bf16_1f1b");
  DumpGrads("-s dualpipe" + common, tmp + "/grads_bf16_dual");
  const GradError e = CompareGrads(tmp + "/grads_bf16_1f1b", tmp + "/grads_bf16_dual");
  std::printf("bf16 dualpipe against bf16 1f1b: %d tensors, max relative error %.2e\n", e.compared, e.max_rel);
  CHECK(e.compared == 39);
  CHECK(e.max_rel <= 1e-5);
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
  const PplabRun r = Train("-k 2 -m 2 --steps 4 --checkpoint-every 1 --nan-at 2 --checkpoint-dir " + dir);
  INFO(r.out);
  CHECK(r.code != 0);
  CHECK_THAT(r.out, Catch::Contains("step 2: the loss is nan; stopping before the update (the last checkpoint in " +
                                    dir + " is intact)"));
  CHECK(ReadTextFile(dir + "/latest") == "step-000002\n");
  CHECK(Train("-k 2 -m 2 --steps 3 --resume --checkpoint-dir " + dir).code == 0);  // and it resumes
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

TEST_CASE("killing the launcher takes its workers with it", "[train]") {
  // Start a long run, wait until its launcher and two workers are up, kill
  // the launcher with SIGKILL (no chance to clean up), and count what is
  // left. The seed is computed by the shell and the pattern is a regular
  // expression, so that 918273 is in the run's command lines and nowhere in
  // this script's (pgrep would count the shell and its subshells).
  const std::string script = std::string(PPLAB_BINARY) +
                             " train --synthetic --out '' -q --model tiny --steps 1000000 --seed $((918270 + 3)) "
                             ">/dev/null 2>&1 & L=$!\n"
                             "count() { pgrep -f 'seed 91827[3]' | wc -l; }\n"
                             "for i in $(seq 1 600); do [ $(count) -ge 3 ] && break; sleep 0.1; done\n"
                             "before=$(count)\n"
                             "kill -9 $L\n"
                             "for i in $(seq 1 300); do [ $(count) -eq 0 ] && break; sleep 0.1; done\n"
                             "echo \"$before $(count)\"\n";
  FILE* pipe = popen(script.c_str(), "r");
  REQUIRE(pipe != nullptr);
  int before = -1, after = -1;
  REQUIRE(std::fscanf(pipe, "%d %d", &before, &after) == 2);
  pclose(pipe);
  CHECK(before == 3);
  CHECK(after == 0);
}

TEST_CASE("a killed worker makes the others exit with the rank and action they waited on", "[train]") {
  const PplabRun r = Train("-s 1f1b -k 2 -m 2 --steps 4 --comm-timeout 5 --kill-rank-at 1:2");
  INFO(r.out);
  CHECK(r.code != 0);
  // The first failure is reported; rank 0's consequent error (waiting on
  // rank 1) is summarised, not printed.
  CHECK_THAT(r.out, Catch::Contains("pplab: rank 1 was killed by signal"));
  CHECK_THAT(r.out, Catch::Contains("pplab: rank 0 stopped after rank 1 failed"));
  CHECK_THAT(r.out, !Catch::Contains("pplab: error: rank 0"));
}

TEST_CASE("the measured trace lists exactly the plan's actions, per rank, in program order", "[train]") {
  const std::string dir = PPLAB_TEST_TMP_DIR;
  REQUIRE(Pplab("export -s zb-h1 -k 2 -m 4 -o " + dir + "/zb.json").code == 0);
  const PplabRun r =
      Train("--plan " + dir + "/zb.json --steps 2 --batch-size 4 --seq-len 8 --json --trace " + dir + "/measured.json");
  INFO(r.out);
  REQUIRE(r.code == 0);
  const Schedule plan = LoadScheduleFile(dir + "/zb.json");
  const Timeline t = TimelineFromChromeTrace(ReadTextFile(dir + "/measured.json"), "measured.json");
  CHECK(t.source == "measured");
  for (RankId rank = 0; rank < plan.ranks; ++rank) {
    std::vector<Action> got;
    for (const TimelineEvent& e : t.events) {
      if (e.rank == rank) got.push_back(e.action);
    }
    CHECK(got == plan.programs[rank]);
  }
  // The ranks' timelines share time 0 (one host, one steady clock): no
  // action starts before the message it takes was sent.
  std::map<MessageKey, TimeNs> sent;
  for (const TimelineEvent& e : t.events) {
    if (IsSend(e.action.kind)) sent[MessageOf(e.action)] = e.start;
  }
  int received = 0;
  for (const TimelineEvent& e : t.events) {
    for (const Action& part : PartsOf(e.action)) {
      if (!IsCompute(e.action.kind) || (part.kind != ActionKind::kForward && !IsInputGrad(part.kind))) continue;
      const auto it = sent.find(MessageKey{part.kind == ActionKind::kForward, part.stage, part.microbatch});
      if (it == sent.end()) continue;
      ++received;
      INFO(FormatAction(e.action) << " on rank " << e.rank << " starts at " << e.start << " ns, sent at "
                                  << it->second);
      CHECK(e.start >= it->second);
    }
  }
  CHECK(received == 2 * 4);  // each microbatch's activations and gradients
  // --json's executor overhead is explain's "other" over the makespan, per rank, of that trace.
  const auto j = nlohmann::json::parse(r.out.substr(r.out.find('{')));
  const IdleExplanation idle = ExplainIdle(t);
  REQUIRE(j["executor_overhead"].size() == 2);
  for (RankId rank = 0; rank < 2; ++rank) {
    const double want = static_cast<double>(idle.per_rank[rank].other) / static_cast<double>(idle.makespan);
    CHECK(j["executor_overhead"][rank].get<double>() == Approx(want).epsilon(1e-9));
  }
  // On the host clock the host issues each action as it runs it: the step
  // took as long to issue as to run, and no device trailed it.
  REQUIRE(j["host_issue_ms"].size() == 2);
  REQUIRE(j["device_lag_ms"].size() == 2);
  for (int step = 0; step < 2; ++step) {
    CHECK(j["host_issue_ms"][step].get<double>() == j["step_clock_ms"][step].get<double>());
    CHECK(j["host_issue_ms"][step].get<double>() > 0);
    CHECK(j["device_lag_ms"][step].get<double>() == 0.0);
  }
}

TEST_CASE(
    "train writes its rank-to-device mapping into the measured and simulated traces, explain and simulate read it",
    "[train][devices]") {
  const std::string dir = PPLAB_TEST_TMP_DIR;
  const std::string measured = dir + "/devices_measured.json", simulated = dir + "/devices_simulated.json";
  const PplabRun r =
      Train("-s 1f1b -k 2 --steps 2 --batch-size 4 --seq-len 8 --trace " + measured + " --sim-trace " + simulated);
  INFO(r.out);
  REQUIRE(r.code == 0);
  // On the CPU both local ranks share the host's cores: one device, with a
  // slot per rank's threads (each worker takes cores / 2 threads).
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int threads = std::max(1, cores / 2);
  for (const std::string& path : {measured, simulated}) {
    const Timeline t = TimelineFromChromeTrace(ReadTextFile(path), path);
    INFO(path);
    CHECK(t.devices == std::vector<int>{0, 0});
    if (std::getenv("OMP_NUM_THREADS") == nullptr) CHECK(t.device_slots == std::vector<int>{cores / threads});
    const PplabRun x = Pplab("explain --json " + path);
    INFO(x.out);
    REQUIRE(x.code == 0);
    CHECK(nlohmann::json::parse(x.out)["devices"] == nlohmann::json::parse("[0, 0]"));
  }
  const PplabRun sim = Pplab("simulate -s 1f1b -k 2 -m 4 --devices-from " + measured + " --json");
  INFO(sim.out);
  CHECK(sim.code == 0);
  // With 2 tensor-parallel ranks a pipeline rank, 4 processes share the
  // cores: each pipeline rank stands for 2 of them, and gets half the slots.
  const std::string tp = dir + "/devices_tp.json";
  const PplabRun split = Train("-s 1f1b -k 2 --tp 2 --steps 2 --batch-size 4 --seq-len 8 --trace " + tp);
  INFO(split.out);
  REQUIRE(split.code == 0);
  const Timeline t = TimelineFromChromeTrace(ReadTextFile(tp), tp);
  CHECK(t.devices == std::vector<int>{0, 0});
  const int threads4 = std::max(1, cores / 4);
  if (std::getenv("OMP_NUM_THREADS") == nullptr) {
    CHECK(t.device_slots == std::vector<int>{std::max(1, cores / threads4 * 2 / 4)});
  }
}

TEST_CASE("train refuses bad options with one line", "[train]") {
  struct Case {
    const char* args;
    const char* says;
  };
  for (const Case& c :
       {Case{"-k 2 -m 3 --batch-size 8 --steps 1", "--batch-size 8 is not divisible by --microbatches 3"},
        Case{"-k 8 --model tiny --steps 1", "fewer than the 8 stages"},
        Case{"--model nope --steps 1", "unknown model preset 'nope'"},
        Case{"-k 2 --partition 3,3 --steps 1", "--partition: the entries sum to 6 layers"},
        Case{"--device bogus --steps 1", "--device 'bogus'"},
        Case{"-k 2 --recompute 2 --steps 1", "--recompute names stage 2, but the plan has stages 0 to 1"},
        Case{"-k 2 --recompute some --steps 1", "--recompute takes none, all, or stage ids"},
        Case{"-k 2 --shard-optimizer --steps 1",
             "--shard-optimizer shards the AdamW moments over the data-parallel "
             "replicas: it needs --dp 2 or more"},
        Case{"-k 2 --dp 2 --shard-optimizer --no-flat-params --steps 1", "--no-flat-params excludes --shard-optimizer"},
        Case{"-k 2 --warm-up maybe --steps 1", "--warm-up: expected auto, on or off, got 'maybe'"}}) {
    const PplabRun r = Train(c.args);
    INFO(c.args << "\n" << r.out);
    CHECK(r.code != 0);
    CHECK_THAT(r.out, Catch::Contains(c.says));
  }
}

TEST_CASE("a warm-up before the first step changes no loss, in pipelines, data and tensor parallelism", "[train]") {
  // Each layout on 2 processes: DualPipeV (two stages a rank, both ends of
  // the pipeline on each), zb-h1 over 2 replicas, and T=2 with sequence
  // parallelism (the warm-up's collectives inside the stages).
  for (const std::string& layout : {std::string("-k 2 -s dualpipev"), std::string("-k 1 --dp 2 -s zb-h1"),
                                    std::string("-k 1 --tp 2 --sequence-parallel")}) {
    auto run = [&](const std::string& warm_up) {
      const PplabRun r = Train(layout + " --steps 2 --json --warm-up " + warm_up);
      INFO(layout << " --warm-up " << warm_up << "\n" << r.out);
      REQUIRE(r.code == 0);
      return nlohmann::json::parse(r.out.substr(r.out.find('{')));
    };
    const nlohmann::json on = run("on"), off = run("off"), automatic = run("auto");
    INFO(layout);
    CHECK(on["losses"] == off["losses"]);
    CHECK(on["warm_up_ms"].get<double>() > 0);
    CHECK(off["warm_up_ms"].get<double>() == 0);
    CHECK(automatic["warm_up_ms"].get<double>() == 0);  // auto: only on a CUDA device
  }
}

TEST_CASE("recomputed stages train the same losses across processes with less memory on every rank",
          "[train][recompute]") {
  auto run = [](const std::string& recompute) {
    const PplabRun r = Train("-k 2 -s gpipe --steps 3 --measure-memory --json --recompute " + recompute);
    INFO(recompute << "\n" << r.out);
    REQUIRE(r.code == 0);
    return nlohmann::json::parse(r.out.substr(r.out.find('{')));
  };
  const nlohmann::json plain = run("none"), again = run("all"), first = run("0");
  // bf16 autocast, and I and W split (zb-h1): W reuses the graph I rebuilt.
  CHECK(run("all --precision bf16 -s zb-h1")["losses"] == run("none --precision bf16 -s zb-h1")["losses"]);
  CHECK(again["recompute"] == "all");
  CHECK(first["recompute"] == "0");
  // Bit for bit: the recomputed forward is the same computation.
  CHECK(again["losses"] == plain["losses"]);
  CHECK(first["losses"] == plain["losses"]);
  const auto peak = [](const nlohmann::json& j) {
    return j["measured_peak_activation_bytes"].get<std::vector<long>>();
  };
  REQUIRE(peak(plain).size() == 2);
  // GPipe holds all 4 microbatches' activations; recomputed, one at a time.
  for (size_t r = 0; r < 2; ++r) {
    INFO("rank " << r);
    CHECK(peak(again)[r] * 2 < peak(plain)[r]);
  }
  CHECK(peak(first)[0] * 2 < peak(plain)[0]);
  // Rank 1, not recomputed, holds what it held (within a message or two
  // of the receive buffers, whose time of arrival varies between runs).
  CHECK(static_cast<double>(peak(first)[1]) == Approx(static_cast<double>(peak(plain)[1])).epsilon(0.05));
}

TEST_CASE(
    "the sharded optimizer trains DP2 x PP2 bit for bit with half the moments, and its checkpoints resume "
    "either way",
    "[train][shard]") {
  const std::string dir = std::string(PPLAB_TEST_TMP_DIR) + "/shard";
  auto run = [](const std::string& args) {
    const PplabRun r = Train("-k 2 --dp 2 --json " + args);
    INFO(args << "\n" << r.out);
    REQUIRE(r.code == 0);
    return nlohmann::json::parse(r.out.substr(r.out.find('{')));
  };
  const nlohmann::json plain = run("--steps 6"), sharded = run("--steps 6 --shard-optimizer");
  CHECK(sharded["shard_optimizer"] == true);
  CHECK(plain["shard_optimizer"] == false);
  CHECK(sharded["losses"] == plain["losses"]);
  // Rank 0's one stage: 2 moments of n floats, or of ceil(n / 2) rounded up
  // to a multiple of 128 (ShardRange).
  const int64_t whole = plain["optimizer_state_bytes"].get<int64_t>();
  const int64_t half = sharded["optimizer_state_bytes"].get<int64_t>();
  CHECK(whole > 0);
  CHECK(2 * half - whole >= 0);
  CHECK(2 * half - whole <= 2 * 2 * 4 * 128);
  // A checkpoint holds the whole moments, so it resumes with or without
  // sharding, on the same steps as the run that was not interrupted.
  const std::vector<double> tail(plain["losses"].begin() + 3, plain["losses"].end());
  for (const auto& [first, then] : {std::pair<std::string, std::string>{"--shard-optimizer", ""},
                                    std::pair<std::string, std::string>{"", "--shard-optimizer"}}) {
    INFO("first '" << first << "', then '" << then << "'");
    REQUIRE(std::system(("rm -rf " + dir).c_str()) == 0);
    // The same 6-step run (its learning-rate schedule spans 6 steps), taken
    // back to its checkpoint after step 3.
    run("--steps 6 --checkpoint-every 3 --checkpoint-dir " + dir + " " + first);
    WriteTextFile(dir + "/latest", "step-000003\n");
    const nlohmann::json resumed = run("--steps 6 --resume --checkpoint-dir " + dir + " " + then);
    CHECK(resumed["losses"].get<std::vector<double>>() == tail);
  }
}

}  // namespace pplab
