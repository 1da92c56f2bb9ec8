// Gradient parity: every schedule, run by the executor with K ranks as
// threads over the in-process transport, must produce the loss and every
// parameter gradient of single-process training on the same batch.
#include "runtime/exec/executor.h"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "models/llama.h"
#include "runtime/comm/fake_transport.h"
#include "runtime/exec/autocast.h"
#include "runtime/exec/host_watch.h"
#include "runtime/exec/memory_meter.h"
#include "runtime/exec/step_clock.h"
#include "runtime/train/adamw.h"
#include "runtime/train/model_copies.h"
#include "schedules/error.h"
#include "schedules/generators.h"
#include "schedules/lowering.h"
#include "sim/zb_auto.h"

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
  if (c.tie_word_embeddings) {
    // One weight used twice: its gradient is the sum of both uses'.
    const at::Tensor sum = grads.at(kEmbeddingWeight) + grads.at(kLmHeadWeight);
    grads[kEmbeddingWeight] = sum;
    grads[kLmHeadWeight] = sum;
  }
  return {loss.item<double>(), grads};
}

struct PipelineRun {
  double loss = 0;
  Grads grads;
  std::vector<std::vector<TimelineEvent>> events;  // per rank
  std::vector<Bytes> peak_activation_bytes;        // per rank, with ExecutorOptions::memory
};

PipelineRun RunPipeline(const LlamaConfig& c, const Schedule& schedule, const Partition& partition, const Batch& batch,
                        uint64_t seed, ExecutorOptions options = {}) {
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
        ExecutorOptions mine_options = options;
        mine_options.comm_timeout = std::chrono::milliseconds(20000);
        if (c.tie_word_embeddings) mine_options.extra_peers = TiedPeers(schedule, r);
        Executor executor(schedule, r, mine, transport, CrossEntropy(), mine_options);
        results[r] = executor.RunStep(microbatches, 1.0 / static_cast<double>(batch.valid_tokens), origin);
        SumCopyGradients(schedule, r, mine, transport, std::chrono::milliseconds(20000));
        if (c.tie_word_embeddings) {
          SumTiedGradients(schedule, r, mine, transport, std::chrono::milliseconds(20000), kEmbeddingWeight,
                           kLmHeadWeight);
        }
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
    run.peak_activation_bytes.push_back(r.peak_activation_bytes);
  }
  for (auto& stage : stages) {
    for (auto& [name, p] : stage->NamedParameters()) {
      REQUIRE(p.grad().defined());
      const auto [it, first] = run.grads.emplace(name, p.grad().clone());
      // Copies of a part (DualPipe) hold the summed gradient, bit for bit.
      if (!first) CHECK(torch::equal(it->second, p.grad()));
    }
  }
  // And so do the two halves of tied embeddings.
  if (c.tie_word_embeddings) CHECK(torch::equal(run.grads.at(kEmbeddingWeight), run.grads.at(kLmHeadWeight)));
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

// The node of `output`'s graph that feeds `weight`'s gradient accumulator
// (autocast's cast of the weight); null when none does.
std::shared_ptr<torch::autograd::Node> CastNodeOf(const at::Tensor& output, const at::Tensor& weight) {
  const std::shared_ptr<torch::autograd::Node> accumulator = torch::autograd::impl::grad_accumulator(weight);
  std::vector<std::shared_ptr<torch::autograd::Node>> todo = {output.grad_fn()};
  std::set<torch::autograd::Node*> seen;
  while (!todo.empty()) {
    std::shared_ptr<torch::autograd::Node> node = todo.back();
    todo.pop_back();
    if (node == nullptr || !seen.insert(node.get()).second) continue;
    for (const torch::autograd::Edge& e : node->next_edges()) {
      if (e.function == accumulator) return node;
      todo.push_back(e.function);
    }
  }
  return nullptr;
}

