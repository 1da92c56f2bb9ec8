// A published model's weights into pplab's Llama stages: the parameter list
// the check uses is the stages' own, and a stage built from a file holds the
// file's values, whatever the seed and the partition.
#include <ATen/CPUGeneratorImpl.h>
#include <sys/stat.h>
#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "models/llama.h"
#include "models/partition.h"
#include "models/pretrained.h"
#include "models/safetensors.h"

namespace pplab::pretrained_load_test {
namespace {

std::vector<std::pair<std::string, at::Tensor>> AllParameters(const LlamaConfig& c, int stages, uint64_t seed,
                                                              const LlamaOptions& options = {}) {
  const Partition p = MakePartition(c, stages, "uniform");
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (int s = 0; s < stages; ++s) {
    auto stage = BuildLlamaStage(c, p, s, seed, c10::Device(c10::kCPU), options);
    for (auto& named : stage->NamedParameters()) out.push_back(named);
  }
  return out;
}

at::Tensor Logits(const LlamaConfig& c, int stages, uint64_t seed, const LlamaOptions& options) {
  const Partition p = MakePartition(c, stages, "uniform");
  auto gen = at::detail::createCPUGenerator(5);
  TensorList x = {torch::randint(1, c.vocab_size, {2, 16}, gen, torch::kLong), torch::ones({2, 16}, torch::kLong)};
  torch::NoGradGuard no_grad;
  for (int s = 0; s < stages; ++s) x = BuildLlamaStage(c, p, s, seed, c10::Device(c10::kCPU), options)->Forward(x);
  return x.at(0);
}

// The parameters of a seed's model written as a Hugging Face file.
std::string WriteModel(const LlamaConfig& c, uint64_t seed, bool bf16, const std::string& name) {
  const auto params = AllParameters(c, 1, seed);
  std::vector<TensorToWrite> tensors;
  for (const auto& [n, t] : params) {
    if (c.tie_word_embeddings && n == kLmHeadWeight) continue;  // as tied models are published
    tensors.push_back({HuggingFaceName(n), t.sizes().vec(), t.data_ptr<float>()});
  }
  const std::string dir = std::string(PPLAB_TEST_TMP_DIR) + "/pretrained_load";
  mkdir(dir.c_str(), 0755);
  WriteSafetensors(dir + "/" + name, tensors, bf16);
  return dir + "/" + name;
}

LlamaConfig Variant(const std::string& which) {
  LlamaConfig c = LlamaPreset("tiny");
  if (which == "qwen2") c.qkv_bias = true;
  if (which == "biases") c.attention_bias = c.mlp_bias = true;
  if (which == "qwen3") {
    c.head_dim = 16;
    c.qk_norm = true;
  }
  if (which == "tied") c.tie_word_embeddings = true;
  if (which == "llama3.1") c.rope_scaling = {"llama3", 8.0, 1.0, 4.0, 64};
  c.Check(which);
  return c;
}

TEST_CASE("the stages' parameters are LlamaParameterShapes, name for name and shape for shape", "[pretrained]") {
  for (const std::string which : {"llama", "qwen2", "biases", "qwen3", "tied"}) {
    INFO(which);
    const LlamaConfig c = Variant(which);
    const auto params = AllParameters(c, 2, 1);
    const std::vector<ParameterShape> listed = LlamaParameterShapes(c);
    REQUIRE(params.size() == listed.size());
    for (size_t i = 0; i < params.size(); ++i) {
      CHECK(params[i].first == listed[i].name);
      CHECK(params[i].second.sizes().vec() == listed[i].shape);
    }
  }
}

TEST_CASE("stages built from a model's file hold its values whatever the seed and partition", "[pretrained]") {
  for (const std::string which : {"llama", "qwen3", "tied", "llama3.1"}) {
    INFO(which);
    const LlamaConfig c = Variant(which);
    LlamaOptions from_file;
    from_file.weights = std::make_shared<const WeightFiles>(WeightFiles::Open(WriteModel(c, 7, false, which)));
    CHECK(CheckPretrained(*from_file.weights, c) > 0);
    // Seed 99's stages, on two ranks, take seed 7's values bit for bit.
    const auto want = AllParameters(c, 1, 7);
    const auto got = AllParameters(c, 2, 99, from_file);
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      INFO(got[i].first);
      CHECK(torch::equal(got[i].second, want[i].second));
    }
    CHECK_FALSE(torch::equal(AllParameters(c, 1, 99)[0].second, want[0].second));  // the seeds do differ
    // And so do the logits, through either partition.
    LlamaOptions seeded;
    const at::Tensor reference = Logits(c, 1, 7, seeded);
    CHECK(torch::allclose(Logits(c, 2, 99, from_file), reference, 0, 1e-6));
    CHECK(torch::equal(Logits(c, 1, 99, from_file), reference));
  }
}

TEST_CASE("a BF16 file widens exactly: each parameter is the bfloat16 rounding of the written one", "[pretrained]") {
  const LlamaConfig c = Variant("llama");
  LlamaOptions from_file;
  from_file.weights = std::make_shared<const WeightFiles>(WeightFiles::Open(WriteModel(c, 7, true, "bf16")));
  const auto want = AllParameters(c, 1, 7);
  const auto got = AllParameters(c, 1, 3, from_file);
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO(got[i].first);
    CHECK(torch::equal(got[i].second, want[i].second.to(torch::kBFloat16).to(torch::kFloat)));
  }
}

