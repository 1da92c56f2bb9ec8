// Attention paths of models/llama.cc: at::scaled_dot_product_attention (SDPA)
// against the explicit scores-and-softmax path, on the same weights and batch.
//
// On LibTorch 2.x (the GPU machine's 2.11, ../shared/torch2/chroot.sh's 2.6)
// the parity test runs for real. On LibTorch 1.x (Debian's 1.13 on the
// development machine) SDPA does not exist: there the tests assert that
// `auto` resolves to explicit and that `sdpa` is refused, and the parity test
// says in its output that it checked nothing.
#include "models/llama.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>
#include <torch/version.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "models/partition.h"
#include "runtime/exec/autocast.h"
#include "schedules/error.h"
#include "tests/tensor_error.h"

namespace pplab::llama_test {
namespace {

// The tiny preset with `heads` query heads and `kv_heads` key/value heads.
LlamaConfig Config(int heads, int kv_heads) {
  LlamaConfig c = LlamaPreset("tiny");
  c.num_attention_heads = heads;
  c.num_key_value_heads = kv_heads;
  c.Check("test config");
  return c;
}

struct Batch {
  at::Tensor tokens, mask;  // (B,T) int64; mask 1 = token
};

// Random tokens; with `padded`, row 1 has leading padding (rows whose first
// queries see no key at all), row 2 trailing padding.
// `padded`: row 2 ends in 5 padding positions, and unless `trailing_only`
// row 1 starts with 3.
Batch MakeBatch(const LlamaConfig& c, int64_t B, int64_t T, bool padded, bool trailing_only = false) {
  auto gen = at::detail::createCPUGenerator(11);
  Batch b;
  b.tokens = torch::randint(1, c.vocab_size, {B, T}, gen, torch::kLong);
  b.mask = torch::ones({B, T}, torch::kLong);
  if (padded) {
    if (!trailing_only) b.mask[1].narrow(0, 0, 3).fill_(0);
    b.mask[2].narrow(0, T - 5, 5).fill_(0);
    b.tokens.masked_fill_(b.mask.eq(0), 0);
  }
  return b;
}

struct Result {
  at::Tensor logits;                        // (B,T,V)
  std::map<std::string, at::Tensor> grads;  // every parameter's
};

// Forward, then backward from a fixed random gradient of the logits that is
// zero at padded positions (as the loss ignores them).
Result Run(const LlamaConfig& c, const Batch& batch, AttentionKind kind, bool padding) {
  LlamaOptions options;
  options.attention = kind;
  options.padding = padding;
  auto stage = BuildLlamaStage(c, PartitionUniform(c, 1), 0, /*seed=*/5, torch::kCPU, options);
  Result r;
  r.logits = stage->Forward({batch.tokens, batch.mask}).at(0);
  auto gen = at::detail::createCPUGenerator(13);
  auto upstream = torch::randn(r.logits.sizes(), gen) * batch.mask.unsqueeze(-1).to(torch::kFloat);
  r.logits.backward(upstream);
  for (auto& [name, p] : stage->NamedParameters()) r.grads[name] = p.grad().clone();
  r.logits = r.logits.detach();
  return r;
}

constexpr double kFp32Tolerance = 1e-5;

TEST_CASE("llama attention auto is sdpa where LibTorch has it, explicit where not, and sdpa is refused there",
          "[llama]") {
  CHECK(ResolveAttention(AttentionKind::kExplicit) == AttentionKind::kExplicit);
  CHECK(ParseAttentionKind("auto") == AttentionKind::kAuto);
  CHECK(ParseAttentionKind("sdpa") == AttentionKind::kSdpa);
  CHECK(ParseAttentionKind("explicit") == AttentionKind::kExplicit);
  CHECK_THROWS_WITH(ParseAttentionKind("flash"), Catch::Contains("not one of auto, sdpa, explicit"));
#if TORCH_VERSION_MAJOR >= 2
  CHECK(SdpaAvailable());
  CHECK(ResolveAttention(AttentionKind::kAuto) == AttentionKind::kSdpa);
  CHECK(ResolveAttention(AttentionKind::kSdpa) == AttentionKind::kSdpa);
#else
  // LibTorch 1.x has no at::scaled_dot_product_attention.
  CHECK_FALSE(SdpaAvailable());
  CHECK(ResolveAttention(AttentionKind::kAuto) == AttentionKind::kExplicit);
  CHECK_THROWS_WITH(
      ResolveAttention(AttentionKind::kSdpa),
      Catch::Contains("--attention sdpa needs at::scaled_dot_product_attention (LibTorch 2.0 or later)") &&
          Catch::Contains(TORCH_VERSION));
  const LlamaConfig c = Config(4, 2);
  LlamaOptions sdpa;
  sdpa.attention = AttentionKind::kSdpa;
  CHECK_THROWS_AS(BuildLlamaStage(c, PartitionUniform(c, 1), 0, 1, torch::kCPU, sdpa), Error);
#endif
}

TEST_CASE("llama sdpa attention equals the explicit path: logits and every gradient, with and without GQA", "[llama]") {
  if (!SdpaAvailable()) {
    WARN("LibTorch " TORCH_VERSION " has no SDPA: nothing compared here; this parity runs on LibTorch 2.x builds");
    return;
  }
  struct Case {
    int heads, kv_heads;
    bool padded_batch;           // the batch holds padding
    bool padding;                // LlamaOptions::padding of the SDPA stage (false: causal only, the mask unread)
    bool trailing_only = false;  // the batch's padding only ends rows
  };
  for (const Case& k : {Case{4, 2, true, true}, Case{4, 2, false, false}, Case{4, 2, false, true},
                        Case{4, 4, true, true}, Case{4, 4, false, false}, Case{4, 1, true, true},
                        Case{4, 1, false, false}, Case{4, 2, true, false, true}, Case{4, 1, true, false, true}}) {
    const LlamaConfig c = Config(k.heads, k.kv_heads);
    const Batch batch = MakeBatch(c, 4, 24, k.padded_batch, k.trailing_only);
    const Result expected = Run(c, batch, AttentionKind::kExplicit, /*padding=*/true);
    const Result got = Run(c, batch, AttentionKind::kSdpa, k.padding);
    const std::string what =
        std::to_string(k.heads) + " heads, " + std::to_string(k.kv_heads) + " KV heads, " +
        (k.padded_batch ? (k.trailing_only ? "padding ending rows" : "padded batch") : "no padding") +
        (k.padding ? ", mask applied" : ", causal only");
    // The tokens' logits (causal only, a padded position's own output sees
    // the padding before it; the loss ignores it, and Run's upstream
    // gradient is 0 there), and every gradient.
    const at::Tensor kept = batch.mask.unsqueeze(-1).to(torch::kFloat);
    const double logits_error = RelativeError(got.logits * kept, expected.logits * kept);
    INFO(what << ": logits relative error " << logits_error);
    CHECK(logits_error <= kFp32Tolerance);
    double worst = 0;
    std::string worst_name;
    for (const auto& [name, grad] : expected.grads) {
      const double e = RelativeError(got.grads.at(name), grad);
      if (e > worst) worst = e, worst_name = name;
    }
    INFO(what << ": largest gradient relative error " << worst << " (" << worst_name << ")");
    CHECK(worst <= kFp32Tolerance);
  }
}

TEST_CASE("llama GQA: SDPA's enable_gqa pairs query heads with KV heads as the repeated path does", "[llama]") {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 5)
  // The stage hands SDPA unrepeated K/V where its kernel takes GQA (flash on
  // CUDA in bf16; on the CPU it repeats them itself, so the parity test above
  // runs the repeated path there). This checks the grouping that relies on:
  // query head h reads KV head h / (H/KV), as repeat_interleave lays them out.
  auto gen = at::detail::createCPUGenerator(17);
  const auto q = torch::randn({2, 6, 10, 8}, gen), k = torch::randn({2, 2, 10, 8}, gen),
             v = torch::randn({2, 2, 10, 8}, gen);
  const auto grouped = at::scaled_dot_product_attention(q, k, v, {}, 0.0, true, c10::nullopt, /*enable_gqa=*/true);
  const auto repeated =
      at::scaled_dot_product_attention(q, k.repeat_interleave(3, 1), v.repeat_interleave(3, 1), {}, 0.0, true);
  CHECK(RelativeError(grouped, repeated) <= kFp32Tolerance);
#else
  WARN("LibTorch " TORCH_VERSION " has no enable_gqa (LibTorch 2.5 on): nothing compared here");
#endif
}

TEST_CASE("a llama stage built for padding that only ends rows refuses padding before a token on the CPU", "[llama]") {
  if (!SdpaAvailable()) return;  // the explicit path always applies the mask
  const LlamaConfig c = Config(4, 2);
  LlamaOptions options;
  options.attention = AttentionKind::kSdpa;
  options.padding = false;
  auto stage = BuildLlamaStage(c, PartitionUniform(c, 1), 0, 1, torch::kCPU, options);
  const Batch leading = MakeBatch(c, 4, 16, /*padded=*/true);
  CHECK_THROWS_WITH(stage->Forward({leading.tokens, leading.mask}),
                    Catch::Contains("attention_mask has padding before a token"));
  const Batch trailing = MakeBatch(c, 4, 16, /*padded=*/true, /*trailing_only=*/true);
  CHECK(stage->Forward({trailing.tokens, trailing.mask}).at(0).size(1) == 16);
}

}  // namespace
}  // namespace pplab::llama_test