// A stage of one bf16 matmul per stage, x + tanh(x W), whose weights reach
// autocast as they are (torch::mm with the leaf W), so autocast caches their
// casts on the CPU too; it does not cache nn::Linear's there (autocast_test).
// Stage 0 embeds the tokens, the last stage adds the LM head; the weights
// depend on the part of the model only (copies are equal).
class MatmulStage : public Stage {
 public:
  MatmulStage(int64_t vocab, int64_t hidden, int part, bool first, bool last) : vocab_(vocab), hidden_(hidden) {
    auto gen = at::detail::createCPUGenerator(100 + part);
    const double scale = 1.0 / std::sqrt(static_cast<double>(hidden));
    if (first) params_.emplace_back("embed", torch::randn({vocab, hidden}, gen));
    params_.emplace_back("layers." + std::to_string(part) + ".w", torch::randn({hidden, hidden}, gen) * scale);
    if (last) params_.emplace_back("head", torch::randn({hidden, vocab}, gen) * scale);
    for (auto& [name, p] : params_) p.requires_grad_(true);
  }
  TensorList Forward(const TensorList& inputs) override {
    const int64_t B = inputs.at(0).size(0), T = inputs.at(0).size(1);
    size_t i = 0;
    at::Tensor x = params_.front().first == "embed" ? params_.at(i++).second.index_select(0, inputs[0].reshape({-1}))
                                                    : inputs[0].reshape({B * T, hidden_});  // (B*T,C)
    const at::Tensor& w = params_.at(i++).second;
    const at::Tensor h = torch::mm(x, w);  // (B*T,C)
    if (!casts.empty()) casts.back().push_back(CastNodeOf(h, w));
    x = x + torch::tanh(h);                                                                    // (B*T,C)
    if (i < params_.size()) return {torch::mm(x, params_.at(i).second).view({B, T, vocab_})};  // logits (B,T,V)
    return {x.view({B, T, hidden_}), inputs.at(1)};
  }
  std::vector<std::pair<std::string, at::Tensor>> NamedParameters() override { return params_; }

  // Per step (a caller opens each with casts.emplace_back()), the cast node
  // of W in each forward's graph; held, so that distinct nodes stay distinct.
  std::vector<std::vector<std::shared_ptr<torch::autograd::Node>>> casts;

 private:
  int64_t vocab_, hidden_;
  std::vector<std::pair<std::string, at::Tensor>> params_;
};

// Ranks as threads wait for each other here; throws after 20 s (a rank failed).
class Barrier {
 public:
  explicit Barrier(int count) : count_(count) {}
  void Wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    const int generation = generation_;
    if (++arrived_ == count_) {
      arrived_ = 0;
      ++generation_;
      all_arrived_.notify_all();
      return;
    }
    if (!all_arrived_.wait_for(lock, std::chrono::seconds(20), [&] { return generation_ != generation; })) {
      throw std::runtime_error("barrier: a rank did not arrive in 20 s");
    }
  }

 private:
  std::mutex mutex_;
  std::condition_variable all_arrived_;
  int count_, arrived_ = 0, generation_ = 0;
};

// The host clock, whose Resolve (the executor's last act in a step, inside
// the step's cast cache scope) waits for every rank. On LibTorch 2.x the
// cast cache is one per process (1.13: one per thread) and a thread's
// leaving its last scope clears it, so the ranks end their steps together:
// no rank's step end drops the casts of another in the middle of its step.
class StepEndBarrierClock : public StepClock {
 public:
  explicit StepEndBarrierClock(Barrier& barrier) : barrier_(barrier) {}
  void BeginStep(std::chrono::steady_clock::time_point origin) override { host_.BeginStep(origin); }
  int Mark() override { return host_.Mark(); }
  std::vector<TimeNs> Resolve(std::chrono::milliseconds timeout) override {
    barrier_.Wait();
    return host_.Resolve(timeout);
  }
  std::vector<TimeNs> HostMarks() const override { return host_.HostMarks(); }
  const char* Name() const override { return "host"; }

 private:
  HostClock host_;
  Barrier& barrier_;
};