// Hugging Face's Llama forward as its modelling code formulates it, written
// out here in float64 from the files' tensors by their Hugging Face names:
// a check of pplab's names, layouts, head grouping and rotary convention
// that shares no code with models/llama.cc.
at::Tensor ReferenceLogits(const LlamaConfig& c, const WeightFiles& files, const at::Tensor& tokens) {
  auto w = [&](const std::string& name) {
    const SafetensorsTensor* t = files.Find(name);
    if (t == nullptr && name == "lm_head.weight") t = files.Find("model.embed_tokens.weight");  // tied
    REQUIRE(t != nullptr);
    at::Tensor out = torch::empty(t->shape, torch::kFloat);
    ReadAsFloat32(name, *t, out.data_ptr<float>());
    return out.to(torch::kFloat64);
  };
  auto linear = [&](const at::Tensor& x, const std::string& name, bool bias) {
    at::Tensor y = torch::matmul(x, w(name + ".weight").t());
    return bias ? y + w(name + ".bias") : y;
  };
  auto rms = [&](const at::Tensor& x, const std::string& name) {
    return w(name) * (x * torch::rsqrt(x.pow(2).mean(-1, true) + c.rms_norm_eps));
  };
  const int64_t B = tokens.size(0), T = tokens.size(1), H = c.num_attention_heads, KV = c.num_key_value_heads;
  const int64_t hd = c.HeadDim();
  // inv_freq = 1 / theta^(arange(0, hd, 2) / hd); Llama 3.1's scaling by
  // wavelength, as its reference code writes it.
  at::Tensor inv_freq = 1.0 / torch::pow(c.rope_theta, torch::arange(0, hd, 2, torch::kFloat64) / hd);
  if (c.rope_scaling.type == "llama3") {
    const RopeScaling& s = c.rope_scaling;
    const double old_len = s.original_max_position_embeddings;
    const at::Tensor wavelen = 2 * M_PI / inv_freq;
    at::Tensor scaled = torch::where(wavelen > old_len / s.low_freq_factor, inv_freq / s.factor, inv_freq);
    const at::Tensor smooth = (old_len / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
    const at::Tensor blended = (1 - smooth) * scaled / s.factor + smooth * scaled;
    const at::Tensor medium = (wavelen >= old_len / s.high_freq_factor) & (wavelen <= old_len / s.low_freq_factor);
    inv_freq = torch::where(medium, blended, scaled);
  }
  const at::Tensor freqs = torch::outer(torch::arange(T, torch::kFloat64), inv_freq);
  const at::Tensor emb = torch::cat({freqs, freqs}, -1);
  const at::Tensor cos = emb.cos(), sin = emb.sin();
  auto rotate_half = [](const at::Tensor& x) {
    const int64_t half = x.size(-1) / 2;
    return torch::cat({-x.slice(-1, half), x.slice(-1, 0, half)}, -1);
  };
  auto repeat_kv = [&](const at::Tensor& x) {  // (B,KV,T,hd) -> (B,H,T,hd): KV head j serves heads j*g..j*g+g-1
    return x.unsqueeze(2).expand({B, KV, H / KV, T, hd}).reshape({B, H, T, hd});
  };
  const at::Tensor causal = torch::ones({T, T}, torch::kBool).tril();
  at::Tensor h = w("model.embed_tokens.weight").index_select(0, tokens.reshape(-1)).view({B, T, c.hidden_size});
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    const at::Tensor x = rms(h, p + "input_layernorm.weight");
    at::Tensor q = linear(x, p + "self_attn.q_proj", c.QkvBias()).view({B, T, H, hd});
    at::Tensor k = linear(x, p + "self_attn.k_proj", c.QkvBias()).view({B, T, KV, hd});
    at::Tensor v = linear(x, p + "self_attn.v_proj", c.QkvBias()).view({B, T, KV, hd}).transpose(1, 2);
    if (c.qk_norm) {
      q = rms(q, p + "self_attn.q_norm.weight");
      k = rms(k, p + "self_attn.k_norm.weight");
    }
    q = q.transpose(1, 2);
    k = k.transpose(1, 2);
    q = q * cos + rotate_half(q) * sin;
    k = k * cos + rotate_half(k) * sin;
    at::Tensor scores = torch::matmul(q, repeat_kv(k).transpose(2, 3)) / std::sqrt(static_cast<double>(hd));
    scores = scores.masked_fill(causal.logical_not(), -std::numeric_limits<double>::infinity());
    const at::Tensor attn = torch::matmul(torch::softmax(scores, -1), repeat_kv(v));  // (B,H,T,hd)
    h = h + linear(attn.transpose(1, 2).reshape({B, T, H * hd}), p + "self_attn.o_proj", c.attention_bias);
    const at::Tensor y = rms(h, p + "post_attention_layernorm.weight");
    const at::Tensor gate = linear(y, p + "mlp.gate_proj", c.mlp_bias);
    h = h +
        linear(gate * torch::sigmoid(gate) * linear(y, p + "mlp.up_proj", c.mlp_bias), p + "mlp.down_proj", c.mlp_bias);
  }
  return linear(rms(h, "model.norm.weight"), "lm_head", false);
}