namespace pplab::llama_test {

namespace {
// A name's ending, e.g. ".bias".
bool EndsWith(const std::string& s, const std::string& end) {
  return s.size() >= end.size() && s.compare(s.size() - end.size(), end.size(), end) == 0;
}
// d(sum(logits * R)) / d(element 3 of each named parameter) from the
// stage's backward against a central difference of its forward.
void CheckAgainstFiniteDifferences(const LlamaConfig& c, Stage& stage, const std::map<std::string, at::Tensor>& params,
                                   const std::vector<std::string>& names) {
  auto gen = at::detail::createCPUGenerator(19);
  const Batch batch = MakeBatch(c, 2, 12, /*padded=*/false);
  const at::Tensor weights = torch::randn({2, 12, c.vocab_size}, gen);
  auto loss = [&] { return (stage.Forward({batch.tokens, batch.mask}).at(0).to(torch::kDouble) * weights).sum(); };
  loss().backward();
  for (const std::string& name : names) {
    INFO(name);
    at::Tensor b = params.at(name).view({-1});
    REQUIRE(params.at(name).grad().defined());
    const int64_t i = 3;
    const double analytic = params.at(name).grad().view({-1})[i].item<double>();
    torch::NoGradGuard no_grad;
    const double eps = 5e-2, original = b[i].item<double>();
    b[i].fill_(original + eps);
    const double up = loss().item<double>();
    b[i].fill_(original - eps);
    const double down = loss().item<double>();
    b[i].fill_(original);
    const double numeric = (up - down) / (2 * eps);
    CHECK(analytic != 0.0);
    CHECK(std::abs(analytic - numeric) <= 1e-5 + 1e-2 * std::abs(numeric));
  }
}
}  // namespace

TEST_CASE("llama biases: the parameters the config counts, zero at the start, gradients as finite differences",
          "[llama]") {
  struct Variant {
    const char* name;
    bool LlamaConfig::*flag;
    std::vector<std::string> biased;  // the projections that carry a bias
  };
  const std::vector<Variant> variants = {
      {"attention_bias", &LlamaConfig::attention_bias, {"q_proj", "k_proj", "v_proj", "o_proj"}},
      {"qkv_bias", &LlamaConfig::qkv_bias, {"q_proj", "k_proj", "v_proj"}},
      {"mlp_bias", &LlamaConfig::mlp_bias, {"gate_proj", "up_proj", "down_proj"}}};
  for (const Variant& v : variants) {
    INFO(v.name);
    LlamaConfig c = Config(4, 2);
    c.*v.flag = true;
    c.Check("test config");
    CHECK(DecoderLayerParams(c) > DecoderLayerParams(Config(4, 2)));
    const Partition p = PartitionUniform(c, 2);
    for (int s = 0; s < 2; ++s) {
      auto stage = BuildLlamaStage(c, p, s, /*seed=*/5, torch::kCPU);
      int64_t count = 0, biases = 0;
      for (auto& [name, param] : stage->NamedParameters()) {
        count += param.numel();
        if (!EndsWith(name, ".bias")) continue;
        ++biases;
        bool expected = false;
        for (const std::string& proj : v.biased) expected = expected || EndsWith(name, proj + ".bias");
        CHECK(expected);
        CHECK(param.abs().max().item<double>() == 0.0);
      }
      CHECK(count == StageParams(c, p, s));
      CHECK(biases == static_cast<int64_t>(v.biased.size()) * (p.End(s) - p.Begin(s)));
    }
  }

  // Every bias set to random values; their gradients against finite
  // differences, for an element of each kind of bias.
  LlamaConfig c = Config(4, 2);
  c.attention_bias = true;
  c.mlp_bias = true;
  auto stage = BuildLlamaStage(c, PartitionUniform(c, 1), 0, /*seed=*/5, torch::kCPU);
  auto gen = at::detail::createCPUGenerator(17);
  std::map<std::string, at::Tensor> params;  // what the stage trains, by name
  {
    torch::NoGradGuard no_grad;
    for (auto& [name, param] : stage->NamedParameters()) {
      params[name] = param;
      if (EndsWith(name, ".bias")) param.copy_(torch::randn(param.sizes(), gen) * 0.5);
      // Sharper attention than at the start, so that q's and k's biases
      // move the softmax measurably.
      if (EndsWith(name, "q_proj.weight") || EndsWith(name, "k_proj.weight")) param.mul_(30);
    }
  }
  // (k's bias is left out: a key shift common to every position changes the
  // scores little, so its gradient is too small for a difference in fp32.)
  CheckAgainstFiniteDifferences(
      c, *stage, params,
      {"layers.0.self_attn.q_proj.bias", "layers.1.self_attn.v_proj.bias", "layers.2.self_attn.o_proj.bias",
       "layers.3.mlp.gate_proj.bias", "layers.3.mlp.up_proj.bias", "layers.3.mlp.down_proj.bias"});
}

TEST_CASE("llama with head_dim set apart and norms on q and k: parameters as counted, gradients as differences",
          "[llama]") {
  LlamaConfig c = Config(4, 2);  // hidden 32, 4 heads
  c.head_dim = 12;               // q 48 wide, k and v 24
  c.qk_norm = true;
  c.Check("test config");
  const Partition p = PartitionUniform(c, 2);
  for (int s = 0; s < 2; ++s) {
    auto stage = BuildLlamaStage(c, p, s, /*seed=*/5, torch::kCPU);
    int64_t count = 0;
    std::map<std::string, at::Tensor> params;
    for (auto& [name, param] : stage->NamedParameters()) {
      count += param.numel();
      params[name] = param;
    }
    CHECK(count == StageParams(c, p, s));
    const std::string layer = "layers." + std::to_string(p.Begin(s)) + ".self_attn.";
    CHECK(params.at(layer + "q_proj.weight").sizes() == at::IntArrayRef({48, 32}));
    CHECK(params.at(layer + "k_proj.weight").sizes() == at::IntArrayRef({24, 32}));
    CHECK(params.at(layer + "o_proj.weight").sizes() == at::IntArrayRef({32, 48}));
    CHECK(params.at(layer + "q_norm.weight").sizes() == at::IntArrayRef({12}));
    CHECK(params.at(layer + "k_norm.weight").min().item<double>() == 1.0);  // norms start at 1
  }
  // Whole model: the norms' weights set off 1, then gradients against
  // differences (q and k have unit RMS per head, so attention is not flat).
  auto stage = BuildLlamaStage(c, PartitionUniform(c, 1), 0, /*seed=*/5, torch::kCPU);
  auto gen = at::detail::createCPUGenerator(29);
  std::map<std::string, at::Tensor> params;
  {
    torch::NoGradGuard no_grad;
    for (auto& [name, param] : stage->NamedParameters()) {
      params[name] = param;
      if (EndsWith(name, "q_norm.weight") || EndsWith(name, "k_norm.weight")) param.add_(torch::randn({12}, gen) * 0.5);
    }
  }
  CheckAgainstFiniteDifferences(c, *stage, params,
                                {"layers.0.self_attn.q_norm.weight", "layers.1.self_attn.k_norm.weight",
                                 "layers.2.self_attn.q_proj.weight", "layers.3.self_attn.o_proj.weight"});
  // SDPA (LibTorch 2.x) and the explicit path agree on this shape too.
  if (SdpaAvailable()) {
    const Batch batch = MakeBatch(c, 4, 16, /*padded=*/true);
    const Result sdpa = Run(c, batch, AttentionKind::kSdpa, true), expl = Run(c, batch, AttentionKind::kExplicit, true);
    CHECK(RelativeError(sdpa.logits, expl.logits) <= kFp32Tolerance);
    for (const auto& [name, g] : expl.grads) CHECK(RelativeError(sdpa.grads.at(name), g) <= kFp32Tolerance);
  }
}

TEST_CASE("llama with norms on q and k runs under bf16 autocast, in fp32 norms, near the fp32 logits", "[llama]") {
  // Under autocast the q and k projections come out in bf16 while the norms'
  // weights are fp32: the norms take them in fp32.
  LlamaConfig c = Config(4, 2);
  c.head_dim = 12;
  c.qk_norm = true;
  auto stage = BuildLlamaStage(c, PartitionUniform(c, 1), 0, /*seed=*/5, torch::kCPU);
  const Batch batch = MakeBatch(c, 2, 16, /*padded=*/false);
  const at::Tensor fp32 = stage->Forward({batch.tokens, batch.mask}).at(0).detach();
  at::Tensor bf16;
  {
    AutocastGuard autocast(c10::DeviceType::CPU);
    bf16 = stage->Forward({batch.tokens, batch.mask}).at(0);
    bf16.to(torch::kFloat32).sum().backward();
  }
  CHECK(bf16.scalar_type() == torch::kBFloat16);  // the LM head ran in bf16
  CHECK(torch::isfinite(bf16).all().item<bool>());
  CHECK(RelativeError(bf16.to(torch::kFloat32), fp32) < 0.05);
  for (auto& [name, p] : stage->NamedParameters()) {
    INFO(name);
    REQUIRE(p.grad().defined());
    CHECK(p.grad().scalar_type() == torch::kFloat32);
  }
}

}  // namespace pplab::llama_test
