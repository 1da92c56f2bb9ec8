// Multi-process training (Gloo over loopback) gives the single-process
// losses and gradients: every schedule, data parallelism, two copies of the
// model, a PyTorch plan, global-norm clipping and bf16.
#include <torch/torch.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "schedules/file_io.h"
#include "tests/run_pplab.h"
#include "tests/tools/grad_files.h"
#include "tests/tools/train_cli_test_support.h"

namespace pplab::train_parity_test {
namespace {

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
    "dualpipe and dualpipev (overlapped F&B), interleaved-zb, v-half, v-min and PyTorch's own plans (REDUCE_GRAD, "
    "UNSHARD and RESHARD) give the single-process gradients",
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
      "--plan " + data + "/pytorch/gpipe_k2_m2_compute_only.csv -m 2",
      // PyTorch's lowered 1F1B: its UNSHARD/RESHARD left out (no FSDP)
      "--plan " + data + "/pytorch/1f1b_k2_m2_compute_comms.csv -m 2"};
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

}  // namespace pplab::train_parity_test
