// `--precision bf16` through the pplab binary: the loss curve against fp32,
// two processes against one, resuming in the other precision, the flag's
// refusal, and a bf16 profile's bytes as the planner reads them.
#include <torch/torch.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "schedules/file_io.h"
#include "tests/run_pplab.h"
#include "tests/tools/grad_files.h"

namespace fs = std::filesystem;

namespace pplab::train_precision_test {
namespace {

const std::string kCorpus = std::string(PPLAB_TEST_DATA_DIR) + "/text/fortunes.txt";

std::string Tmp(const std::string& name) {
  const std::string dir = std::string(PPLAB_TEST_TMP_DIR) + "/precision_" + name;
  RemoveTree(dir);
  fs::create_directories(dir);
  return dir;
}

nlohmann::json Json(const PplabRun& r) {
  INFO(r.out);
  REQUIRE(r.code == 0);
  return nlohmann::json::parse(r.out.substr(r.out.find('{')));
}

// `pplab train` on synthetic tokens with small settings; `args` come last and win.
nlohmann::json TrainSynthetic(const std::string& args, const std::string& shell_prefix = "") {
  return Json(
      Pplab("train --synthetic --out '' -q --model tiny --batch-size 8 --seq-len 32 --steps 5 -m 4 --warmup-steps 0 "
            "--clip-norm 0 --eval-every 0 --json " +
                args,
            shell_prefix));
}

std::vector<double> Losses(const nlohmann::json& j) { return j.at("losses").get<std::vector<double>>(); }

int CountLines(const std::string& text) { return static_cast<int>(std::count(text.begin(), text.end(), '\n')); }

}  // namespace

TEST_CASE("bf16 training on text keeps to the fp32 loss curve within 2 % (small preset, 30 steps, CPU)",
          "[train][precision]") {
  const std::string cache = Tmp("cache");
  const std::string common = "train -q --out '' --model small --data " + kCorpus + " --vocab-size 200 --cache-dir " +
                             cache +
                             " --batch-size 8 --seq-len 64 -k 1 -m 1 --steps 30 --lr 3e-3 --warmup-steps 5 --seed 2"
                             " --eval-every 0 --json --precision ";
  // One compute thread: both runs are then deterministic, and OpenBLAS's
  // spinning threads do not stretch the fp32 run on a loaded machine.
  const std::string one_thread = "OMP_NUM_THREADS=1 ";
  const nlohmann::json fp32 = Json(Pplab(common + "fp32", one_thread)), bf16 = Json(Pplab(common + "bf16", one_thread));
  CHECK(fp32["precision"] == "fp32");
  CHECK(bf16["precision"] == "bf16");
  const std::vector<double> a = Losses(fp32), b = Losses(bf16);
  REQUIRE(a.size() == 30);
  REQUIRE(b.size() == 30);
  double worst = 0, mean = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double rel = std::abs(b[i] - a[i]) / a[i];
    worst = std::max(worst, rel);
    mean += rel / static_cast<double>(a.size());
  }
  std::printf(
      "bf16 against fp32, small preset on text, 30 steps: loss %.4f -> %.4f (fp32 %.4f -> %.4f); per-step relative "
      "difference max %.2f %%, mean %.2f %%; %.0f against %.0f tokens/s\n",
      b.front(), b.back(), a.front(), a.back(), 100 * worst, 100 * mean, bf16["tokens_per_s"].get<double>(),
      fp32["tokens_per_s"].get<double>());
  // Both learn (the comparison is of two curves that move), and bf16 stays
  // within 2 % of fp32 at every step: the target for 200 steps.
  auto mean3 = [](const std::vector<double>& x, size_t from) { return (x[from] + x[from + 1] + x[from + 2]) / 3; };
  CHECK(mean3(a, 27) < mean3(a, 0) - 0.5);
  CHECK(mean3(b, 27) < mean3(b, 0) - 0.5);
  CHECK(worst <= 0.02);
}