TEST_CASE("stages built from a file give the logits of Hugging Face's formulation of the model", "[pretrained]") {
  for (const std::string which : {"llama", "qwen2", "biases", "qwen3", "tied", "llama3.1"}) {
    INFO(which);
    torch::NoGradGuard no_grad;
    LlamaConfig c = Variant(which);
    c.num_key_value_heads = 2;  // 4 heads in 2 groups: the grouping order counts
    LlamaOptions from_file;
    from_file.weights =
        std::make_shared<const WeightFiles>(WeightFiles::Open(WriteModel(c, 13, false, which + "-ref")));
    // Biases and norms start at 0 and 1: give them values of their own, so
    // that a misplaced one shows.
    if (which == "qwen2" || which == "biases" || which == "qwen3") {
      auto params = AllParameters(c, 1, 13);
      std::vector<TensorToWrite> tensors;
      for (auto& [n, t] : params) {
        if (n.find("bias") != std::string::npos || n.find("norm") != std::string::npos) {
          t.copy_(torch::randn(t.sizes(), at::detail::createCPUGenerator(static_cast<uint64_t>(t.numel()))) * 0.5 +
                  (n.find("norm") != std::string::npos ? 1.0 : 0.0));
        }
        tensors.push_back({HuggingFaceName(n), t.sizes().vec(), t.data_ptr<float>()});
      }
      const std::string path = std::string(PPLAB_TEST_TMP_DIR) + "/pretrained_load/" + which + "-ref.safetensors";
      WriteSafetensors(path, tensors, false);
      from_file.weights = std::make_shared<const WeightFiles>(WeightFiles::Open(path));
    }
    const Partition p = MakePartition(c, 2, "uniform");
    auto gen = at::detail::createCPUGenerator(21);
    const at::Tensor tokens = torch::randint(0, c.vocab_size, {2, 24}, gen, torch::kLong);
    TensorList x = {tokens, torch::ones_like(tokens)};
    for (int s = 0; s < 2; ++s) x = BuildLlamaStage(c, p, s, 5, c10::Device(c10::kCPU), from_file)->Forward(x);
    const at::Tensor want = ReferenceLogits(c, *from_file.weights, tokens);
    const double scale = want.abs().max().item<double>();
    CHECK(scale > 0.1);
    CHECK((x.at(0).to(torch::kFloat64) - want).abs().max().item<double>() < 1e-5 * scale + 1e-6);
  }
}

TEST_CASE("llama3 rotary scaling changes the logits of the same weights, and linear with factor 1 does not",
          "[pretrained]") {
  LlamaConfig plain = Variant("llama");
  LlamaConfig scaled = Variant("llama3.1");
  LlamaConfig unit = plain;
  unit.rope_scaling = {"linear", 1.0, 1, 4, 0};
  const LlamaOptions seeded;
  const at::Tensor a = Logits(plain, 1, 7, seeded);
  CHECK(torch::equal(Logits(unit, 1, 7, seeded), a));
  CHECK((Logits(scaled, 1, 7, seeded) - a).abs().max().item<float>() > 1e-4);
}

}  // namespace
}  // namespace pplab::pretrained_load_test
