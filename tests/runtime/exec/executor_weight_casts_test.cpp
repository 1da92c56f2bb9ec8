// bf16 steps whose stages share one cast of each weight per step
// (ExecutorOptions::share_weight_casts, runtime/exec/autocast.h) against a
// cast per forward, on stages of one matmul, ranks as threads.
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "runtime/comm/fake_transport.h"
#include "runtime/exec/autocast.h"
#include "runtime/exec/executor.h"
#include "runtime/exec/step_clock.h"
#include "runtime/train/adamw.h"
#include "runtime/train/model_copies.h"
#include "schedules/generators.h"
#include "schedules/lowering.h"
#include "tests/runtime/exec/executor_test_support.h"

namespace pplab::executor_weight_casts_test {
namespace {

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

}  // namespace pplab::executor_weight_casts_test