TEST_CASE("bf16 training across 2 processes equals bf16 in one process up to the bf16 wire", "[train][precision]") {
  // One compute thread per process in both runs, so that the two differ only
  // by the messages between the ranks: bf16 on the wire, rounded once each way.
  const std::string one_thread = "OMP_NUM_THREADS=1 ";
  const std::string common = " --seed 6 --precision bf16";
  const std::vector<double> one = Losses(TrainSynthetic("-s 1f1b -k 1" + common, one_thread));
  const std::vector<double> two = Losses(TrainSynthetic("-s 1f1b -k 2" + common, one_thread));
  const std::vector<double> fp32 = Losses(TrainSynthetic("-s 1f1b -k 1 --seed 6 --precision fp32", one_thread));
  REQUIRE(one.size() == 5);
  REQUIRE(two.size() == 5);
  double wire = 0, compute = 0;
  for (size_t i = 0; i < one.size(); ++i) {
    wire = std::max(wire, std::abs(two[i] - one[i]) / one[i]);
    compute = std::max(compute, std::abs(one[i] - fp32[i]) / fp32[i]);
  }
  // One step's gradients: two processes against one, and bf16 against fp32 in one.
  const std::string tmp = PPLAB_TEST_TMP_DIR;
  auto dump = [&](const std::string& args, const std::string& dir) {
    RemoveTree(dir);
    fs::create_directories(dir);
    TrainSynthetic(args + " --steps 1 --dump-grads " + dir, one_thread);
  };
  dump("-s 1f1b -k 1" + common, tmp + "/precision_grads_one");
  dump("-s 1f1b -k 2" + common, tmp + "/precision_grads_two");
  dump("-s 1f1b -k 1 --seed 6 --precision fp32", tmp + "/precision_grads_fp32");
  const GradError grad_wire = CompareGrads(tmp + "/precision_grads_one", tmp + "/precision_grads_two");
  const GradError grad_compute = CompareGrads(tmp + "/precision_grads_fp32", tmp + "/precision_grads_one");
  std::printf(
      "bf16, tiny, 1f1b: 2 processes against 1: losses max relative difference %.2e, gradients %.3e (%d tensors, "
      "worst %s), all gradients %.3e (L2); bf16 against fp32 in 1 process: losses %.2e, gradients %.3e (worst %s), "
      "all %.3e (L2)\n",
      wire, grad_wire.max_rel, grad_wire.compared, grad_wire.worst.c_str(), grad_wire.l2_rel, compute,
      grad_compute.max_rel, grad_compute.worst.c_str(), grad_compute.l2_rel);
  // bf16 rounds a value by up to 2^-9 (0.2 %) of itself; the wire rounds
  // each activation and gradient once per boundary. Measured: losses 1.3e-5,
  // gradients 1.2e-2 at worst (a k_proj weight of stage 1), 3.6e-3 over all
  // of them, about what computing in bf16 itself costs (4.2e-3).
  CHECK(grad_wire.compared == 39);
  CHECK(wire <= 1e-3);
  CHECK(grad_wire.max_rel <= 3e-2);
  CHECK(grad_wire.l2_rel <= 1e-2);
  CHECK(grad_wire.l2_rel <= 2 * grad_compute.l2_rel);
}

TEST_CASE("a checkpoint resumes in the other precision, and the launcher says so in one line",
          "[train][checkpoint][precision]") {
  const std::string dir = Tmp("resume");
  const std::string common =
      "train --synthetic --out '' --model tiny --batch-size 8 --seq-len 16 -m 2 -k 2 "
      "--warmup-steps 0 --eval-every 0 --json --checkpoint-dir " +
      dir;
  const PplabRun first = Pplab(common + " --steps 2 --precision fp32");
  INFO(first.out);
  REQUIRE(first.code == 0);
  const auto written = nlohmann::json::parse(ReadTextFile(dir + "/step-000002/manifest.json"));
  CHECK(written["precision"] == "fp32");
  CHECK(std::find(written["identity_keys"].begin(), written["identity_keys"].end(), "precision") !=
        written["identity_keys"].end());
  const PplabRun resumed = Pplab(common + " --steps 4 --resume --precision bf16");
  INFO(resumed.out);
  REQUIRE(resumed.code == 0);
  const std::string note = "pplab: note: the checkpoint in " + dir +
                           " was trained in fp32; this run continues it in bf16 (weights and AdamW state are fp32 in "
                           "both)\n";
  CHECK_THAT(resumed.out, Catch::Contains(note));
  // That note, the learning-rate schedule's (the run goes past its recorded
  // 2 steps) and the JSON summary.
  CHECK(CountLines(resumed.out) == 3);
  const auto j = nlohmann::json::parse(resumed.out.substr(resumed.out.find('{')));
  CHECK(j["precision"] == "bf16");
  CHECK(j["first_step"] == 2);
  CHECK(j["losses"].size() == 2);
  CHECK(nlohmann::json::parse(ReadTextFile(dir + "/step-000004/manifest.json"))["precision"] == "bf16");
  // The same precision again: nothing to say.
  const PplabRun same = Pplab(common + " --steps 5 --resume --precision bf16");
  INFO(same.out);
  REQUIRE(same.code == 0);
  CHECK_THAT(same.out, !Catch::Contains("was trained in"));
}

TEST_CASE("train and profile refuse a --precision other than fp32 or bf16 in one line before any worker starts",
          "[train][profile][precision]") {
  for (const std::string& args :
       {std::string("train --synthetic --out '' -q --model tiny -k 2 --steps 1 --precision fp16"),
        std::string("train --synthetic --out '' -q --model tiny -k 1 --steps 1 --precision BF16"),
        std::string("profile --model tiny -k 2 --microbatch-size 1 --seq-len 8 --repeats 1 --precision fp16")}) {
    const PplabRun r = Pplab(args);
    INFO(args << "\n" << r.out);
    CHECK(r.code == 2);
    CHECK(CountLines(r.out) == 1);
    CHECK_THAT(r.out,
               Catch::StartsWith("pplab: error: --precision '") && Catch::EndsWith("': expected fp32 or bf16\n"));
    // No worker got as far as its own error.
    CHECK_THAT(r.out, !Catch::Contains("rank"));
  }
}

