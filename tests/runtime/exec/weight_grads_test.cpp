// A split backward's weight products (runtime/exec/weight_grads.h): the
// deferral's bookkeeping, and a Llama stage's I and W against its B.
#include "runtime/exec/weight_grads.h"

#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "models/llama.h"
#include "models/partition.h"
#include "runtime/exec/autocast.h"
#include "runtime/exec/executor.h"
#include "runtime/train/batches.h"

namespace pplab::weight_grads_test {
namespace {

bool IsProjectionWeight(const std::string& name) {
  return name.find("_proj.weight") != std::string::npos || name == "lm_head.weight";
}

}  // namespace

TEST_CASE("deferred weight work runs once, in the order it came, and scopes nest", "[weight_grads]") {
  auto a = std::make_shared<DeferredWeightGrads>();
  auto b = std::make_shared<DeferredWeightGrads>();
  CHECK(DeferWeightGradsScope::Current() == nullptr);
  {
    DeferWeightGradsScope outer(a);
    CHECK(DeferWeightGradsScope::Current() == a);
    {
      DeferWeightGradsScope inner(b);
      CHECK(DeferWeightGradsScope::Current() == b);
      DeferWeightGradsScope none(nullptr);
      CHECK(DeferWeightGradsScope::Current() == nullptr);
    }
    CHECK(DeferWeightGradsScope::Current() == a);
  }
  CHECK(DeferWeightGradsScope::Current() == nullptr);
  std::vector<int> ran;
  for (int i = 0; i < 3; ++i) a->Add([&ran, i] { ran.push_back(i); });
  CHECK(a->Size() == 3);
  a->Run();
  a->Run();  // nothing is left to run twice
  CHECK(ran == std::vector<int>{0, 1, 2});
  CHECK(a->Size() == 0);
}

TEST_CASE("each deferred piece starts before the previous one finishes", "[weight_grads]") {
  DeferredWeightGrads list;
  std::vector<std::string> log;
  for (int i = 0; i < 3; ++i) {
    list.Add(DeferredWeightGrads::Piece([&log, i]() -> std::function<void()> {
      log.push_back("start " + std::to_string(i));
      return [&log, i] { log.push_back("finish " + std::to_string(i)); };
    }));
  }
  list.Add([&log] { log.push_back("plain"); });
  list.Run();
  CHECK(log == std::vector<std::string>{"start 0", "start 1", "finish 0", "start 2", "finish 1", "finish 2", "plain"});
}

TEST_CASE("a Llama stage's I leaves its projections' weight gradients to W, and I + W give B's bit for bit",
          "[weight_grads]") {
  // Stage 1 of the tiny model in two: layers 2 and 3 and the head, so
  // q/k/v, o, gate/up and down twice, and the head: 9 deferred products.
  const LlamaConfig config = LlamaPreset("tiny");
  const Partition partition = PartitionUniform(config, 2);
  const StepBatch batch = SyntheticBatch(3, 0, 2, 16, config.vocab_size, 1);
  const at::Tensor mask = batch.microbatches.at(0).inputs.at(1);
  for (const bool bf16 : {false, true}) {
    INFO((bf16 ? "bf16" : "fp32"));
    std::unique_ptr<Stage> stage = BuildLlamaStage(config, partition, 1, 7, torch::kCPU);
    if (bf16) stage = MixedPrecisionStage(std::move(stage), c10::kCPU);
    torch::manual_seed(11);
    const at::Tensor hidden = torch::randn({2, 16, config.hidden_size});
    const at::Tensor upstream = torch::randn({2, 16, config.vocab_size});
    std::optional<AutocastCacheScope> casts;
    if (bf16) casts.emplace();
    auto clear = [&] {
      for (auto& [name, p] : stage->NamedParameters()) p.mutable_grad() = at::Tensor();
    };
    auto grads = [&] {
      std::map<std::string, at::Tensor> out;
      for (auto& [name, p] : stage->NamedParameters()) out[name] = p.grad().defined() ? p.grad().clone() : at::Tensor();
      return out;
    };
    // B.
    clear();
    StageSlot whole;
    RunForwardAction(*stage, whole, {hidden, mask}, nullptr, {}, 1.0);
    whole.output_grads = {upstream};
    RunBackwardAction(whole);
    const std::map<std::string, at::Tensor> b_grads = grads();
    // I, then W.
    clear();
    StageSlot split;
    split.deferred = std::make_shared<DeferredWeightGrads>();
    RunForwardAction(*stage, split, {hidden, mask}, nullptr, {}, 1.0);
    split.output_grads = {upstream};
    RunBackwardInputAction(split);
    REQUIRE(split.input_grads.size() == 1);
    REQUIRE(whole.input_grads.size() == 1);
    CHECK(torch::equal(split.input_grads[0], whole.input_grads[0]));
    CHECK(split.deferred->Size() == 9);
    CHECK(split.outputs.empty());  // the graph is gone: W needs only what the products kept
    for (auto& [name, p] : stage->NamedParameters()) {
      INFO("after I: " << name);
      CHECK(p.grad().defined() == !IsProjectionWeight(name));  // norms' and the like are made in I
    }
    RunBackwardWeightAction(split);
    CHECK(split.deferred->Size() == 0);
    for (const auto& [name, g] : grads()) {
      INFO("after W: " << name);
      REQUIRE(g.defined());
      CHECK(torch::equal(g, b_grads.at(name)));
    }
  }
}

}  // namespace pplab::weight_grads_test
