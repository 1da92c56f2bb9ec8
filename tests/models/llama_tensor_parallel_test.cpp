// Tensor parallelism in the Llama stage (models/tensor_parallel.h): two
// ranks of one process (threads, Gloo over loopback) each build their share
// of the same model; together they compute the whole model's logits, and
// their gradients, put back together, are the whole model's, with and
// without sequence parallelism.
#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <map>
#include <string>
#include <vector>

#include "models/llama.h"
#include "models/tensor_parallel.h"
#include "runtime/comm/collectives.h"
#include "runtime/exec/weight_grads.h"
#include "runtime/train/tensor_parallel_step.h"
#include "runtime/train/worker_setup.h"
#include "tests/runtime/comm/two_ranks.h"
#include "tests/tensor_error.h"

namespace pplab::llama_tensor_parallel_test {
namespace {

// The tiny preset (4 query heads, 2 key/value heads) with every optional
// piece the split must handle: q/k/v, o and MLP biases, qk_norm (whole
// weights inside a split region); with `tied`, the head starts as the
// embedding. Both are split by vocabulary either way.
LlamaConfig Config(bool tied) {
  LlamaConfig c = LlamaPreset("tiny");
  c.attention_bias = true;
  c.mlp_bias = true;
  c.qk_norm = true;
  c.tie_word_embeddings = tied;
  c.Check("test config");
  return c;
}

struct Result {
  double loss = 0;
  at::Tensor logits;                        // (B,T,V), whole
  std::map<std::string, at::Tensor> grads;  // every parameter's, whole
};

// The loss (the sum of token cross-entropies of `targets`, pad 0 ignored)
// of `tokens` (B,T) through the whole model in one stage, and its gradients;
// with `tp`, this rank's share, its logits and gradients put together over
// `group`.
Result Run(const LlamaConfig& c, const at::Tensor& tokens, const at::Tensor& targets, const TensorParallel& tp,
           const std::shared_ptr<ProcessGroupHandle>& group) {
  const auto timeout = std::chrono::milliseconds(20000);
  LlamaOptions options;
  options.attention = AttentionKind::kExplicit;
  options.tensor_parallel = tp;
  if (group != nullptr) options.tp_comm = MakeTensorParallelComm(group, timeout);
  auto stage = BuildLlamaStage(c, PartitionUniform(c, 1), 0, /*seed=*/5, torch::kCPU, options);
  const at::Tensor logits = stage->Forward({tokens, torch::ones_like(tokens)}).at(0);
  const bool vocab_split = group != nullptr;
  const at::Tensor loss = vocab_split ? VocabParallelCrossEntropySum(logits, targets, 0, tp, options.tp_comm)
                                      : TokenCrossEntropySum(logits, targets, 0);
  loss.backward();
  Result r;
  r.loss = loss.item<double>();
  r.logits = vocab_split ? AllGatherAlong(*group, logits.detach(), 2, timeout) : logits.detach();
  const auto params = stage->NamedParameters();
  auto split_dim = [&c](const std::string& name) { return TensorParallelDim(TensorParallelSplit(name, c)); };
  if (group != nullptr) {
    std::vector<at::Tensor> partial;
    for (const auto& [name, p] : params) {
      if (TensorParallelSplit(name, c, tp.sequence) == TensorSplit::kPartialGradient) partial.push_back(p);
    }
    SumPartialGradients(partial, *group, timeout);
  }
  for (const auto& [name, p] : params) {
    at::Tensor g = p.grad().clone();
    if (group != nullptr && split_dim(name) >= 0) g = AllGatherAlong(*group, g, split_dim(name), timeout);
    r.grads[name] = g;
  }
  return r;
}

}  // namespace

TEST_CASE("two tensor-parallel ranks compute the whole model's logits, loss and gradients", "[llama][tp]") {
  for (const bool sequence : {false, true}) {
    for (const bool tied : {true, false}) {
      const LlamaConfig c = Config(tied);
      auto gen = at::detail::createCPUGenerator(3);
      const at::Tensor tokens = torch::randint(1, c.vocab_size, {3, 12}, gen, torch::kLong);  // (B,T)
      at::Tensor targets = torch::randint(1, c.vocab_size, {3, 12}, gen, torch::kLong);
      targets[1].narrow(0, 8, 4).fill_(0);  // ignored (pad 0)
      const Result whole = Run(c, tokens, targets, {}, nullptr);
      Result shares[2];
      OnTwoRanks([&](RankId rank, const std::shared_ptr<ProcessGroupHandle>& group) {
        shares[rank] = Run(c, tokens, targets, {2, static_cast<int>(rank), sequence}, group);
      });
      for (int rank = 0; rank < 2; ++rank) {
        INFO((tied ? "tied head" : "untied head") << (sequence ? ", sequence-parallel" : "") << ", rank " << rank);
        CHECK(shares[rank].loss == Approx(whole.loss).epsilon(1e-6));
        CHECK(RelativeError(shares[rank].logits, whole.logits) <= 1e-5);
        REQUIRE(shares[rank].grads.size() == whole.grads.size());
        double worst = 0;
        std::string where;
        for (const auto& [name, want] : whole.grads) {
          const at::Tensor& got = shares[rank].grads.at(name);
          REQUIRE(got.sizes() == want.sizes());
          const double e = RelativeError(got, want);
          if (e > worst) worst = e, where = name;
        }
        std::printf(
            "tensor parallelism, 2 ranks%s, %s: rank %d, loss %.6f (whole %.6f), %zu gradients, max relative error "
            "%.2e (%s)\n",
            sequence ? " with sequence parallelism" : "", tied ? "tied head" : "untied head", rank, shares[rank].loss,
            whole.loss, whole.grads.size(), worst, where.c_str());
        CHECK(worst <= 1e-5);
      }
    }
  }
}

TEST_CASE("a tensor-parallel rank holds its share of each split weight, cut from the whole model's", "[llama][tp]") {
  const LlamaConfig c = Config(/*tied=*/false);
  auto whole = BuildLlamaStage(c, PartitionUniform(c, 1), 0, 5, torch::kCPU, {});
  std::map<std::string, at::Tensor> values;
  for (const auto& [name, p] : whole->NamedParameters()) values[name] = p;
  // The group is never called while building: a share is cut, not gathered.
  struct Unused : TensorParallelComm {
    void AllReduceSum(at::Tensor&) override { FAIL("no all-reduce while building"); }
    at::Tensor AllGather(const at::Tensor& t, int64_t) override {
      FAIL("no all-gather while building");
      return t;
    }
    at::Tensor ReduceScatter(const at::Tensor& t, int64_t) override {
      FAIL("no reduce-scatter while building");
      return t;
    }
  };
  for (int rank = 0; rank < 2; ++rank) {
    LlamaOptions options;
    options.tensor_parallel = {2, rank};
    options.tp_comm = std::make_shared<Unused>();
    auto share = BuildLlamaStage(c, PartitionUniform(c, 1), 0, 5, torch::kCPU, options);
    int split = 0;
    for (const auto& [name, p] : share->NamedParameters()) {
      const int dim = TensorParallelDim(TensorParallelSplit(name, c));
      const at::Tensor& w = values.at(name);
      INFO(name);
      if (dim < 0) {
        CHECK(p.equal(w));
        continue;
      }
      ++split;
      const int64_t n = w.size(dim) / 2;
      CHECK(p.equal(w.narrow(dim, rank * n, n)));
    }
    CHECK(split ==
          4 * 12 + 2);  // per layer: q, k, v, gate and up (weight and bias), o and down; the embedding, the head
  }
}

TEST_CASE("under sequence parallelism a stage sends its ranks' share of the positions", "[llama][tp]") {
  const LlamaConfig c = Config(/*tied=*/false);
  const Partition p = PartitionUniform(c, 2);
  auto gen = at::detail::createCPUGenerator(4);
  const at::Tensor tokens = torch::randint(1, c.vocab_size, {2, 12}, gen, torch::kLong);  // (B,T)
  const at::Tensor mask = torch::ones_like(tokens);
  LlamaOptions plain;
  plain.attention = AttentionKind::kExplicit;
  const at::Tensor whole = BuildLlamaStage(c, p, 0, 5, torch::kCPU, plain)->Forward({tokens, mask}).at(0);
  at::Tensor shares[2];
  MessageSpec received[2];
  OnTwoRanks([&](RankId rank, const std::shared_ptr<ProcessGroupHandle>& group) {
    LlamaOptions options = plain;
    options.tensor_parallel = {2, static_cast<int>(rank), /*sequence=*/true};
    options.tp_comm = MakeTensorParallelComm(group, std::chrono::milliseconds(20000));
    shares[rank] = BuildLlamaStage(c, p, 0, 5, torch::kCPU, options)->Forward({tokens, mask}).at(0).detach();
    received[rank] = BuildLlamaStage(c, p, 1, 5, torch::kCPU, options)->ReceivedSpec(true, 2, 12);
  });
  for (int rank = 0; rank < 2; ++rank) {
    INFO("rank " << rank);
    REQUIRE(shares[rank].sizes() == at::IntArrayRef({2, 6, c.hidden_size}));
    CHECK(RelativeError(shares[rank], whole.narrow(1, 6 * rank, 6)) <= 1e-5);
    REQUIRE(received[rank].size() == 2);
    CHECK(received[rank][0].shape == std::vector<int64_t>{2, 6, c.hidden_size});  // the hidden state's share
    CHECK(received[rank][1].shape == std::vector<int64_t>{2, 12});                // the mask, whole
  }
}

TEST_CASE("the backward starts each region's collectives before the matmuls that do not need them", "[llama][tp]") {
  // One rank playing rank 0 of two: a gather repeats its input, a sum
  // doubles, a reduce-scatter keeps the first half, doubled (shapes as in a
  // group of two); every call is recorded, the started ones as "start X" and
  // their waits as "wait X".
  struct Recording : TensorParallelComm {
    std::vector<std::string> calls;
    void AllReduceSum(at::Tensor& t) override {
      calls.push_back("all-reduce");
      t.mul_(2);
    }
    at::Tensor AllGather(const at::Tensor& t, int64_t dim) override {
      calls.push_back("all-gather");
      return torch::cat({t, t}, dim);
    }
    at::Tensor ReduceScatter(const at::Tensor& t, int64_t dim) override {
      calls.push_back("reduce-scatter");
      return t.narrow(dim, 0, t.size(dim) / 2) * 2;
    }
    std::unique_ptr<StartedCollective> Record(const std::string& name, at::Tensor result) {
      struct Waited : StartedCollective {
        at::Tensor Wait() override {
          calls->push_back("wait " + name);
          return result;
        }
        std::vector<std::string>* calls = nullptr;
        std::string name;
        at::Tensor result;
      };
      calls.push_back("start " + name);
      auto started = std::make_unique<Waited>();
      started->calls = &calls;
      started->name = name;
      started->result = std::move(result);
      return started;
    }
    std::unique_ptr<StartedCollective> StartAllReduceSum(at::Tensor t) override { return Record("all-reduce", t * 2); }
    std::unique_ptr<StartedCollective> StartAllGather(const at::Tensor& t, int64_t dim) override {
      return Record("all-gather", torch::cat({t, t}, dim));
    }
    std::unique_ptr<StartedCollective> StartReduceScatter(const at::Tensor& t, int64_t dim) override {
      return Record("reduce-scatter", t.narrow(dim, 0, t.size(dim) / 2) * 2);
    }
  };
  const LlamaConfig c = Config(/*tied=*/false);
  const Partition p = PartitionUniform(c, 2);  // the first half: no head, no loss
  const at::Tensor tokens = torch::randint(1, c.vocab_size, {2, 8}, torch::kLong);
  const int regions = 2 * (p.End(0) - p.Begin(0));  // q/k/v and gate/up a layer
  for (const bool sequence : {false, true}) {
    INFO("sequence parallelism " << sequence);
    auto comm = std::make_shared<Recording>();
    LlamaOptions options;
    options.attention = AttentionKind::kExplicit;
    options.tensor_parallel = {2, 0, sequence};
    options.tp_comm = comm;
    auto stage = BuildLlamaStage(c, p, 0, 5, torch::kCPU, options);
    const at::Tensor out = stage->Forward({tokens, torch::ones_like(tokens)}).at(0);
    comm->calls.clear();
    out.sum().backward();
    std::vector<std::string> started;
    for (const std::string& call : comm->calls) {
      if (call.rfind("start ", 0) == 0 || call.rfind("wait ", 0) == 0) started.push_back(call);
    }
    // Each region: the input's gather (sequence parallelism) starts before
    // the input's gradient is summed, and the sum is waited for last, after
    // the weights' gradients.
    std::vector<std::string> region = {"start all-reduce", "wait all-reduce"};
    if (sequence) region = {"start all-gather", "start reduce-scatter", "wait all-gather", "wait reduce-scatter"};
    std::vector<std::string> expected;
    for (int i = 0; i < regions; ++i) expected.insert(expected.end(), region.begin(), region.end());
    CHECK(started == expected);
    // Split: I sums (or reduce-scatters) each region's input gradient and
    // gathers nothing for the weights; W starts each region's gather (one
    // piece ahead, DeferredWeightGrads::Run: while the row-parallel o or
    // down before it run their products) and waits for it at its own.
    auto deferred = std::make_shared<DeferredWeightGrads>();
    at::Tensor split_out;
    {
      DeferWeightGradsScope scope(deferred);
      split_out = stage->Forward({tokens, torch::ones_like(tokens)}).at(0);
    }
    auto starts_and_waits = [&] {
      std::vector<std::string> out;
      for (const std::string& call : comm->calls) {
        if (call.rfind("start ", 0) == 0 || call.rfind("wait ", 0) == 0) out.push_back(call);
      }
      comm->calls.clear();
      return out;
    };
    starts_and_waits();
    split_out.sum().backward();
    const std::string sum = sequence ? "reduce-scatter" : "all-reduce";
    std::vector<std::string> input_pass, weight_pass;
    for (int i = 0; i < regions; ++i) {
      input_pass.insert(input_pass.end(), {"start " + sum, "wait " + sum});
      if (sequence) weight_pass.insert(weight_pass.end(), {"start all-gather", "wait all-gather"});
    }
    CHECK(starts_and_waits() == input_pass);
    deferred->Run();
    CHECK(starts_and_waits() == weight_pass);
    CHECK(comm->calls.empty());
  }
}

}  // namespace pplab::llama_tensor_parallel_test
