// Gradient parity: every schedule, run by the executor with K ranks as
// threads over the in-process transport, must produce the loss and every
// parameter gradient of single-process training on the same batch. Also the
// plans and partitions that parity rests on, and the warm-up before a step.
#include "runtime/exec/executor.h"

#include <torch/torch.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "models/llama.h"
#include "models/partition.h"
#include "runtime/train/model_copies.h"
#include "schedules/generators.h"
#include "schedules/lowering.h"
#include "sim/zb_auto.h"
#include "tests/runtime/exec/executor_test_support.h"

namespace pplab::executor_test {
namespace {

// Single-process reference: the whole model as one stage, the whole batch.
std::pair<double, Grads> Reference(const LlamaConfig& c, const Batch& batch, uint64_t seed) {
  auto stage = BuildLlamaStage(c, PartitionUniform(c, 1), 0, seed, torch::kCPU);
  auto logits = stage->Forward({batch.inputs, batch.mask}).at(0);
  auto loss = TokenCrossEntropySum(logits, batch.targets, kPad) / static_cast<double>(batch.valid_tokens);
  loss.backward();
  Grads grads;
  for (auto& [name, p] : stage->NamedParameters()) grads[name] = p.grad().clone();
  if (c.tie_word_embeddings) {
    // One weight used twice: its gradient is the sum of both uses'.
    const at::Tensor sum = grads.at(kEmbeddingWeight) + grads.at(kLmHeadWeight);
    grads[kEmbeddingWeight] = sum;
    grads[kLmHeadWeight] = sum;
  }
  return {loss.item<double>(), grads};
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
  const Schedule schedule = LoweredPlan(name, K, M, v);
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

// A stage that counts its forwards and hands on to another.
class CountingStage : public Stage {
 public:
  explicit CountingStage(Stage& inner) : inner_(inner) {}
  TensorList Forward(const TensorList& inputs) override {
    ++forwards;
    for (const at::Tensor& t : inputs) input_dtypes.push_back(t.scalar_type());
    return inner_.Forward(inputs);
  }
  std::vector<std::pair<std::string, at::Tensor>> NamedParameters() override { return inner_.NamedParameters(); }
  MessageSpec ReceivedSpec(bool forward, int64_t rows, int64_t seq_len) const override {
    return inner_.ReceivedSpec(forward, rows, seq_len);
  }
  int forwards = 0;
  std::vector<c10::ScalarType> input_dtypes;

 private:
  Stage& inner_;
};

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
  SECTION("v-half K=4 M=8") { CheckParity("v-half", Tiny(8), 4, 8, 2, "uniform", 8); }
  SECTION("v-min K=3 M=5") { CheckParity("v-min", Tiny(6), 3, 5, 2, "uniform", 10); }
  // Biases take the zero-bubble split of B into I and W like the weights.
  LlamaConfig biased = Tiny(4);
  biased.qkv_bias = true;
  biased.mlp_bias = true;
  SECTION("zb-h1 K=2 M=4 with q, k, v and MLP biases") { CheckParity("zb-h1", biased, 2, 4, 1, "uniform", 8); }
  SECTION("dualpipev K=2 M=4 with q, k, v and MLP biases") { CheckParity("dualpipev", biased, 2, 4, 2, "uniform", 8); }
  // Qwen3's layers: heads wider than hidden / heads, norms on q and k.
  LlamaConfig qwen3 = Tiny(4);
  qwen3.head_dim = 12;
  qwen3.qk_norm = true;
  SECTION("zb-h1 K=2 M=4 with head_dim 12 and norms on q and k") { CheckParity("zb-h1", qwen3, 2, 4, 1, "uniform", 8); }
}

TEST_CASE("tied embeddings: both halves hold the one weight's gradient, on one rank, two, and in both pipelines",
          "[executor]") {
  at::set_num_threads(1);
  LlamaConfig c = Tiny(4);
  c.tie_word_embeddings = true;
  SECTION("one stage") { CheckParity("1f1b", c, 1, 2, 1, "uniform", 8); }
  SECTION("1f1b K=2: the halves on two ranks") { CheckParity("1f1b", c, 2, 4, 1, "uniform", 8); }
  SECTION("zb-v K=2: both halves on rank 0") { CheckParity("zb-v", c, 2, 4, 2, "uniform", 8); }
  SECTION("interleaved-1f1b K=2 v=2") { CheckParity("interleaved-1f1b", c, 2, 4, 2, "uniform", 8); }
  SECTION("dualpipe K=2: two pipelines, two pairs") { CheckParity("dualpipe", c, 2, 4, 0, "uniform", 8); }
}

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

TEST_CASE("a warm-up runs each of a rank's stages once, F and B, and leaves the weights as they were", "[executor]") {
  // Interleaved on 2 ranks, v=2: rank 0 holds stages 0 (the batch's tokens)
  // and 2, rank 1 stages 1 and 3 (the loss); stages 1, 2 and 3 get zeros in
  // the shapes they receive. DualPipeV: each rank holds both ends of a
  // pipeline.
  const LlamaConfig c = Tiny(4);
  const Batch batch = MakeBatch(c, 4, 12, 5);
  for (const auto& [name, v] : {std::pair<std::string, int>{"interleaved-1f1b", 2}, {"dualpipev", 2}}) {
    const Schedule schedule = Lower(Generate(name, {2, 4, v}));
    const Partition partition = MakePartition(c, schedule.ModelStages(), "uniform");
    std::vector<MicrobatchData> microbatches;
    const auto inputs = batch.inputs.chunk(4), masks = batch.mask.chunk(4), targets = batch.targets.chunk(4);
    for (int m = 0; m < 4; ++m) microbatches.push_back({{inputs[m], masks[m]}, targets[m]});
    for (RankId r = 0; r < 2; ++r) {
      INFO(name << ", rank " << r);
      std::vector<std::unique_ptr<Stage>> owned;
      std::vector<std::unique_ptr<CountingStage>> counted;
      std::map<StageId, Stage*> stages;
      std::map<std::string, at::Tensor> before;
      for (StageId s : schedule.StagesOf(r)) {
        owned.push_back(BuildLlamaStage(c, partition, schedule.ModelStage(s), 3, torch::kCPU));
        counted.push_back(std::make_unique<CountingStage>(*owned.back()));
        stages[s] = counted.back().get();
        for (auto& [p, t] : owned.back()->NamedParameters()) {
          before[std::to_string(s) + p] = t.clone();
          CHECK_FALSE(t.grad().defined());
        }
      }
      WarmUpStages(schedule, r, stages, microbatches, CrossEntropy());
      for (const auto& stage : counted) {
        CHECK(stage->forwards == 1);
        REQUIRE(stage->input_dtypes.size() == 2);  // hidden state or tokens, and the mask
        CHECK(stage->input_dtypes[1] == torch::kLong);
      }
      size_t i = 0;
      for (StageId s : schedule.StagesOf(r)) {
        for (auto& [p, t] : owned[i]->NamedParameters()) {
          INFO("stage " << s << " " << p);
          CHECK(torch::equal(t, before.at(std::to_string(s) + p)));
          REQUIRE(t.grad().defined());  // the backward ran
          CHECK(t.grad().abs().max().item<double>() == 0);
        }
        ++i;
      }
    }
  }
}

}  // namespace pplab::executor_test
