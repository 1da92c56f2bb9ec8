// A published model's weights into pplab's Llama stages: the parameter list
// the check uses is the stages' own, and a stage built from a file holds the
// file's values, whatever the seed and the partition.
#include <ATen/CPUGeneratorImpl.h>
#include <sys/stat.h>
#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "models/llama.h"
#include "models/partition.h"
#include "models/pretrained.h"
#include "models/safetensors.h"

namespace pplab {
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
}  // namespace pplab
