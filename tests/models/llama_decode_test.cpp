// Generation with cached keys and values (LlamaDecoder): the logits of each
// new token equal those of a full forward over the whole sequence.
#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "models/llama.h"
#include "models/partition.h"
#include "schedules/error.h"

namespace pplab::llama_decode_test {
namespace {

LlamaConfig Variant(const std::string& which) {
  LlamaConfig c = LlamaPreset("tiny");  // 4 heads, 2 KV heads
  if (which == "biases") c.attention_bias = c.mlp_bias = true;
  if (which == "qwen3") {
    c.head_dim = 16;
    c.qk_norm = true;
  }
  if (which == "llama3.1") c.rope_scaling = {"llama3", 8.0, 1.0, 4.0, 64};
  c.Check(which);
  return c;
}

TEST_CASE("decoding with cached keys and values gives a full forward's logits, token after token", "[llama]") {
  for (const std::string which : {"llama", "biases", "qwen3", "llama3.1"}) {
    for (const AttentionKind kind : {AttentionKind::kExplicit, AttentionKind::kAuto}) {
      INFO(which << ", attention " << AttentionKindName(kind));
      const LlamaConfig c = Variant(which);
      LlamaOptions options;
      options.attention = kind;
      auto stage = BuildLlamaStage(c, MakePartition(c, 1, "uniform"), 0, 3, c10::Device(c10::kCPU), options);
      auto decoder = MakeLlamaDecoder(*stage);
      auto gen = at::detail::createCPUGenerator(8);
      const at::Tensor tokens = torch::randint(0, c.vocab_size, {1, 12}, gen, torch::kLong);
      torch::NoGradGuard no_grad;
      auto full = [&](int64_t n) {
        const at::Tensor t = tokens.narrow(1, 0, n);
        return stage->Forward({t, torch::ones_like(t)}).at(0);
      };
      // A prompt of 5 tokens at once, then one token at a time.
      const at::Tensor prompt = decoder->Next(tokens.narrow(1, 0, 5));
      CHECK(decoder->Length() == 5);
      CHECK(torch::allclose(prompt, full(5), 1e-5, 1e-5));
      for (int64_t n = 6; n <= 12; ++n) {
        const at::Tensor one = decoder->Next(tokens.narrow(1, n - 1, 1));  // (1,1,V)
        CHECK(decoder->Length() == n);
        CHECK(torch::allclose(one[0][0], full(n)[0][n - 1], 1e-5, 1e-5));
      }
      decoder->Reset();
      CHECK(decoder->Length() == 0);
      CHECK(torch::allclose(decoder->Next(tokens.narrow(1, 0, 3)), full(3), 1e-5, 1e-5));
    }
  }
  // Past the positions the model has, and a stage that is not the whole model.
  const LlamaConfig c = Variant("llama");
  auto stage = BuildLlamaStage(c, MakePartition(c, 1, "uniform"), 0, 3, c10::Device(c10::kCPU));
  auto decoder = MakeLlamaDecoder(*stage);
  torch::NoGradGuard no_grad;
  decoder->Next(torch::zeros({1, c.max_position_embeddings}, torch::kLong));
  CHECK_THROWS_WITH(decoder->Next(torch::zeros({1, 1}, torch::kLong)),
                    Catch::Contains("decoding past max_position_embeddings 128"));
  auto half = BuildLlamaStage(c, MakePartition(c, 2, "uniform"), 0, 3, c10::Device(c10::kCPU));
  CHECK_THROWS_WITH(MakeLlamaDecoder(*half)->Next(torch::zeros({1, 1}, torch::kLong)),
                    Catch::Contains("decoding needs the whole model in one stage"));
}

TEST_CASE("rotary tables grow with the sequence: 2^30 positions build, and past the first 4096 decoding is exact",
          "[llama]") {
  // A table for every position accepted asked for 512 GiB here at build.
  LlamaConfig c = LlamaPreset("tiny");
  c.max_position_embeddings = 1 << 30;
  c.Check("huge positions");
  auto stage = BuildLlamaStage(c, MakePartition(c, 1, "uniform"), 0, 3, c10::Device(c10::kCPU));
  auto decoder = MakeLlamaDecoder(*stage);
  auto gen = at::detail::createCPUGenerator(8);
  const int64_t n = 4098;  // two tokens past the positions a stage starts with
  const at::Tensor tokens = torch::randint(0, c.vocab_size, {1, n}, gen, torch::kLong);
  torch::NoGradGuard no_grad;
  decoder->Next(tokens.narrow(1, 0, n - 2));
  const at::Tensor second_last = decoder->Next(tokens.narrow(1, n - 2, 1)),
                   last = decoder->Next(tokens.narrow(1, n - 1, 1));
  // A fresh stage's one forward over them all grows its tables at once.
  auto fresh = BuildLlamaStage(c, MakePartition(c, 1, "uniform"), 0, 3, c10::Device(c10::kCPU));
  const at::Tensor full = fresh->Forward({tokens, torch::ones_like(tokens)}).at(0);
  CHECK(torch::allclose(second_last[0][0], full[0][n - 2], 1e-4, 1e-4));
  CHECK(torch::allclose(last[0][0], full[0][n - 1], 1e-4, 1e-4));
}

}  // namespace
}  // namespace pplab::llama_decode_test
