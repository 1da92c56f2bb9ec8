// Graphed stages (runtime/exec/graphed_stage.h) over the stand-in backend,
// whose replay runs the captured work again: the same loss and gradients as
// eager stages in every schedule, one slot per microbatch in flight, slots
// reused from step to step, what the slots hold, and eager forwards where
// no graph may run.
#include "runtime/exec/graphed_stage.h"

#include <ATen/autocast_mode.h>
#include <torch/torch.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>

#include "models/partition.h"
#include "runtime/comm/fake_transport.h"
#include "runtime/exec/autocast.h"
#include "runtime/exec/executor.h"
#include "schedules/generators.h"
#include "schedules/lowering.h"
#include "sim/zb_auto.h"
#include "tests/runtime/exec/executor_test_support.h"

namespace pplab::graphed_stage_test {
namespace {

// A stage that runs another, shared: the test keeps the graphed stages of a
// run past RunPipeline, which owns what the executor ran.
class Shared final : public Stage {
 public:
  explicit Shared(std::shared_ptr<Stage> stage) : stage_(std::move(stage)) {}
  TensorList Forward(const TensorList& inputs) override { return stage_->Forward(inputs); }
  std::vector<std::pair<std::string, at::Tensor>> NamedParameters() override { return stage_->NamedParameters(); }