// Two bf16 training steps of `schedule` on MatmulStages (the executor's
// step, then AdamW), ranks as threads. `share_casts` is
// ExecutorOptions::share_weight_casts; with `scope_across_update` each rank
// keeps an AutocastCacheScope open over both steps, the misuse the
// executor's own scope must not commit.
struct TwoSteps {
  Grads first_grads;          // after step 1
  Grads weights;              // after step 2's update
  size_t forwards = 0;        // of all stages in both steps
  size_t distinct_casts = 0;  // distinct cast nodes of the layer weights over them
  size_t stage_steps = 0;     // stages x 2
};

TwoSteps TrainTwoBf16Steps(const Schedule& schedule, const Batch& batch, int64_t vocab, bool share_casts,
                           bool scope_across_update) {
  const int K = schedule.ranks, M = schedule.microbatches;
  std::vector<std::unique_ptr<Stage>> stages;
  std::vector<MatmulStage*> inner;
  for (int s = 0; s < schedule.stages; ++s) {
    const int part = schedule.ModelStage(s);
    auto stage = std::make_unique<MatmulStage>(vocab, 16, part, part == 0, part == schedule.ModelStages() - 1);
    inner.push_back(stage.get());
    stages.push_back(MixedPrecisionStage(std::move(stage), c10::kCPU));
  }
  std::vector<MicrobatchData> microbatches;
  const auto inputs = batch.inputs.chunk(M), masks = batch.mask.chunk(M), targets = batch.targets.chunk(M);
  for (int m = 0; m < M; ++m) microbatches.push_back({{inputs[m], masks[m]}, targets[m]});
  auto network = std::make_shared<FakeNetwork>();
  Barrier barrier(K);
  std::vector<std::string> errors(K);
  std::vector<Grads> first_grads(K);
  std::vector<std::thread> threads;
  for (RankId r = 0; r < K; ++r) {
    threads.emplace_back([&, r] {
      try {
        std::map<StageId, Stage*> mine;
        std::vector<std::pair<std::string, at::Tensor>> named;
        for (StageId s : schedule.StagesOf(r)) {
          mine[s] = stages[s].get();
          for (auto& named_param : stages[s]->NamedParameters()) named.push_back(named_param);
        }
        AdamW optimizer(named, AdamWConfig{});
        FakeTransport transport(r, network);
        ExecutorOptions options;
        options.comm_timeout = std::chrono::milliseconds(20000);
        options.share_weight_casts = share_casts;
        StepEndBarrierClock clock(barrier);
        options.clock = &clock;
        Executor executor(schedule, r, mine, transport, CrossEntropy(), options);
        std::optional<AutocastCacheScope> misuse;
        if (scope_across_update) misuse.emplace();
        for (int step = 0; step < 2; ++step) {
          optimizer.ZeroGrad();
          for (StageId s : schedule.StagesOf(r)) inner[s]->casts.emplace_back();
          barrier.Wait();  // every rank's previous step, and its scope, has ended
          executor.RunStep(microbatches, 1.0 / static_cast<double>(batch.valid_tokens),
                           std::chrono::steady_clock::now());
          SumCopyGradients(schedule, r, mine, transport, options.comm_timeout);
          if (step == 0) {
            for (auto& [name, p] : named) first_grads[r][name] = p.grad().clone();
          }
          optimizer.Step(1e-2);
        }
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (RankId r = 0; r < K; ++r) REQUIRE(errors[r] == "");
  TwoSteps run;
  for (const Grads& g : first_grads) run.first_grads.insert(g.begin(), g.end());
  for (auto& stage : stages) {
    for (auto& [name, p] : stage->NamedParameters()) run.weights[name] = p.detach().clone();
  }
  std::set<torch::autograd::Node*> distinct;
  for (MatmulStage* stage : inner) {
    for (const auto& step : stage->casts) {
      for (const auto& node : step) {
        REQUIRE(node != nullptr);
        distinct.insert(node.get());
        ++run.forwards;
      }
      ++run.stage_steps;
    }
  }
  run.distinct_casts = distinct.size();
  return run;
}

// The first name whose tensors differ in value (or are missing), or "".
std::string FirstDifference(const Grads& a, const Grads& b) {
  if (a.size() != b.size()) return std::to_string(a.size()) + " against " + std::to_string(b.size()) + " tensors";
  for (const auto& [name, t] : a) {
    const auto it = b.find(name);
    if (it == b.end()) return "missing " + name;
    if (!torch::equal(t, it->second)) {
      return name + " (max |difference| " + std::to_string((t - it->second).abs().max().item<double>()) + ")";
    }
  }
  return "";
}

}  // namespace

TEST_CASE("bf16 steps that share weight casts equal per-forward casts bit for bit, also after two AdamW updates",
          "[executor][autocast]") {
  at::set_num_threads(1);
  const LlamaConfig c = Tiny(2);  // for its vocabulary (256) only
  const Batch batch = MakeBatch(c, 8, 12, 21);
  for (const char* name : {"1f1b", "zb-h1", "dualpipe"}) {
    SECTION(name) {
      // zb-h1 splits each backward into I (keeps the graph) and W (frees
      // it); dualpipe runs two copies of the model and overlaps F with B.
      const Schedule schedule = Lower(Generate(name, {2, 4, 0}));
      const TwoSteps per_forward = TrainTwoBf16Steps(schedule, batch, c.vocab_size, false, false);
      const TwoSteps shared = TrainTwoBf16Steps(schedule, batch, c.vocab_size, true, false);
      REQUIRE(per_forward.first_grads.size() == 4);  // embed, two layers, head
      // Each forward casts for itself, or each stage once a step.
      CHECK(per_forward.distinct_casts == per_forward.forwards);
      CHECK(shared.forwards == per_forward.forwards);
      CHECK(shared.distinct_casts == shared.stage_steps);
      CHECK(shared.forwards > shared.stage_steps);
      CHECK(FirstDifference(shared.first_grads, per_forward.first_grads) == "");
      CHECK(FirstDifference(shared.weights, per_forward.weights) == "");
      // Control: a scope left open across the update hands step 2 the bf16
      // casts of step 1's weights, and the weights come out different.
      const TwoSteps stale = TrainTwoBf16Steps(schedule, batch, c.vocab_size, true, true);
      CHECK(FirstDifference(stale.first_grads, per_forward.first_grads) == "");
      CHECK(FirstDifference(stale.weights, per_forward.weights) != "");
      CHECK(stale.distinct_casts == stale.stage_steps / 2);  // step 2 reused step 1's casts
    }
  }
}

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

// A device that never finishes the step: Resolve gives up at its bound, as
// the CUDA clock does when a message never completes.
class StuckDeviceClock : public StepClock {
 public:
  void BeginStep(std::chrono::steady_clock::time_point origin) override { host_.BeginStep(origin); }
  int Mark() override { return host_.Mark(); }
  std::vector<TimeNs> Resolve(std::chrono::milliseconds timeout) override {
    bound = timeout;
    throw Error("the GPU has not finished this step's work");
  }
  int FirstUnfinishedMark() const override { return stuck_at; }
  std::vector<TimeNs> HostMarks() const override { return host_.HostMarks(); }
  const char* Name() const override { return "stuck"; }
  std::chrono::milliseconds bound{0};
  int stuck_at = -1;

 private:
  HostClock host_;
};

// Records the peers the executor connects to.
class ConnectRecorder : public FakeTransport {
 public:
  using FakeTransport::FakeTransport;
  void Connect(const std::vector<RankId>& peers, std::chrono::milliseconds) override {
    connected.insert(peers.begin(), peers.end());
  }
  std::set<RankId> connected;
};

TEST_CASE("the step's wait for the device is bounded by the comm timeout and names the rank", "[executor]") {
  const LlamaConfig c = Tiny(2);
  const Schedule schedule = Lower(Generate1F1B(1, 1));
  auto stage = BuildLlamaStage(c, PartitionUniform(c, 1), 0, 1, torch::kCPU);
  FakeTransport transport(0, std::make_shared<FakeNetwork>());
  ExecutorOptions options{std::chrono::milliseconds(1234), {}};
  StuckDeviceClock clock;
  options.clock = &clock;
  Executor executor(schedule, 0, {{0, stage.get()}}, transport, CrossEntropy(), options);
  const Batch batch = MakeBatch(c, 2, 4, 1);
  std::vector<MicrobatchData> mbs = {{{batch.inputs, batch.mask}, batch.targets}};
  CHECK_THROWS_WITH(executor.RunStep(mbs, 1.0, std::chrono::steady_clock::now()),
                    Catch::Contains("rank 0 at the end of the step: the GPU has not finished"));
  CHECK(clock.bound == std::chrono::milliseconds(1234));
  // A device stuck at a mark: the error names the first action whose end
  // mark it has not reached. Marks: 0 the step's start (one rank: no
  // receive is posted), then each action's start and end in program order
  // (0F0: 1 and 2, 0B0: 3 and 4), then 5 the step's end.
  for (const auto& [stuck, name] : std::vector<std::pair<int, std::string>>{{2, "0F0"}, {3, "0B0"}, {4, "0B0"}}) {
    clock.stuck_at = stuck;
    CHECK_THROWS_WITH(executor.RunStep(mbs, 1.0, std::chrono::steady_clock::now()),
                      Catch::EndsWith("the first action it has not finished is " + name));
  }
  // Stuck past every action (the step's tail), or a clock that cannot tell:
  // no action is named.
  for (const int stuck : {5, -1}) {
    clock.stuck_at = stuck;
    CHECK_THROWS_WITH(executor.RunStep(mbs, 1.0, std::chrono::steady_clock::now()),
                      !Catch::Contains("the first action"));
  }
}

// The host clock for the host marks; the "device" reaches mark i exactly
// `lag_per_mark_ns` * (i + 1) after the host took it, as a GPU that falls
// further behind the host with each action would.
class LaggingClock : public StepClock {
 public:
  explicit LaggingClock(TimeNs lag_per_mark_ns) : lag_(lag_per_mark_ns) {}
  void BeginStep(std::chrono::steady_clock::time_point origin) override { host_.BeginStep(origin); }
  int Mark() override { return host_.Mark(); }
  std::vector<TimeNs> Resolve(std::chrono::milliseconds timeout) override {
    std::vector<TimeNs> marks = host_.Resolve(timeout);
    for (size_t i = 0; i < marks.size(); ++i) marks[i] += lag_ * static_cast<TimeNs>(i + 1);
    return marks;
  }
  std::vector<TimeNs> HostMarks() const override { return host_.HostMarks(); }
  const char* Name() const override { return "lagging"; }

 private:
  HostClock host_;
  TimeNs lag_;
};

TEST_CASE("a step reports when the host issued each action and how far the device trailed it", "[executor]") {
  const LlamaConfig c = Tiny(2);
  auto stage = BuildLlamaStage(c, PartitionUniform(c, 1), 0, 1, torch::kCPU);
  const Batch batch = MakeBatch(c, 2, 4, 1);
  const std::vector<MicrobatchData> mbs = {{{batch.inputs, batch.mask}, batch.targets}};
  FakeTransport transport(0, std::make_shared<FakeNetwork>());
  // zb-h1 with one rank and one microbatch: F, I, W, whose start marks are
  // 1, 3 and 5 (0: the step's start); with the device 1 ms further behind at
  // each mark, they start 2, 4 and 6 ms after the host issued them: the
  // median is 4 ms.
  const Schedule zb = Lower(GenerateZeroBubbleH1(1, 1));
  ExecutorOptions options;
  LaggingClock lagging(1'000'000);
  options.clock = &lagging;
  Executor executor(zb, 0, {{0, stage.get()}}, transport, CrossEntropy(), options);
  const StepResult r = executor.RunStep(mbs, 1.0, std::chrono::steady_clock::now());
  REQUIRE(r.events.size() == 3);
  REQUIRE(r.host_times.size() == 3);
  for (size_t i = 0; i < 3; ++i) {
    const TimeNs mark = 1 + 2 * static_cast<TimeNs>(i);  // the start mark's index
    CHECK(r.events[i].start - r.host_times[i].first == (mark + 1) * 1'000'000);
    CHECK(r.events[i].end - r.host_times[i].second == (mark + 2) * 1'000'000);
    CHECK(r.host_times[i].first <= r.host_times[i].second);
  }
  CHECK(MedianDeviceLagMs(r) == 4.0);
  // The device trails by 8 ms at the step's end mark (7, after W's 5 and 6)
  // and 1 ms at its start (0): the step spans 7 ms more on the device.
  CHECK(r.clock_span_ns - r.host_span_ns == 7'000'000);
  CHECK(r.host_span_ns > 0);

  // 1f1b with two microbatches: four actions, starts at marks 1, 3, 5, 7,
  // lags 2, 4, 6, 8 ms: the median of an even count is the mean of the
  // middle two, 5 ms.
  const Schedule two = Lower(Generate1F1B(1, 2));
  Executor executor2(two, 0, {{0, stage.get()}}, transport, CrossEntropy(), options);
  const std::vector<MicrobatchData> two_mbs = {mbs[0], mbs[0]};
  CHECK(MedianDeviceLagMs(executor2.RunStep(two_mbs, 0.5, std::chrono::steady_clock::now())) == 5.0);

  // On the host clock the host's times are the events' own: no lag.
  ExecutorOptions host_options;
  Executor on_host(zb, 0, {{0, stage.get()}}, transport, CrossEntropy(), host_options);
  const StepResult h = on_host.RunStep(mbs, 1.0, std::chrono::steady_clock::now());
  REQUIRE(h.host_times.size() == h.events.size());
  for (size_t i = 0; i < h.events.size(); ++i) {
    CHECK(h.host_times[i] == std::make_pair(h.events[i].start, h.events[i].end));
  }
  CHECK(MedianDeviceLagMs(h) == 0.0);
  CHECK(h.host_span_ns == h.clock_span_ns);
}

TEST_CASE("an executor connects its transport to exactly the ranks its program exchanges messages with", "[executor]") {
  const LlamaConfig c = Tiny(3);
  auto network = std::make_shared<FakeNetwork>();
  const Schedule pipeline = Lower(Generate1F1B(3, 3));
  const auto partition = PartitionUniform(c, 3);
  const std::vector<std::set<RankId>> want = {{1}, {0, 2}, {1}};
  for (RankId r = 0; r < 3; ++r) {
    auto stage = BuildLlamaStage(c, partition, r, 1, torch::kCPU);
    ConnectRecorder transport(r, network);
    Executor executor(pipeline, r, {{r, stage.get()}}, transport, CrossEntropy(), {});
    CHECK(transport.connected == want[r]);
  }
  const Schedule single = Lower(Generate1F1B(1, 2));
  auto stage = BuildLlamaStage(c, PartitionUniform(c, 1), 0, 1, torch::kCPU);
  ConnectRecorder transport(0, network);
  Executor executor(single, 0, {{0, stage.get()}}, transport, CrossEntropy(), {});
  CHECK(transport.connected.empty());
}

TEST_CASE("under DualPipe an executor also connects the ranks that hold the other copy of its model parts",
          "[executor]") {
  // K=4: rank r holds part r of the first copy and part 3-r of the second.
  // Rank 0's messages go to rank 1 only, but both its parts' other copies
  // are on rank 3, with which it sums gradients after each step.
  const LlamaConfig c = Tiny(4);
  const Schedule dual = Lower(GenerateDualPipe(4, 8));
  REQUIRE(dual.NumPipelines() == 2);
  const auto partition = PartitionUniform(c, 4);
  const std::vector<std::set<RankId>> want = {{1, 3}, {0, 2}, {1, 3}, {2, 0}};
  auto network = std::make_shared<FakeNetwork>();
  for (RankId r = 0; r < 4; ++r) {
    std::vector<std::unique_ptr<Stage>> owned;
    std::map<StageId, Stage*> stages;
    for (StageId s : dual.StagesOf(r)) {
      owned.push_back(BuildLlamaStage(c, partition, dual.ModelStage(s), 1, torch::kCPU));
      stages[s] = owned.back().get();
    }
    ConnectRecorder transport(r, network);
    Executor executor(dual, r, stages, transport, CrossEntropy(), {});
    CHECK(transport.connected == want[r]);
  }
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

namespace pplab {
namespace {

// The loss and gradients of `name` with the stages in `recompute`
// recomputed equal, bit for bit, those of the same plan without.
void CheckRecomputeExact(const std::string& name, int K, int M, int v, int layers, std::set<StageId> recompute) {
  torch::manual_seed(0);
  const LlamaConfig c = Tiny(layers);
  const Batch batch = MakeBatch(c, 8, 12, 99);
  StageCost cost;
  cost.forward = 1000000, cost.backward_input = 1500000, cost.backward_weight = 500000;
  const Schedule schedule =
      Lower(GenerateWithCosts(name, {K, M, v}, CostModel::Uniform(K * std::max(v, 1), cost, Link{})));
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

}  // namespace pplab

namespace pplab {
namespace {

// Counts the receives posted and not yet waited for.
class PostCounter : public FakeTransport {
 public:
  using FakeTransport::FakeTransport;
  void PostRecv(RankId peer, int64_t tag, const MessageSpec& spec) override {
    FakeTransport::PostRecv(peer, tag, spec);
    most = std::max(most, ++outstanding);
  }
  TensorList WaitRecv(RankId peer, int64_t tag, std::chrono::milliseconds timeout) override {
    TensorList got = FakeTransport::WaitRecv(peer, tag, timeout);
    --outstanding;
    return got;
  }
  int outstanding = 0, most = 0;
};

}  // namespace

TEST_CASE("receives are posted one compute action ahead, so a step holds a few receive buffers, not M", "[executor]") {
  at::set_num_threads(1);
  const LlamaConfig c = Tiny(2);
  const Batch batch = MakeBatch(c, 8, 8, 3);
  for (const std::string name : {"1f1b", "gpipe", "zb-h1"}) {
    const Schedule schedule = Lower(Generate(name, {2, 8, 0}));
    const Partition partition = MakePartition(c, 2, "uniform");
    std::vector<std::unique_ptr<Stage>> stages;
    for (int s = 0; s < 2; ++s) stages.push_back(BuildLlamaStage(c, partition, s, 1, torch::kCPU));
    std::vector<MicrobatchData> mbs;
    const auto inputs = batch.inputs.chunk(8), masks = batch.mask.chunk(8), targets = batch.targets.chunk(8);
    for (int m = 0; m < 8; ++m) mbs.push_back({{inputs[m], masks[m]}, targets[m]});
    auto network = std::make_shared<FakeNetwork>();
    std::vector<int> most(2, 0), left(2, -1);
    std::vector<std::string> errors(2);
    std::vector<std::thread> threads;
    for (RankId r = 0; r < 2; ++r) {
      threads.emplace_back([&, r] {
        try {
          PostCounter transport(r, network);
          Executor executor(schedule, r, {{r, stages[r].get()}}, transport, CrossEntropy(),
                            {std::chrono::milliseconds(20000), {}});
          executor.RunStep(mbs, 1.0 / static_cast<double>(batch.valid_tokens), std::chrono::steady_clock::now());
          left[r] = transport.outstanding;  // checked after the join: Catch2 is not thread-safe
          most[r] = transport.most;
        } catch (const std::exception& e) {
          errors[r] = e.what();
        }
      });
    }
    for (auto& t : threads) t.join();
    INFO(name << ": most receives outstanding on rank 0 " << most[0] << ", rank 1 " << most[1]);
    REQUIRE(errors == std::vector<std::string>(2));
    CHECK(left == std::vector<int>(2, 0));  // every posted receive was waited for
    // Rank 1 of GPipe gets its 8 activations while it computes; each is
    // posted one action ahead of its F. Rank 0 waits for gradients.
    CHECK(most[0] <= 2);
    CHECK(most[1] <= 2);
  }
}

namespace {

// A stage whose forwards wait, at most 60 s, until Release: a host blocked
// inside an action, as one blocked in a CUDA call is.
class BlockedStage : public Stage {
 public:
  explicit BlockedStage(std::unique_ptr<Stage> inner) : inner_(std::move(inner)) {}
  TensorList Forward(const TensorList& inputs) override {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!released_.wait_for(lock, std::chrono::seconds(60), [&] { return open_; })) {
      throw Error("test: the blocked forward was never released");
    }
    return inner_->Forward(inputs);
  }
  std::vector<std::pair<std::string, at::Tensor>> NamedParameters() override { return inner_->NamedParameters(); }
  void Release() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      open_ = true;
    }
    released_.notify_all();
  }

 private:
  std::unique_ptr<Stage> inner_;
  std::mutex mutex_;
  std::condition_variable released_;
  bool open_ = false;
};

}  // namespace

TEST_CASE("a host that stays inside an action past the watch's bound is reported, naming the action and step",
          "[executor]") {
  const LlamaConfig c = Tiny(1);
  const Schedule schedule = Lower(Generate1F1B(1, 1));
  BlockedStage stage(BuildLlamaStage(c, PartitionUniform(c, 1), 0, 1, torch::kCPU));
  std::vector<std::string> lines;  // written on the watch's thread, read after it is gone
  std::vector<std::string> stack;
  std::optional<HostWatch> watch;
  watch.emplace(std::chrono::milliseconds(50), "the test's bound",
                [&](const std::string& line, const std::vector<std::string>& frames) {
                  lines.push_back(line);
                  stack = frames;
                  stage.Release();  // a real caller ends the process here
                });
  watch->SetStep(7);
  ExecutorOptions options;
  options.host_watch = &*watch;
  auto network = std::make_shared<FakeNetwork>();
  FakeTransport transport(0, network);
  Executor executor(schedule, 0, {{0, &stage}}, transport, CrossEntropy(), options);
  const Batch batch = MakeBatch(c, 2, 4, 1);
  const StepResult r =
      executor.RunStep({{{batch.inputs, batch.mask}, batch.targets}}, 1.0, std::chrono::steady_clock::now());
  CHECK(r.losses.size() == 1);  // the step went on once released
  watch.reset();
  REQUIRE(lines.size() == 1);
  CHECK_THAT(lines[0], Catch::StartsWith("the host has been inside 0F0 of step 7 for ") &&
                           Catch::Contains("s, more than the test's bound: a CUDA call there is blocked"));
  // The host's stack then: the stage waits on a condition variable (a timed
  // wait: libc's pthread_cond_clockwait or timedwait), the caller's frames outside it.
  std::string frames;
  for (const std::string& f : stack) frames += f + "\n";
  INFO(frames);
  REQUIRE(stack.size() >= 3);
  CHECK_THAT(frames, Catch::Contains("(pthread_cond_"));
}

TEST_CASE("HostStack names a waiting thread's frames, and the thread's wait goes on after the signal", "[executor]") {
  std::mutex m;
  std::condition_variable cv;
  bool release = false;
  std::thread waiter([&] {
    std::unique_lock<std::mutex> lock(m);
    cv.wait(lock, [&] { return release; });
  });
  // Taken until the waiter is inside its wait (it may still be starting).
  std::string frames;
  for (int i = 0; i < 100 && frames.find("(pthread_cond_wait+") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    frames.clear();
    for (const std::string& f : HostStack(waiter.native_handle(), std::chrono::seconds(2))) frames += f + "\n";
  }
  INFO(frames);
  CHECK_THAT(frames, Catch::Contains("(pthread_cond_wait+"));
  {
    std::lock_guard<std::mutex> lock(m);  // the wait went on after the signal (SA_RESTART)
    release = true;
  }
  cv.notify_all();
  waiter.join();
  CHECK(release);
}

TEST_CASE("a host that leaves its actions in time is never reported", "[executor]") {
  int reports = 0;
  {
    HostWatch watch(std::chrono::seconds(30), "30 s",
                    [&](const std::string&, const std::vector<std::string>&) { ++reports; });
    watch.SetStep(1);
    watch.Enter({ActionKind::kForward, 0, 0});
    watch.Leave();
    watch.Enter({ActionKind::kBackward, 0, 0});
  }  // gone while inside an action, long before its bound: no report
  CHECK(reports == 0);
}

}  // namespace pplab

namespace pplab {
namespace {

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

}  // namespace pplab
