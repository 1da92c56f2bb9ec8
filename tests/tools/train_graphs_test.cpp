// `pplab train --cuda-graphs` end to end on the CPU, its graphed stages over
// the tests' stand-in (PPLAB_TEST_GRAPHS=rerun, runtime/exec/graphed_stage.h),
// whose replay runs the captured work again: the flag's wiring through the
// workers, the trainer's per-capture weight casts and the summary's slots
// and their bytes.
// The CUDA graphs themselves are the gpu test's (tests/gpu/gpu_train_test.cpp).
#include <torch/torch.h>

#include <algorithm>
#include <catch2/catch.hpp>
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

namespace pplab {
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

TEST_CASE("train --cuda-graphs over the stand-in gives the eager run's gradients", "[train][graphs]") {
  const std::string ref = Dir("ref"), dir = Dir("graphed");
  const std::string plan = "-s 1f1b -k 2 -m 4 --steps 1 --dump-grads ";
  Train(plan + ref);
  Train(plan + dir + " --cuda-graphs", kStandIn);
  const GradError e = CompareGrads(ref, dir);
  CHECK(e.compared == 39);  // the tiny preset's parameters
  CHECK(e.max_abs == 0);
}

}  // namespace pplab