 private:
  std::shared_ptr<Stage> stage_;
};

// The stages of a run, graphed over one stand-in backend, kept to read
// their statistics after it.
struct Graphed {
  std::shared_ptr<GraphBackend> backend = MakeRerunGraphBackend();
  std::map<StageId, std::shared_ptr<GraphedStage>> stages;
  StageWrap Wrap() {
    return [this](StageId s, std::unique_ptr<Stage> inner) -> std::unique_ptr<Stage> {
      stages[s] = MakeGraphedStage(std::move(inner), backend);
      return std::make_unique<Shared>(stages[s]);
    };
  }
};

void CheckGraphedExact(const std::string& name, int K, int M, int v, int layers = 4) {
  torch::manual_seed(0);
  const LlamaConfig c = Tiny(layers);
  const Batch batch = MakeBatch(c, 8, 12, 99);
  const Schedule schedule = LoweredPlan(name, K, M, v);
  const Partition partition = MakePartition(c, schedule.ModelStages(), "uniform");
  const PipelineRun plain = RunPipeline(c, schedule, partition, batch, 1234);
  Graphed graphed;
  const PipelineRun again = RunPipeline(c, schedule, partition, batch, 1234, {}, graphed.Wrap());
  INFO(name << " K=" << K << " M=" << M << " S=" << schedule.stages);
  CHECK(again.loss == plain.loss);
  REQUIRE(again.grads.size() == plain.grads.size());
  for (const auto& [param, grad] : plain.grads) {
    INFO(param);
    CHECK(torch::equal(again.grads.at(param), grad));
  }
  // Every forward is replayed, except those whose weight products a W
  // computes (I and W split the backward), which run eagerly; every
  // replayed forward's backward is replayed.
  for (StageId s = 0; s < schedule.stages; ++s) {
    // The microbatches stage s runs (half of them, on each copy of
    // DualPipe's model), and how many of them split B.
    int forwards = 0, split = 0;
    for (const Action& a : schedule.programs[schedule.placement[s]]) {
      const ComputeParts parts = PartsOf(a);
      for (int i = 0; i < parts.count; ++i) {
        if (parts.part[i].stage != s) continue;
        if (parts.part[i].kind == ActionKind::kForward) ++forwards;
        if (parts.part[i].kind == ActionKind::kBackwardInput) ++split;
      }
    }
    const GraphStats st = graphed.stages.at(s)->Stats();
    INFO("stage " << s);
    CHECK(st.eager_forwards == split);
    CHECK(st.forward_replays == forwards - split);
    CHECK(st.backward_replays == forwards - split);
    CHECK(st.slots <= forwards - split);
    if (split < forwards) CHECK(st.slots >= 1);
  }
}

}  // namespace

TEST_CASE("graphed stages give every schedule's loss and gradients bit for bit", "[graphed]") {
  at::set_num_threads(1);
  for (const GeneratorInfo& g : Generators()) {
    SECTION(g.name) { CheckGraphedExact(g.name, 2, 4, g.default_virtual); }
  }
  SECTION("interleaved-1f1b K=1 v=2") { CheckGraphedExact("interleaved-1f1b", 1, 4, 2); }
  SECTION("dualpipev K=4 M=8") { CheckGraphedExact("dualpipev", 4, 8, 2, 8); }
}

TEST_CASE(
    "a graphed stage captures one slot per microbatch in flight, counts what they hold, and reuses them in the next "
    "step",
    "[graphed]") {
  at::set_num_threads(1);
  const LlamaConfig c = Tiny(2);
  const Batch batch = MakeBatch(c, 4, 8, 7);
  const int M = 4;
  std::vector<MicrobatchData> microbatches;
  const auto inputs = batch.inputs.chunk(M), masks = batch.mask.chunk(M), targets = batch.targets.chunk(M);
  for (int m = 0; m < M; ++m) microbatches.push_back({{inputs[m], masks[m]}, targets[m]});
  // GPipe at K=1 holds all M microbatches between their F and B; 1F1B one.
  for (const auto& [name, in_flight] : {std::pair<std::string, int>{"gpipe", M}, {"1f1b", 1}}) {
    INFO(name);
    const Schedule schedule = Lower(Generate(name, {1, M, 1}));
    std::unique_ptr<GraphedStage> stage =
        MakeGraphedStage(BuildLlamaStage(c, PartitionUniform(c, 1), 0, 5, torch::kCPU), MakeRerunGraphBackend());
    auto network = std::make_shared<FakeNetwork>();
    FakeTransport transport(0, network);
    Executor executor(schedule, 0, {{0, stage.get()}}, transport, CrossEntropy(), {});
    const double scale = 1.0 / static_cast<double>(batch.valid_tokens);
    const StepResult first = executor.RunStep(microbatches, scale, std::chrono::steady_clock::now());
    CHECK(stage->Stats().slots == in_flight);
    CHECK(stage->Stats().forward_replays == M);
    // Each slot holds its copy of the inputs (tokens and mask, int64), the
    // logits and their gradient (fp32), and the gradients autograd hands
    // back for the parameters (the stand-in has no pool; the capture leaves
    // these). The projections sum their weights' products into .grad
    // themselves (models/projections.h), so they hand back none: counted
    // from an eager stage's autograd.
    const int64_t rows = inputs[0].size(0), T = inputs[0].size(1);
    Bytes param_bytes = 0;
    {
      std::unique_ptr<Stage> eager = BuildLlamaStage(c, PartitionUniform(c, 1), 0, 5, torch::kCPU);
      TensorList params;
      for (auto& [n, p] : eager->NamedParameters()) params.push_back(p);
      const at::Tensor logits = eager->Forward({inputs[0], masks[0]}).at(0);
      for (const at::Tensor& g : torch::autograd::grad({logits}, params, {torch::ones_like(logits)}, false, false,
                                                       /*allow_unused=*/true)) {
        if (g.defined()) param_bytes += g.numel() * 4;
      }
      CHECK(param_bytes > 0);
    }
    const Bytes per_slot = 2 * rows * T * 8 + 2 * rows * T * c.vocab_size * 4 + param_bytes;
    CHECK(stage->Stats().slot_bytes == in_flight * per_slot);
    for (auto& [n, p] : stage->NamedParameters()) p.mutable_grad().zero_();
    const StepResult second = executor.RunStep(microbatches, scale, std::chrono::steady_clock::now());
    CHECK(stage->Stats().slots == in_flight);
    CHECK(stage->Stats().slot_bytes == in_flight * per_slot);
    CHECK(stage->Stats().forward_replays == 2 * M);
    CHECK(stage->Stats().backward_replays == 2 * M);
    // The same step twice, the weights unchanged: the same losses.
    for (int m = 0; m < M; ++m) CHECK(second.losses.at(m) == first.losses.at(m));
    // A forward without autograd (evaluation) runs eagerly, capturing nothing.
    {
      torch::NoGradGuard no_grad;
      const TensorList out = stage->Forward({inputs[0], masks[0]});
      CHECK(out.at(0).size(-1) == c.vocab_size);
    }
    CHECK(stage->Stats().eager_forwards == 1);
    CHECK(stage->Stats().slots == in_flight);
  }
}

TEST_CASE("a graphed stage captures again for inputs of another shape", "[graphed]") {
  at::set_num_threads(1);
  const LlamaConfig c = Tiny(2);
  std::unique_ptr<GraphedStage> stage =
      MakeGraphedStage(BuildLlamaStage(c, PartitionUniform(c, 1), 0, 5, torch::kCPU), MakeRerunGraphBackend());
  std::unique_ptr<Stage> eager = BuildLlamaStage(c, PartitionUniform(c, 1), 0, 5, torch::kCPU);
  for (const int64_t T : {8, 6, 8}) {
    const Batch batch = MakeBatch(c, 2, T, 11);
    const at::Tensor loss = CrossEntropy()(stage->Forward({batch.inputs, batch.mask}), batch.targets);
    const at::Tensor want = CrossEntropy()(eager->Forward({batch.inputs, batch.mask}), batch.targets);
    CHECK(loss.item<double>() == want.item<double>());
    loss.backward();
    want.backward();
  }
  CHECK(stage->Stats().slots == 2);  // T = 8 and T = 6; the third reuses the first
  const auto graphed_params = stage->NamedParameters(), eager_params = eager->NamedParameters();
  for (size_t i = 0; i < graphed_params.size(); ++i) {
    INFO(graphed_params[i].first);
    CHECK(torch::equal(graphed_params[i].second.grad(), eager_params[i].second.grad()));
  }
}

TEST_CASE("a graphed stage's parameters keep their gradients where its backward was captured", "[graphed]") {
  at::set_num_threads(1);
  const LlamaConfig c = Tiny(2);
  std::unique_ptr<GraphedStage> stage =
      MakeGraphedStage(BuildLlamaStage(c, PartitionUniform(c, 1), 0, 5, torch::kCPU), MakeRerunGraphBackend());
  const Batch batch = MakeBatch(c, 2, 8, 11);
  auto step = [&] { CrossEntropy()(stage->Forward({batch.inputs, batch.mask}), batch.targets).backward(); };
  step();
  // Each gradient was placed before the capture and summed into there.
  for (auto& [name, p] : stage->NamedParameters()) {
    INFO(name);
    REQUIRE(p.grad().defined());
    CHECK(p.grad().abs().sum().item<double>() > 0);
  }
  // Zeroed in place, the next backward replays.
  for (auto& [name, p] : stage->NamedParameters()) p.mutable_grad().zero_();
  step();
  CHECK(stage->Stats().backward_replays == 2);
  // A gradient put elsewhere would miss what the graph writes: refused.
  auto params = stage->NamedParameters();
  params.at(1).second.mutable_grad() = torch::zeros_like(params.at(1).second);
  const at::Tensor loss = CrossEntropy()(stage->Forward({batch.inputs, batch.mask}), batch.targets);
  CHECK_THROWS_WITH(loss.backward(), Catch::Contains("graphed stage: the gradient of " + params.at(1).first +
                                                     " is no longer where the backward graph was captured"));
}

TEST_CASE("a capture that fails says which part failed, in one line", "[graphed]") {
  // A backend whose captures fail as a CUDA capture does on a host read.
  class Failing final : public GraphBackend {
   public:
    void WarmUp(const std::function<void()>& work) override { work(); }
    std::unique_ptr<GraphCapture> Capture(const std::function<void()>&, const GraphCapture*) override {
      throw std::runtime_error("operation not permitted when stream is capturing\n(a stack follows)");
    }
  };
  const LlamaConfig c = Tiny(2);
  std::unique_ptr<GraphedStage> stage =
      MakeGraphedStage(BuildLlamaStage(c, PartitionUniform(c, 1), 0, 5, torch::kCPU), std::make_shared<Failing>());
  const Batch batch = MakeBatch(c, 2, 8, 11);
  CHECK_THROWS_WITH(stage->Forward({batch.inputs, batch.mask}),
                    "graphed stage: capturing the forward failed: operation not permitted when stream is capturing");
}

TEST_CASE("under bf16 a graphed stage's captures cast the weights themselves inside a cache of casts", "[graphed]") {
  // Whether a weight's bf16 cast would come from a cache here: autocast's
  // (a single weight) and CachedStackedCast's (weights seen as one matrix).
  const at::Tensor weight = torch::randn({4, 4}, torch::requires_grad());
  const at::Tensor stacked = torch::randn({8, 4});
  auto casts_cached = [&] {
    const auto cast = [&] { return at::autocast::cached_cast(at::kBFloat16, weight, c10::DeviceType::CPU); };
    return std::make_pair(cast().is_same(cast()),
                          CachedStackedCast(stacked, at::kBFloat16).is_same(CachedStackedCast(stacked, at::kBFloat16)));
  };
  // A backend that checks, as the work it is handed runs, whether the casts
  // it would capture come from a cache: a CUDA graph would then read a copy
  // made outside it, stale after the update and freed when its scope ends.
  class Watching final : public GraphBackend {
   public:
    explicit Watching(std::function<std::pair<bool, bool>()> check) : check_(std::move(check)) {}
    void WarmUp(const std::function<void()>& work) override {
      seen.push_back(check_());
      work();
    }
    std::unique_ptr<GraphCapture> Capture(const std::function<void()>& work, const GraphCapture* pool) override {
      seen.push_back(check_());
      return rerun_->Capture(work, pool);
    }
    std::vector<std::pair<bool, bool>> seen;

   private:
    std::function<std::pair<bool, bool>()> check_;
    std::unique_ptr<GraphBackend> rerun_ = MakeRerunGraphBackend();
  };
  auto watching = std::make_shared<Watching>(casts_cached);
  const LlamaConfig c = Tiny(2);
  const std::unique_ptr<Stage> stage = MixedPrecisionStage(
      MakeGraphedStage(BuildLlamaStage(c, PartitionUniform(c, 1), 0, 5, torch::kCPU), watching), torch::kCPU);
  const Batch batch = MakeBatch(c, 2, 8, 11);
  // As profile's F and B phase runs its stages, and a step whose executor
  // shares casts: inside a scope that keeps them.
  AutocastCacheScope scope;
  AutocastGuard autocast(c10::DeviceType::CPU);
  CHECK(casts_cached() == std::make_pair(true, true));  // what the check sees of a live cache
  const TensorList logits = stage->Forward({batch.inputs, batch.mask});
  REQUIRE(logits.size() == 1);
  CHECK(logits[0].scalar_type() == at::kFloat);
  REQUIRE(watching->seen.size() == 3);  // the warm-up, the forward's capture, the backward's
  for (const auto& [single, stacked_one] : watching->seen) {
    CHECK_FALSE(single);
    CHECK_FALSE(stacked_one);
  }
  // Both caches are back once the capture is over.
  CHECK(at::autocast::is_autocast_cache_enabled());
  CHECK(casts_cached() == std::make_pair(true, true));
}

}  // namespace pplab::graphed_stage_test