TEST_CASE("a bf16 profile sends 2 bytes per activation value and makes plan count 2", "[profile][plan][precision]") {
  const std::string path = std::string(PPLAB_TEST_TMP_DIR) + "/precision_profile_bf16.json";
  const int B = 2, L = 16, C = 32;  // tiny: hidden 32
  const PplabRun r = Pplab(
      "profile --model tiny -k 2 --microbatch-size 2 --seq-len 16 --warmup 1 --repeats 3 "
      "--precision bf16 -o " +
      path);
  INFO(r.out);
  REQUIRE(r.code == 0);
  const auto doc = nlohmann::json::parse(ReadTextFile(path));
  CHECK(doc["meta"]["precision"] == "bf16");
  // Stage 0 sends hidden (B,L,C) in bf16 and the mask (B,L) int64; the last
  // stage its input gradient (B,L,C) in bf16.
  CHECK(doc["stages"][0]["message_bytes"].get<int64_t>() == B * L * C * 2 + B * L * 8);
  CHECK(doc["stages"][1]["message_bytes"].get<int64_t>() == B * L * C * 2);
  std::printf("bf16 profile, tiny, 2 x 16 tokens: activation bytes of stage 0 %lld, stage 1 %lld\n",
              doc["stages"][0]["activation_bytes"].get<long long>(),
              doc["stages"][1]["activation_bytes"].get<long long>());
  // Its bytes predict a bf16 run's measured peak as the fp32 profile's do an
  // fp32 run's (profile_cli_test.cpp): within 10 %.
  for (const char* schedule : {"gpipe", "1f1b", "zb-h1"}) {
    const PplabRun sim = Pplab(std::string("simulate -s ") + schedule + " -k 2 -m 4 --cost " + path + " --json");
    const PplabRun train =
        Pplab(std::string("train -s ") + schedule +
              " -k 2 -m 4 --model tiny --batch-size 8 --seq-len 16 --steps 2 --measure-memory --json --synthetic"
              " --out '' -q --eval-every 0 --precision bf16");
    INFO(schedule << "\n" << sim.out << "\n" << train.out);
    REQUIRE(sim.code == 0);
    const auto predicted = nlohmann::json::parse(sim.out)["per_rank"];
    const auto measured = Json(train)["measured_peak_activation_bytes"];
    REQUIRE(measured.size() == 2);
    for (int r = 0; r < 2; ++r) {
      const double want = predicted[r]["peak_activation_bytes"].get<double>(), got = measured[r].get<double>();
      std::printf("bf16 peak activation bytes %-6s rank %d: predicted %.0f, measured %.0f (%+.1f %%)\n", schedule, r,
                  want, got, 100 * (want - got) / got);
      CHECK(want <= 1.1 * got);
      CHECK(want >= 0.9 * got);
    }
  }
  // plan takes the profile's precision, and refuses another one.
  const std::string plan = std::string(PPLAB_TEST_TMP_DIR) + "/precision_plan.json";
  const PplabRun p =
      Pplab("plan --model tiny -k 2 --global-batch 8 --memory-per-rank 1GiB --cost " + path + " --json -o " + plan);
  INFO(p.out);
  REQUIRE(p.code == 0);
  CHECK(nlohmann::json::parse(p.out)["precision"] == "bf16");
  const PplabRun refused = Pplab("plan --model tiny -k 2 --global-batch 8 --memory-per-rank 1GiB --cost " + path +
                                 " --precision fp32 -o " + plan);
  INFO(refused.out);
  CHECK(refused.code != 0);
  CHECK(CountLines(refused.out) == 1);
  CHECK_THAT(refused.out, Catch::Contains("--cost " + path + " was measured with --precision bf16, not fp32"));
  // Analytic costs: bf16 halves the activation bytes of the formulas, not the 16 B per parameter.
  auto peak = [&](const std::string& precision) {
    const PplabRun a = Pplab(
        "plan --model tiny -k 2 --global-batch 8 --seq-len 64 --memory-per-rank 1GiB "
        "--schedules gpipe --json --precision " +
        precision + " -o " + plan);
    INFO(a.out);
    REQUIRE(a.code == 0);
    return nlohmann::json::parse(a.out)["best"]["peak_memory_bytes"].get<double>();
  };
  const double fp32_peak = peak("fp32"), bf16_peak = peak("bf16");
  std::printf("plan, tiny, gpipe K=2 G=8 L=64: analytic peak memory per rank fp32 %.0f B, bf16 %.0f B\n", fp32_peak,
              bf16_peak);
  CHECK(bf16_peak < fp32_peak);
  CHECK(bf16_peak > fp32_peak / 2);  // the model state does not shrink
}

}  // namespace pplab::train_precision_test
