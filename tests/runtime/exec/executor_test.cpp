// Gradient parity: every schedule, run by the executor with K ranks as
// threads over the in-process transport, must produce the loss and every
// parameter gradient of single-process training on the same batch.
#include "runtime/exec/executor.h"

#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <thread>

#include "models/llama.h"
#include "runtime/comm/fake_transport.h"
#include "runtime/train/model_copies.h"
#include "schedules/error.h"
#include "schedules/generators.h"
#include "sim/zb_auto.h"
#include "schedules/lowering.h"

namespace pplab {
namespace {

constexpr int64_t kPad = 0;

struct Batch {
  at::Tensor inputs, mask, targets;  // (B,T) each
  int64_t valid_tokens;
};

// Random tokens in [1, V) with some rows padded at the end.
Batch MakeBatch(const LlamaConfig& c, int64_t B, int64_t T, uint64_t seed) {
  auto gen = at::detail::createCPUGenerator(seed);
  auto tokens = torch::randint(1, c.vocab_size, {B, T + 1}, gen, torch::kLong);
  for (int64_t b = 1; b < B; b += 2) tokens[b].narrow(0, T + 1 - (b % 5 + 2), b % 5 + 2).fill_(kPad);
  Batch batch;
  batch.inputs = tokens.narrow(1, 0, T).clone();
  batch.targets = tokens.narrow(1, 1, T).clone();
  batch.mask = (batch.inputs != kPad).to(torch::kLong);
  batch.valid_tokens = (batch.targets != kPad).sum().item<int64_t>();
  return batch;
}

LossFn CrossEntropy() {
  return [](const TensorList& outputs, const at::Tensor& targets) {
    return TokenCrossEntropySum(outputs.at(0), targets, kPad);
  };
}

using Grads = std::map<std::string, at::Tensor>;

// Single-process reference: the whole model as one stage, the whole batch.
std::pair<double, Grads> Reference(const LlamaConfig& c, const Batch& batch, uint64_t seed) {
  auto stage = BuildLlamaStage(c, PartitionUniform(c, 1), 0, seed, torch::kCPU);
  auto logits = stage->Forward({batch.inputs, batch.mask}).at(0);
  auto loss = TokenCrossEntropySum(logits, batch.targets, kPad) / static_cast<double>(batch.valid_tokens);
  loss.backward();
  Grads grads;
  for (auto& [name, p] : stage->NamedParameters()) grads[name] = p.grad().clone();
  return {loss.item<double>(), grads};
}

struct PipelineRun {
  double loss = 0;
  Grads grads;
  std::vector<std::vector<TimelineEvent>> events;  // per rank
};

PipelineRun RunPipeline(const LlamaConfig& c, const Schedule& schedule, const Partition& partition, const Batch& batch,
                        uint64_t seed) {
  const int K = schedule.ranks, M = schedule.microbatches;
  std::vector<std::unique_ptr<Stage>> stages;
  // Stage s runs part ModelStage(s) of the model: s itself, except in
  // DualPipe's second copy.
  for (int s = 0; s < schedule.stages; ++s) {
    stages.push_back(BuildLlamaStage(c, partition, schedule.ModelStage(s), seed, torch::kCPU));
  }
  std::vector<MicrobatchData> microbatches;
  const auto inputs = batch.inputs.chunk(M), masks = batch.mask.chunk(M), targets = batch.targets.chunk(M);
  REQUIRE(static_cast<int>(inputs.size()) == M);
  for (int m = 0; m < M; ++m) microbatches.push_back({{inputs[m], masks[m]}, targets[m]});
  auto network = std::make_shared<FakeNetwork>();
  std::vector<StepResult> results(K);
  std::vector<std::string> errors(K);
  const auto origin = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (RankId r = 0; r < K; ++r) {
    threads.emplace_back([&, r] {
      try {
        std::map<StageId, Stage*> mine;
        for (StageId s : schedule.StagesOf(r)) mine[s] = stages[s].get();
        FakeTransport transport(r, network);
        Executor executor(schedule, r, mine, transport, CrossEntropy(), {std::chrono::milliseconds(20000), {}});
        results[r] = executor.RunStep(microbatches, 1.0 / static_cast<double>(batch.valid_tokens), origin);
        SumCopyGradients(schedule, r, mine, transport, std::chrono::milliseconds(20000));
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (RankId r = 0; r < K; ++r) REQUIRE(errors[r] == "");
  CHECK(network->Pending() == 0);  // every message sent was received
  PipelineRun run;
  for (const StepResult& r : results) {
    for (const auto& [m, loss] : r.losses) run.loss += loss;
    run.events.push_back(r.events);
  }
  for (auto& stage : stages) {
    for (auto& [name, p] : stage->NamedParameters()) {
      REQUIRE(p.grad().defined());
      const auto [it, first] = run.grads.emplace(name, p.grad().clone());
      // Copies of a part (DualPipe) hold the summed gradient, bit for bit.
      if (!first) CHECK(torch::equal(it->second, p.grad()));
    }
  }
  return run;
}

// Largest |a - b| / max|b| over all parameters; `max_abs` gets the largest |a - b|.
double MaxRelativeError(const Grads& got, const Grads& want, std::string* worst, double* max_abs) {
  double max_rel = 0;
  *max_abs = 0;
  for (const auto& [name, ref] : want) {
    const auto it = got.find(name);
    if (it == got.end()) {
      *worst = "missing " + name;
      return 1e9;
    }
    const double scale = std::max(ref.abs().max().item<double>(), 1e-30);
    const double abs = (it->second - ref).abs().max().item<double>();
    *max_abs = std::max(*max_abs, abs);
    const double rel = abs / scale;
    if (rel > max_rel) {
      max_rel = rel;
      *worst = name;
    }
  }
  return max_rel;
}

void CheckParity(const std::string& name, const LlamaConfig& c, int K, int M, int v,
                 const std::string& partition_method, int64_t batch_size) {
  torch::manual_seed(0);
  const uint64_t seed = 1234;
  const Batch batch = MakeBatch(c, batch_size, 12, 99);
  const auto [ref_loss, ref_grads] = Reference(c, batch, seed);
  // zb-auto searches its order with costs: F 1 ms, I 1.5 ms, W 0.5 ms here.
  StageCost cost;
  cost.forward = 1000000, cost.backward_input = 1500000, cost.backward_weight = 500000;
  const Schedule schedule =
      Lower(GenerateWithCosts(name, {K, M, v}, CostModel::Uniform(K * std::max(v, 1), cost, Link{})));
  const Partition partition = MakePartition(c, schedule.ModelStages(), partition_method);
  const PipelineRun run = RunPipeline(c, schedule, partition, batch, seed);
  std::string worst;
  double abs = 0;
  const double rel = MaxRelativeError(run.grads, ref_grads, &worst, &abs);
  INFO(name << " K=" << K << " M=" << M << " S=" << schedule.stages << " partition " << partition.ToString()
            << ": loss " << run.loss << " vs " << ref_loss << ", max relative gradient error " << rel << " at "
            << worst);
  std::printf("parity %-18s K=%d M=%-2d S=%d partition %-7s loss %.8f ref %.8f grad error max abs %.2e rel %.2e\n",
              name.c_str(), K, M, schedule.stages, partition.ToString().c_str(), run.loss, ref_loss, abs, rel);
  CHECK(run.grads.size() == ref_grads.size());
  CHECK(run.loss == Approx(ref_loss).epsilon(1e-6));
  CHECK(rel <= 1e-5);
  // The measured timeline lists exactly the plan's actions, in program order.
  for (RankId r = 0; r < K; ++r) {
    REQUIRE(run.events[r].size() == schedule.programs[r].size());
    for (size_t i = 0; i < run.events[r].size(); ++i) CHECK(run.events[r][i].action == schedule.programs[r][i]);
  }
}

LlamaConfig Tiny(int layers) {
  LlamaConfig c = LlamaPreset("tiny");
  c.num_hidden_layers = layers;
  return c;
}

}  // namespace

TEST_CASE("every schedule at K=2 matches single-process gradients", "[executor]") {
  at::set_num_threads(1);
  for (const GeneratorInfo& g : Generators()) {
    const int v = g.default_virtual;
    SECTION(g.name) { CheckParity(g.name, Tiny(4), 2, 4, v, "uniform", 8); }
  }
}

TEST_CASE("a plan whose copies of the model cannot train one model is refused in one line", "[executor]") {
  Schedule two = Lower(Generate("dualpipe", {2, 4, 0}));
  CHECK(WhyNotOneModel(two) == "");
  Schedule uneven = two;
  uneven.pipeline_starts = {1};
  CHECK_THAT(WhyNotOneModel(uneven), Catch::Contains("pipelines of different lengths"));
  Schedule same_rank = two;
  same_rank.placement = {0, 1, 0, 1};  // stages 0 and 2 are both part 0
  CHECK_THAT(WhyNotOneModel(same_rank), Catch::Contains("stages 0 and 2, two copies of model part 0, both on rank 0"));
}

TEST_CASE("K=4 plans, uneven partitions and M not a multiple of K match too", "[executor]") {
  at::set_num_threads(1);
  SECTION("1f1b K=4 M=8") { CheckParity("1f1b", Tiny(4), 4, 8, 1, "uniform", 8); }
  SECTION("interleaved-1f1b K=4 v=2 M=4") { CheckParity("interleaved-1f1b", Tiny(8), 4, 4, 2, "uniform", 8); }
  SECTION("zb-h1 K=4 M=8, balanced by parameters") { CheckParity("zb-h1", Tiny(6), 4, 8, 1, "parameters", 8); }
  SECTION("5 layers on 3 ranks, M=4 (1f1b)") { CheckParity("1f1b", Tiny(5), 3, 4, 1, "uniform", 8); }
  SECTION("5 layers on 3 ranks, M=5 (zb-h2), explicit 1,3,1") { CheckParity("zb-h2", Tiny(5), 3, 5, 1, "1,3,1", 10); }
  SECTION("dualpipe K=4 M=8") { CheckParity("dualpipe", Tiny(4), 4, 8, 0, "uniform", 8); }
  SECTION("dualpipev K=4 M=8") { CheckParity("dualpipev", Tiny(8), 4, 8, 2, "uniform", 8); }
}

TEST_CASE("a rank whose peer never sends times out naming the action", "[executor]") {
  const LlamaConfig c = Tiny(2);
  const Schedule schedule = Lower(Generate1F1B(2, 1));
  auto stage = BuildLlamaStage(c, PartitionUniform(c, 2), 1, 1, torch::kCPU);
  auto network = std::make_shared<FakeNetwork>();
  FakeTransport transport(1, network);
  Executor executor(schedule, 1, {{1, stage.get()}}, transport, CrossEntropy(), {std::chrono::milliseconds(200), {}});
  const Batch batch = MakeBatch(c, 2, 4, 1);
  std::vector<MicrobatchData> mbs = {{{batch.inputs, batch.mask}, batch.targets}};
  CHECK_THROWS_WITH(
      executor.RunStep(mbs, 1.0, std::chrono::steady_clock::now()),
      Catch::Contains("rank 1 waiting on 1RECV_F0 from rank 0") && Catch::Contains("timed out after 200 ms"));
}

}  // namespace pplab

namespace pplab {

TEST_CASE("stages hold exactly their parts, with the full model's weights bit for bit", "[executor]") {
  const LlamaConfig c = Tiny(5);
  auto full = BuildLlamaStage(c, PartitionUniform(c, 1), 0, 77, torch::kCPU);
  std::map<std::string, at::Tensor> reference;
  for (auto& [name, p] : full->NamedParameters()) reference[name] = p;
  const Partition partition = MakePartition(c, 3, "2,2,1");
  size_t seen = 0;
  for (int s = 0; s < 3; ++s) {
    auto stage = BuildLlamaStage(c, partition, s, 77, torch::kCPU);
    for (auto& [name, p] : stage->NamedParameters()) {
      INFO("stage " << s << " " << name);
      REQUIRE(reference.count(name) == 1);
      CHECK(torch::equal(p, reference[name]));
      CHECK((name.rfind("embed_tokens", 0) != 0 || s == 0));
      CHECK(((name.rfind("lm_head", 0) != 0 && name.rfind("norm.", 0) != 0) || s == 2));
      ++seen;
    }
  }
  CHECK(seen == reference.size());
  CHECK(reference.count("layers.4.mlp.up_proj.weight") == 1);
}

}  // namespace pplab
