// Recomputed stages (ExecutorOptions::recompute): the same gradients bit for
// bit, and the memory of a stage that keeps its inputs only.
#include <torch/torch.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <set>
#include <string>

#include "models/partition.h"
#include "runtime/exec/executor.h"
#include "runtime/exec/memory_meter.h"
#include "schedules/generators.h"
#include "schedules/lowering.h"
#include "sim/zb_auto.h"
#include "tests/runtime/exec/executor_test_support.h"

namespace pplab::executor_recompute_test {
namespace {

// The loss and gradients of `name` with the stages in `recompute`
// recomputed equal, bit for bit, those of the same plan without.
void CheckRecomputeExact(const std::string& name, int K, int M, int v, int layers, std::set<StageId> recompute) {
  torch::manual_seed(0);
  const LlamaConfig c = Tiny(layers);
  const Batch batch = MakeBatch(c, 8, 12, 99);
  const Schedule schedule = LoweredPlan(name, K, M, v);
  if (recompute.empty()) {
    for (StageId s = 0; s < schedule.stages; ++s) recompute.insert(s);
  }
  const Partition partition = MakePartition(c, schedule.ModelStages(), "uniform");
  const PipelineRun plain = RunPipeline(c, schedule, partition, batch, 1234);
  ExecutorOptions options;
  options.recompute = recompute;
  const PipelineRun again = RunPipeline(c, schedule, partition, batch, 1234, options);
  INFO(name << " K=" << K << " M=" << M << " S=" << schedule.stages << ", " << recompute.size()
            << " stages recomputed");
  CHECK(again.loss == plain.loss);
  REQUIRE(again.grads.size() == plain.grads.size());
  for (const auto& [param, grad] : plain.grads) {
    INFO(param);
    CHECK(torch::equal(again.grads.at(param), grad));
  }
  for (RankId r = 0; r < K; ++r) {
    REQUIRE(again.events[r].size() == schedule.programs[r].size());
    for (size_t i = 0; i < again.events[r].size(); ++i) CHECK(again.events[r][i].action == schedule.programs[r][i]);
  }
}

}  // namespace

TEST_CASE("recomputed stages give every schedule's gradients bit for bit", "[executor][recompute]") {
  at::set_num_threads(1);
  for (const GeneratorInfo& g : Generators()) {
    SECTION(g.name) { CheckRecomputeExact(g.name, 2, 4, g.default_virtual, 4, {}); }
  }
  // Two stages on one rank hand activations over without a message, in
  // both directions between a recomputed stage and one that is not.
  SECTION("interleaved-1f1b K=1 v=2, stage 0 only") { CheckRecomputeExact("interleaved-1f1b", 1, 2, 2, 4, {0}); }
  SECTION("interleaved-1f1b K=1 v=2, stage 1 only") { CheckRecomputeExact("interleaved-1f1b", 1, 2, 2, 4, {1}); }
  SECTION("zb-v K=2, stages 1 and 2") { CheckRecomputeExact("zb-v", 2, 4, 2, 4, {1, 2}); }
  SECTION("dualpipev K=4 M=8") { CheckRecomputeExact("dualpipev", 4, 8, 2, 8, {}); }
}

TEST_CASE("a recomputed stage holds its inputs, not its activations, between F and B", "[executor][recompute]") {
  at::set_num_threads(1);
  LlamaConfig c = Tiny(4);
  const Batch batch = MakeBatch(c, 8, 32, 5);
  const Partition whole = PartitionUniform(c, 1);
  // One rank, four microbatches: GPipe holds all four microbatches'
  // activations at once, 1F1B one at a time.
  auto peak = [&](const std::string& name, bool recompute) {
    const Schedule schedule = Lower(Generate(name, {1, 4, 1}));
    ExecutorOptions options;
    options.memory = &MemoryMeter::Cpu();
    if (recompute) options.recompute = {0};
    return RunPipeline(c, schedule, whole, batch, 1234, options).peak_activation_bytes.at(0);
  };
  const Bytes gpipe = peak("gpipe", false), one_f_one_b = peak("1f1b", false);
  const Bytes gpipe_recomputed = peak("gpipe", true), one_f_one_b_recomputed = peak("1f1b", true);
  INFO("peak activation bytes: gpipe " << gpipe << ", recomputed " << gpipe_recomputed << "; 1f1b " << one_f_one_b
                                       << ", recomputed " << one_f_one_b_recomputed);
  // What the test tells apart: four microbatches' activations against one
  // (each peak also holds one backward's temporaries).
  REQUIRE(gpipe > 2 * one_f_one_b);
  // Recomputed, stage 0 keeps only its tokens (which the batch holds anyway),
  // so GPipe's peak is one microbatch's forward and backward, as 1F1B's.
  CHECK(gpipe_recomputed <= one_f_one_b + one_f_one_b / 20);
  CHECK(one_f_one_b_recomputed <= one_f_one_b + one_f_one_b / 20);
}

TEST_CASE("the executor reports the bytes held after each action, as the simulator's counter holds them",
          "[executor][memory]") {
  at::set_num_threads(1);
  LlamaConfig c = Tiny(4);
  const Batch batch = MakeBatch(c, 8, 32, 5);
  const Schedule schedule = Lower(Generate("gpipe", {1, 4, 1}));
  ExecutorOptions options;
  options.memory = &MemoryMeter::Cpu();
  const PipelineRun run = RunPipeline(c, schedule, PartitionUniform(c, 1), batch, 1234, options);
  const std::vector<std::optional<Bytes>>& live = run.live_after.at(0);
  const std::vector<TimelineEvent>& events = run.events.at(0);
  REQUIRE(live.size() == events.size());
  // GPipe on one rank: F0..F3, then B0..B3. Each F keeps one microbatch's
  // activations, the same for each; each B frees one. What the step's end
  // holds beyond its start is the parameters' gradients, which this first
  // step makes, and the microbatches' losses, kept for the step.
  std::vector<Bytes> held;
  for (size_t i = 0; i < events.size(); ++i) {
    INFO(FormatAction(events[i].action));
    REQUIRE(live[i].has_value());
    held.push_back(*live[i]);
    CHECK(*live[i] <= run.peak_activation_bytes.at(0));
  }
  REQUIRE(held.size() == 8);
  const Bytes one = held[0];
  CHECK(one > 0);
  for (int m = 1; m < 4; ++m) CHECK(held[m] - held[m - 1] == one);
  for (int m = 4; m < 8; ++m) CHECK(held[m] < held[m - 1]);
  Bytes grads = 0;
  for (const auto& [name, g] : run.grads) grads += g.numel() * static_cast<Bytes>(g.element_size());
  INFO("held after the last B " << held[7] << ", gradients " << grads);
  CHECK(held[7] >= grads);
  CHECK(held[7] <= grads + 4 * 64);
  // Without a meter there are none.
  CHECK(RunPipeline(c, schedule, PartitionUniform(c, 1), batch, 1234, {}).live_after.at(0).empty());
}

}  // namespace pplab::executor_recompute_test
