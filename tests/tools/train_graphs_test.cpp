// `pplab train --cuda-graphs` and `pplab profile --cuda-graphs` end to end
// on the CPU, their graphed stages over the tests' stand-in
// (PPLAB_TEST_GRAPHS=rerun, runtime/exec/graphed_stage.h), whose replay runs
// the captured work again: the flags' wiring through the workers, the
// trainer's per-capture weight casts, the summary's slots and their bytes,
// and the profile's slots as simulate holds them. The CUDA graphs
// themselves are the gpu test's (tests/gpu/gpu_train_test.cpp).
#include <torch/torch.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "schedules/file_io.h"
#include "schedules/generators.h"
#include "schedules/lowering.h"
#include "tests/run_pplab.h"
#include "tests/tools/grad_files.h"

namespace pplab::train_graphs_test {
namespace {

const char kStandIn[] = "PPLAB_TEST_GRAPHS=rerun ";

nlohmann::json Train(const std::string& args, const std::string& env = "") {
  const PplabRun r = Pplab(
      "train --synthetic --out '' -q --model tiny --batch-size 8 --seq-len 32 --steps 3 --warmup-steps 0 "
      "--eval-every 0 --seed 3 --json " +
          args,
      env);
  INFO(args << "\n" << r.out);
  REQUIRE(r.code == 0);
  return nlohmann::json::parse(r.out.substr(r.out.find('{')));
}

std::string Dir(const std::string& name) {
  const std::string dir = std::string(PPLAB_TEST_TMP_DIR) + "/graphs_" + name;
  RemoveTree(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace

TEST_CASE("train --cuda-graphs over the stand-in trains the eager run's losses and reports the slots it captured",
          "[train][graphs]") {
  for (const auto& [name, v] : {std::pair<const char*, int>{"gpipe", 1}, {"1f1b", 1}, {"interleaved-1f1b", 2}}) {
    const int K = std::string(name) == "gpipe" ? 1 : 2;
    const std::string plan =
        "-s " + std::string(name) + " -k " + std::to_string(K) + " -m 4" + (v > 1 ? " -v " + std::to_string(v) : "");
    INFO(plan);
    // The slots stage 0 needs: the most microbatches its program holds
    // between their F and their B (4 for GPipe and for interleaved's
    // warm-up at K=2, 2 for 1F1B at K=2).
    int held = 0, slots = 0;
    const Schedule schedule = Lower(Generate(name, {K, 4, v}));
    for (const Action& a : schedule.programs[0]) {
      if (a.stage != 0) continue;
      if (a.kind == ActionKind::kForward) slots = std::max(slots, ++held);
      if (a.kind == ActionKind::kBackward) --held;
    }
    const nlohmann::json eager = Train(plan), graphed = Train(plan + " --cuda-graphs", kStandIn);
    CHECK(graphed["cuda_graphs"] == true);
    CHECK(graphed["losses"] == eager["losses"]);  // the same work, bit for bit
    CHECK(graphed["cuda_graph_slots"]["0"] == slots);
    CHECK_FALSE(eager.contains("cuda_graph_slots"));
    // Every slot of a stage holds the same: at least its outputs and their
    // gradient (fp32 hidden states, or logits at K=1: 2 rows x 32 positions
    // x 32 or 256 values) and the embedding's gradient (256 x 32).
    const Bytes bytes = graphed["cuda_graph_slot_bytes"]["0"].get<Bytes>();
    const Bytes outputs = 2 * 32 * (K == 1 ? 256 : 32) * 4;
    CHECK(bytes % slots == 0);
    CHECK(bytes / slots >= 2 * outputs + 256 * 32 * 4);
  }
  // bf16: each capture casts its weights itself, where the eager step
  // shares one cast a weight; the casts are the same values.
  const std::string bf16 = "-s 1f1b -k 2 -m 4 --precision bf16";
  const nlohmann::json eager = Train(bf16), graphed = Train(bf16 + " --cuda-graphs", kStandIn);
  const auto want = eager["losses"].get<std::vector<double>>(), got = graphed["losses"].get<std::vector<double>>();
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) CHECK(got[i] == Approx(want[i]).epsilon(1e-6));
}

TEST_CASE("train --cuda-graphs over the stand-in keeps the eager losses with replicas and without flat buffers",
          "[train][graphs]") {
  // Replicas all-reduce the flat gradients the graphs sum into, sharded
  // or not; without flat buffers the graphed stage places every .grad
  // before its first capture (runtime/exec/graphed_stage.h).
  for (const std::string args :
       {"-s 1f1b -k 2 -m 2 --dp 2", "-s 1f1b -k 2 -m 2 --dp 2 --shard-optimizer", "-s 1f1b -k 2 -m 4 --no-flat-params",
        "-s gpipe -k 1 -m 4 --no-flat-params --precision bf16"}) {
    INFO(args);
    const nlohmann::json eager = Train(args), graphed = Train(args + " --cuda-graphs", kStandIn);
    CHECK(graphed["losses"] == eager["losses"]);
    CHECK(graphed["cuda_graph_slots"]["0"].get<int>() >= 1);
  }
}

TEST_CASE("train --cuda-graphs over the stand-in gives the eager run's gradients", "[train][graphs]") {
  const std::string ref = Dir("ref"), dir = Dir("graphed");
  const std::string plan = "-s 1f1b -k 2 -m 4 --steps 1 --dump-grads ";
  Train(plan + ref);
  Train(plan + dir + " --cuda-graphs", kStandIn);
  const GradError e = CompareGrads(ref, dir);
  CHECK(e.compared == 39);  // the tiny preset's parameters
  CHECK(e.max_abs == 0);
}

TEST_CASE(
    "profile --cuda-graphs over the stand-in measures each stage's slot, which simulate holds per microbatch in "
    "flight",
    "[profile][graphs]") {
  const std::string path = Dir("profile") + "/cost.json";
  const PplabRun r = Pplab(
      "profile --model tiny -k 2 --microbatch-size 2 --seq-len 32 --warmup 1 --repeats 2 --cuda-graphs -o " + path,
      kStandIn);
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("the stages ran as CUDA graphs"));
  const nlohmann::json doc = nlohmann::json::parse(ReadTextFile(path));
  CHECK(doc["meta"]["cuda_graphs"] == true);
  // Graphed stages run whole backwards: B is timed, I and W are not.
  for (const auto& stage : doc["stages"]) {
    CHECK(stage.contains("backward_ms"));
    CHECK_FALSE(stage.contains("backward_input_ms"));
    CHECK_FALSE(stage.contains("backward_weight_ms"));
  }
  // A slot of the first stage holds what one of train's holds at the same
  // microbatch (batch 8 in 4 microbatches: 2 sequences of 32): two
  // measurements by two paths.
  const Bytes first = doc["stages"][0]["graph_slot_bytes"].get<Bytes>();
  const Bytes last = doc["stages"][1]["graph_slot_bytes"].get<Bytes>();
  const nlohmann::json run = Train("-s 1f1b -k 2 -m 4 --cuda-graphs --measure-memory", kStandIn);
  CHECK(first * run["cuda_graph_slots"]["0"].get<Bytes>() == run["cuda_graph_slot_bytes"]["0"].get<Bytes>());
  // The last stage's slot holds the logits and their gradient at least.
  CHECK(last >= 2 * (2 * 32 * 256 * 4));
  // simulate: 1F1B at K=2 keeps two microbatches in flight on rank 0, one
  // on rank 1, and each rank keeps that many slots.
  const PplabRun sim = Pplab("simulate -s 1f1b -k 2 -m 4 --json --cost " + path);
  INFO(sim.out);
  REQUIRE(sim.code == 0);
  const nlohmann::json j = nlohmann::json::parse(sim.out);
  CHECK(j["per_rank"][0]["peak_parts"]["graphs"] == 2 * first);
  CHECK(j["per_rank"][1]["peak_parts"]["graphs"] == last);
  // Each rank's peak, slots included, predicted from the profile against
  // the one train --measure-memory measured in its last step, which held
  // every slot from the steps before it (Stage::HeldBytes): 1F1B's, and
  // GPipe's four slots a rank.
  for (const std::string schedule : {"1f1b", "gpipe"}) {
    const nlohmann::json measured =
        schedule == "1f1b" ? run : Train("-s gpipe -k 2 -m 4 --cuda-graphs --measure-memory", kStandIn);
    const PplabRun predicted = Pplab("simulate -s " + schedule + " -k 2 -m 4 --json --cost " + path);
    REQUIRE(predicted.code == 0);
    for (int r = 0; r < 2; ++r) {
      const double want = nlohmann::json::parse(predicted.out)["per_rank"][r]["peak_activation_bytes"].get<double>();
      const double got = measured["measured_peak_activation_bytes"][r].get<double>();
      std::printf("graphed %s rank %d: peak activation bytes predicted %.0f, measured %.0f (%+.2f %%)\n",
                  schedule.c_str(), r, want, got, 100 * (want - got) / got);
      CHECK(want <= 1.005 * got);
      CHECK(want >= 0.995 * got);
    }
  }
  // plan fitted to it plans graphed runs, and says to train them so.
  const std::string out = Dir("plan") + "/plan.json";
  const PplabRun plan =
      Pplab("plan --model tiny --global-batch 8 --seq-len 32 --memory-per-rank 1GiB --ranks 2 --json -o " + out +
            " --cost " + path);
  INFO(plan.out);
  REQUIRE(plan.code == 0);
  const nlohmann::json planned = nlohmann::json::parse(plan.out);
  CHECK(planned["byte_scales"]["graph_slot"].get<double>() > 0);
  CHECK(planned["cuda_graphs"] == true);
  CHECK_THAT(planned["train_command"].get<std::string>(), Catch::EndsWith(" --cuda-graphs"));
  for (const auto& cand : planned["candidates"]) {
    CHECK_FALSE(FindGenerator(cand["schedule"].get<std::string>()).split_backward);
  }
  // What graphed stages cannot run is refused in one line.
  const std::vector<std::pair<std::string, std::string>> refusals = {
      {"simulate -s zb-h1 -k 2 -m 4 --cost " + path, "zb-h1 splits B into I and W"},
      {"simulate -s 1f1b -k 2 -m 4 --recompute all --cost " + path, "it is not recomputed"},
      {"plan --model tiny --global-batch 8 --seq-len 32 --memory-per-rank 1GiB --ranks 2 --schedules zb-h1 --cost " +
           path,
       "--schedules zb-h1: the profiles ran as CUDA graphs"},
      {"train --synthetic --out '' -q --model tiny --batch-size 8 --seq-len 32 --steps 1 -s 1f1b -k 2 -m 4 "
       "--sim-cost " +
           path,
       "was measured with --cuda-graphs, this run is eager"}};
  for (const auto& [args, why] : refusals) {
    const PplabRun refused = Pplab(args);
    INFO(args << "\n" << refused.out);
    CHECK(refused.code != 0);
    CHECK(refused.out.find("pplab: error: ") == 0);
    CHECK_THAT(refused.out, Catch::Contains(why));
    CHECK(std::count(refused.out.begin(), refused.out.end(), '\n') == 1);
  }
}

TEST_CASE("profile --cuda-graphs refuses --tp and a device other than CUDA, before any worker starts",
          "[profile][graphs]") {
  const std::string ok = " --model tiny -k 2 --microbatch-size 1 --seq-len 8 --repeats 1 --cuda-graphs";
  const PplabRun cpu = Pplab("profile" + ok);
  CHECK(cpu.code != 0);
  CHECK(cpu.out == "pplab: error: --cuda-graphs captures a GPU's work: it needs --device cuda, got --device cpu\n");
  const PplabRun tp = Pplab("profile" + ok + " --tp 2", kStandIn);
  CHECK(tp.code != 0);
  CHECK_THAT(tp.out, Catch::StartsWith("pplab: error: --cuda-graphs with --tp 2: "));
}

}  // namespace pplab::train_graphs_test
