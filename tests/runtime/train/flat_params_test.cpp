// Flat parameter buffers: the parameters keep their values and identity,
// autograd accumulates into the gradient buffer, AdamW over a buffer makes
// the per-parameter updates, and training with buffers is training without.
#include "runtime/train/flat_params.h"

#include <ATen/record_function.h>
#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>

#include "models/llama.h"
#include "runtime/comm/fake_transport.h"
#include "runtime/exec/autocast.h"
#include "runtime/exec/memory_meter.h"
#include "runtime/train/adamw.h"
#include "runtime/train/trainer.h"
#include "schedules/generators.h"
#include "schedules/lowering.h"
#include "tests/runtime/train/adamw_reference.h"
#include "tests/runtime/train/trainer_test_support.h"

namespace pplab::flat_params_test {
namespace {

LlamaConfig Tiny() {
  LlamaConfig c = LlamaPreset("tiny");
  c.max_position_embeddings = 16;
  return c;
}

at::Tensor LossOf(Stage& stage, const at::Tensor& inputs, const at::Tensor& targets) {
  const at::Tensor mask = torch::ones_like(inputs);
  return TokenCrossEntropySum(stage.Forward({inputs, mask}).at(0), targets, 0) / static_cast<double>(inputs.numel());
}

double MaxDiff(const at::Tensor& a, const at::Tensor& b) { return (a - b).abs().max().item<double>(); }

// The matrix products (aten::mm, aten::addmm, aten::addmm_) and the casts
// (aten::_to_copy) this thread runs while an OpCount lives.
thread_local int64_t matrix_products = 0, casts = 0, cats = 0;
std::unique_ptr<at::ObserverContext> CountOp(const at::RecordFunction& fn) {
  const char* name = fn.name();
  if (std::strcmp(name, "aten::mm") == 0 || std::strcmp(name, "aten::addmm") == 0 ||
      std::strcmp(name, "aten::addmm_") == 0) {
    ++matrix_products;
  }
  if (std::strcmp(name, "aten::_to_copy") == 0) ++casts;
  if (std::strcmp(name, "aten::cat") == 0) ++cats;
  return nullptr;
}
struct OpCount {
  OpCount() : handle(at::addThreadLocalCallback(at::RecordFunctionCallback(&CountOp))) {
    matrix_products = 0;
    casts = 0;
    cats = 0;
  }
  ~OpCount() { at::removeCallback(handle); }
  int64_t Products() const { return matrix_products; }
  int64_t Casts() const { return casts; }
  int64_t Cats() const { return cats; }
  at::CallbackHandle handle;
};

}  // namespace

TEST_CASE("a flattened stage keeps its values and accumulates its gradients into the buffer", "[flat]") {
  const LlamaConfig c = Tiny();
  auto flat_stage = BuildLlamaStage(c, PartitionUniform(c, 1), 0, 7, torch::kCPU);
  auto reference = BuildLlamaStage(c, PartitionUniform(c, 1), 0, 7, torch::kCPU);
  const auto params = flat_stage->NamedParameters();
  int64_t total = 0;
  for (const auto& [name, p] : params) total += p.numel();
  const FlatBuffer flat = FlattenParameters(params);
  REQUIRE(flat.defined());
  CHECK(flat.values.numel() == total);
  CHECK(flat.grads.numel() == total);
  CHECK(flat.names.size() == params.size());
  // The stage's own list (not the copy taken above) now reads the buffer.
  const auto after = flat_stage->NamedParameters();
  const auto ref = reference->NamedParameters();
  for (size_t i = 0; i < after.size(); ++i) {
    INFO(after[i].first);
    CHECK(IsViewAt(after[i].second, flat.values, flat.offsets[i]));
    CHECK(IsViewAt(after[i].second.grad(), flat.grads, flat.offsets[i]));
    CHECK(after[i].second.requires_grad());
    CHECK(torch::equal(after[i].second, ref[i].second));
  }
  CHECK(flat.grads.abs().sum().item<double>() == 0);
  // Two microbatches accumulate, as the executor's backwards do.
  for (uint64_t seed : {1, 2}) {
    const auto [inputs, targets] = RandomTokens(c, 2, 8, seed);
    LossOf(*flat_stage, inputs, targets).backward();
    LossOf(*reference, inputs, targets).backward();
  }
  for (size_t i = 0; i < after.size(); ++i) {
    INFO(after[i].first);
    CHECK(IsViewAt(after[i].second.grad(), flat.grads, flat.offsets[i]));
    CHECK(MaxDiff(after[i].second.grad(), ref[i].second.grad()) <= 1e-6);
  }
  CHECK(flat.grads.abs().sum().item<double>() > 0);
}

TEST_CASE("a flat buffer's q/k/v and gate/up are one matrix each: 9 fewer products a layer, the same gradients",
          "[flat]") {
  const LlamaConfig c = Tiny();
  auto flat_stage = BuildLlamaStage(c, PartitionUniform(c, 1), 0, 7, torch::kCPU);
  auto reference = BuildLlamaStage(c, PartitionUniform(c, 1), 0, 7, torch::kCPU);
  const FlatBuffer flat = FlattenParameters(flat_stage->NamedParameters());
  REQUIRE(flat.defined());
  const auto [inputs, targets] = RandomTokens(c, 2, 8, 3);
  int64_t joins = 0;  // tensors put side by side (aten::cat) in the flat stage's forward and backward
  auto products = [&](Stage& stage) {
    OpCount count;
    LossOf(stage, inputs, targets).backward();
    joins = count.Cats();
    return count.Products();
  };
  const int64_t apart = products(*reference), stacked = products(*flat_stage);
  // A layer's: the rotary encoding's swap of halves, forward and backward,
  // once for q and k stacked, the backward's putting their gradients side
  // by side, and q/k/v's output gradients; gate/up's come side by side from
  // SwiGLU's backward.
  CHECK(joins == 4 * c.num_hidden_layers);
  // A layer's seven projections, apart: 7 products forward, 7 for the
  // inputs' gradients, 7 for the weights'. Stacked, q/k/v and gate/up are
  // one each: 4 + 4 + 4.
  CHECK(apart - stacked == 9 * c.num_hidden_layers);
  CHECK(stacked > 0);
  const auto ref = reference->NamedParameters();
  const auto got = flat_stage->NamedParameters();
  for (size_t i = 0; i < got.size(); ++i) {
    INFO(got[i].first);
    CHECK(IsViewAt(got[i].second.grad(), flat.grads, flat.offsets[i]));
    CHECK(MaxDiff(got[i].second.grad(), ref[i].second.grad()) <= 1e-6);
  }
}

TEST_CASE("in bf16 a flat buffer's q/k/v and gate/up are cast as one matrix once a step", "[flat][autocast]") {
  const LlamaConfig c = Tiny();
  std::unique_ptr<Stage> flat_stage =
      MixedPrecisionStage(BuildLlamaStage(c, PartitionUniform(c, 1), 0, 7, torch::kCPU), c10::kCPU);
  std::unique_ptr<Stage> reference =
      MixedPrecisionStage(BuildLlamaStage(c, PartitionUniform(c, 1), 0, 7, torch::kCPU), c10::kCPU);
  REQUIRE(FlattenParameters(flat_stage->NamedParameters()).defined());
  // Casts in each of two microbatches' forward, inside one step's scope.
  auto casts = [&](Stage& stage) {
    AutocastCacheScope step;
    std::vector<int64_t> out;
    for (uint64_t seed : {4, 5}) {
      const auto [inputs, targets] = RandomTokens(c, 2, 8, seed);
      at::Tensor loss;
      {
        OpCount count;
        loss = LossOf(stage, inputs, targets);
        out.push_back(count.Casts());
      }
      loss.backward();
    }
    return out;
  };
  const std::vector<int64_t> apart = casts(*reference), stacked = casts(*flat_stage);
  // The first forward casts a layer's seven weights apart, four stacked
  // (q/k/v, o, gate/up, down); the second casts no weight in either: the
  // stacked casts are kept for the step, as autocast keeps the others.
  // Activations' casts are the same in both forwards of a stage (they may
  // differ between the two stages: on the CPU mixed-dtype products cast
  // their inputs, and the rotary encoding runs once for q and k stacked),
  // so the weights' are each stage's first forward's casts less its
  // second's. Stacked casts not kept would leave 2 a layer in the second.
  const int64_t weights_apart = apart[0] - apart[1], weights_stacked = stacked[0] - stacked[1];
  CHECK(weights_apart - weights_stacked == 3 * c.num_hidden_layers);
  CHECK(weights_apart >= 7 * c.num_hidden_layers);
  const auto ref = reference->NamedParameters();
  const auto got = flat_stage->NamedParameters();
  for (size_t i = 0; i < got.size(); ++i) {
    INFO(got[i].first);
    const at::Tensor& a = got[i].second.grad();
    const at::Tensor& b = ref[i].second.grad();
    CHECK(MaxDiff(a, b) <= 1e-2 * std::max(1e-3, b.abs().max().item<double>()));
  }
}

TEST_CASE("stacked q/k/v hold no more activations than apart, with either attention", "[flat]") {
  // With one key/value head a query head, v goes to attention as it is,
  // where SDPA keeps it for its backward; as a view of the stacked output
  // it would keep the pre-rotary q and k alive with it. With fewer (tiny's
  // 2 for 4), k may be repeated (a copy), and q, a view of the rotary
  // encoding's one output for q and k, would keep the rotated k alive.
  std::vector<AttentionKind> kinds = {AttentionKind::kExplicit};
  if (SdpaAvailable()) kinds.push_back(AttentionKind::kSdpa);
  MemoryMeter& meter = MemoryMeter::Cpu();
  for (const bool grouped : {false, true})
    for (const AttentionKind kind : kinds) {
      LlamaConfig c = Tiny();
      if (!grouped) c.num_key_value_heads = c.num_attention_heads;
      const auto [inputs, targets] = RandomTokens(c, 2, 8, 6);
      INFO(AttentionKindName(kind) << ", " << c.num_key_value_heads << " key/value heads");
      LlamaOptions options;
      options.attention = kind;
      options.padding = false;
      Bytes held[2] = {0, 0};
      for (int flat = 0; flat < 2; ++flat) {
        auto stage = BuildLlamaStage(c, PartitionUniform(c, 1), 0, 7, torch::kCPU, options);
        if (flat) REQUIRE(FlattenParameters(stage->NamedParameters()).defined());
        const Bytes before = meter.Live();
        const at::Tensor logits = stage->Forward({inputs, torch::ones_like(inputs)}).at(0);
        held[flat] = meter.Live() - before;
      }
      CHECK(held[1] == held[0]);
      CHECK(held[0] > 0);
    }
}

TEST_CASE("parameters one buffer cannot hold are left as they are", "[flat]") {
  const at::Tensor a = torch::randn({3}).requires_grad_(true);
  const at::Tensor d = torch::randn({2}, torch::kFloat64).requires_grad_(true);
  const void* before = a.data_ptr();
  CHECK_FALSE(FlattenParameters({}).defined());
  CHECK_FALSE(FlattenParameters({{"a", a}, {"d", d}}).defined());      // two dtypes
  CHECK_FALSE(FlattenParameters({{"a", a}, {"again", a}}).defined());  // one tensor twice
  CHECK(a.data_ptr() == before);
  CHECK_FALSE(a.grad().defined());
  // A gradient it had is carried into the buffer.
  at::Tensor b = torch::randn({2, 2}).requires_grad_(true);
  b.mutable_grad() = torch::full({2, 2}, 3.0);
  const FlatBuffer flat = FlattenParameters({{"a", a}, {"b", b}});
  REQUIRE(flat.defined());
  CHECK(flat.grads.narrow(0, 0, 3).abs().sum().item<double>() == 0);
  CHECK(flat.grads.narrow(0, 3, 4).sum().item<double>() == 12);
}

namespace {

// Params "a", "b" (flattened together) and "c" (apart), with fresh or
// resumed states; `steps` updates from random gradients, each checked
// against the per-parameter reference.
void CheckAgainstReference(bool fused, const std::map<std::string, int64_t>& resumed_steps) {
  torch::manual_seed(11);
  AdamWConfig config;
  config.fused = fused;
  std::map<std::string, at::Tensor> mine = {{"a", torch::randn({4, 3}).requires_grad_(true)},
                                            {"b", torch::randn({5}).requires_grad_(true)},
                                            {"c", torch::randn({2, 2}).requires_grad_(true)}};
  std::map<std::string, at::Tensor> ref;
  std::map<std::string, AdamWState> ref_state;
  for (auto& [name, p] : mine) {
    ref[name] = p.detach().clone();
    ref_state[name] = {torch::zeros_like(p), torch::zeros_like(p), 0};
  }
  const FlatBuffer flat = FlattenParameters({{"a", mine["a"]}, {"b", mine["b"]}});
  REQUIRE(flat.defined());
  AdamW optimizer({{"a", mine["a"]}, {"b", mine["b"]}, {"c", mine["c"]}}, config, {flat});
  // A checkpoint's states put in place, as LoadCheckpoint does.
  for (const auto& [name, step] : resumed_steps) {
    const at::Tensor m = torch::rand_like(ref[name]) * 1e-2, v = torch::rand_like(ref[name]) * 1e-4;
    optimizer.State()[name] = {m.clone(), v.clone(), step};
    ref_state[name] = {m.clone(), v.clone(), step};
  }
  for (int step = 0; step < 3; ++step) {
    optimizer.ZeroGrad();
    for (auto& [name, p] : mine) {
      const at::Tensor g = torch::randn_like(ref[name]);
      if (p.grad().defined()) {
        p.mutable_grad().copy_(g);
      } else {
        p.mutable_grad() = g.clone();
      }
      ref[name].mutable_grad() = g.clone();
    }
    optimizer.Step(1e-2);
    for (auto& [name, p] : mine) {
      ReferenceAdamWStep(ref[name], ref_state[name], 1e-2, config);
      INFO("step " << step << ", " << name);
      CHECK(MaxDiff(p.detach(), ref[name]) <= 1e-6);
      CHECK(MaxDiff(optimizer.State().at(name).exp_avg, ref_state[name].exp_avg) <= 1e-6);
      CHECK(optimizer.State().at(name).step == ref_state[name].step);
    }
  }
  // The buffer's moments stay in one buffer: b's follow a's.
  CHECK(optimizer.State().at("b").exp_avg.data_ptr<float>() ==
        optimizer.State().at("a").exp_avg.data_ptr<float>() + 12);
  CHECK(IsViewAt(mine["a"].grad(), flat.grads, 0));
}

}  // namespace

TEST_CASE("AdamW over a flat buffer makes the per-parameter updates", "[flat][adamw]") {
  SECTION("fresh") { CheckAgainstReference(false, {}); }
  SECTION("resumed, one step count in the buffer") { CheckAgainstReference(false, {{"a", 3}, {"b", 3}}); }
  SECTION("resumed, mixed step counts in the buffer") { CheckAgainstReference(false, {{"a", 3}}); }
}

TEST_CASE("the fused AdamW kernel makes the per-parameter updates", "[flat][adamw]") {
  AdamW probe({}, AdamWConfig{});
  if (!probe.Fused()) {
    WARN("skipped: this LibTorch (" TORCH_VERSION ") has no fused AdamW kernel on the CPU (2.4 and later do)");
    return;
  }
  SECTION("fresh") { CheckAgainstReference(true, {}); }
  SECTION("resumed, mixed step counts in the buffer") { CheckAgainstReference(true, {{"a", 3}}); }
}

TEST_CASE("ZeroGrad gives a parameter its gradient view back", "[flat][adamw]") {
  at::Tensor a = torch::randn({3}).requires_grad_(true), b = torch::randn({2}).requires_grad_(true);
  const FlatBuffer flat = FlattenParameters({{"a", a}, {"b", b}});
  AdamW optimizer({{"a", a}, {"b", b}}, AdamWConfig{}, {flat});
  b.mutable_grad() = torch::ones({2});
  optimizer.ZeroGrad();
  CHECK(IsViewAt(b.grad(), flat.grads, 3));
  CHECK(b.grad().abs().sum().item<double>() == 0);
}

TEST_CASE("training with flat buffers is training with separate parameters", "[flat][train]") {
  const LlamaConfig c = Tiny();
  // One rank, two stages (interleaved), so each stage has its own buffer and
  // clipping spans both.
  const Schedule schedule = Lower(Generate("interleaved-1f1b", {1, 2, 2}));
  REQUIRE(schedule.stages == 2);
  const Partition partition = PartitionUniform(c, 2);
  auto run = [&](bool flat) {
    TrainerOptions options;
    options.steps = 4;
    options.lr = 1e-2;
    options.clip_norm = 0.5;  // below the norms, so every step clips
    options.flat_parameters = flat;
    std::map<std::string, at::Tensor> final_params;
    options.after_last_step = [&](const std::map<StageId, Stage*>& stages) {
      for (const auto& [s, stage] : stages) {
        for (auto& [name, p] : stage->NamedParameters()) final_params[name] = p.detach().clone();
      }
    };
    auto network = std::make_shared<FakeNetwork>();
    FakeTransport transport(0, network);
    const StageFactory make_stage = [&](StageId s) { return BuildLlamaStage(c, partition, s, 3, torch::kCPU); };
    const BatchFn batch = [&](int step) { return RandomTokenBatch(c, 4, 8, 2, 100 + step); };
    TrainSummary summary = Train(schedule, 0, transport, nullptr, make_stage, batch, SummedTokenLoss(), options);
    return std::make_pair(summary, final_params);
  };
  const auto [flat, flat_params] = run(true);
  const auto [apart, apart_params] = run(false);
  REQUIRE(flat.losses.size() == 4);
  for (size_t i = 0; i < 4; ++i) {
    INFO("step " << i);
    CHECK(flat.losses[i] == Approx(apart.losses[i]).epsilon(1e-6));
    CHECK(flat.grad_norms[i] == Approx(apart.grad_norms[i]).epsilon(1e-5));
    CHECK(flat.grad_norms[i] > 0.5);
  }
  REQUIRE(flat_params.size() == apart_params.size());
  for (const auto& [name, p] : flat_params) {
    INFO(name);
    CHECK(MaxDiff(p, apart_params.at(name)) <= 1e-5);
  }
}

}  // namespace pplab::flat_params_test
