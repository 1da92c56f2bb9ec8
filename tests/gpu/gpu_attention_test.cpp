// The SDPA attention path on a GPU (models/llama.cc): it equals the explicit
// path there too, and in bf16 the kernel SDPA picks for causal grouped-query
// attention takes the KV heads unrepeated (the route the stage takes from
// LibTorch 2.5 on). Run by `ctest -L gpu`; skipped without a CUDA device.
#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>
#include <torch/version.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <map>
#include <string>

#include "models/llama.h"
#include "models/partition.h"
#include "tests/tensor_error.h"

namespace pplab::gpu_attention_test {
namespace {

// Logits and every parameter gradient of the whole model as one stage on the
// GPU, from a fixed upstream gradient that is zero at padded positions.
std::pair<at::Tensor, std::map<std::string, at::Tensor>> Run(const LlamaConfig& c, const at::Tensor& tokens,
                                                             const at::Tensor& mask, AttentionKind kind, bool padding) {
  LlamaOptions options;
  options.attention = kind;
  options.padding = padding;
  auto stage = BuildLlamaStage(c, PartitionUniform(c, 1), 0, 5, torch::kCUDA, options);
  auto logits = stage->Forward({tokens, mask}).at(0);
  auto gen = at::detail::createCPUGenerator(13);
  auto upstream = (torch::randn(logits.sizes(), gen) * mask.cpu().unsqueeze(-1).to(torch::kFloat)).to(torch::kCUDA);
  logits.backward(upstream);
  std::map<std::string, at::Tensor> grads;
  for (auto& [name, p] : stage->NamedParameters()) grads[name] = p.grad().cpu();
  return {logits.detach().cpu(), grads};
}

TEST_CASE("gpu: sdpa attention equals the explicit path on the GPU in fp32 with GQA and padding", "[gpu]") {
  if (!SdpaAvailable()) {
    WARN("LibTorch " TORCH_VERSION " has no SDPA: nothing compared");
    return;
  }
  LlamaConfig c = LlamaPreset("small");  // 8 heads, 2 KV heads, head_dim 16
  c.num_hidden_layers = 2;
  auto gen = at::detail::createCPUGenerator(11);
  const int64_t B = 4, T = 64;
  auto tokens = torch::randint(1, c.vocab_size, {B, T}, gen, torch::kLong);
  auto mask = torch::ones({B, T}, torch::kLong);
  for (bool padded : {false, true}) {
    if (padded) {
      mask[1].narrow(0, 0, 5).fill_(0);
      mask[2].narrow(0, T - 7, 7).fill_(0);
    }
    const auto t = tokens.masked_fill(mask.eq(0), 0).to(torch::kCUDA), m = mask.to(torch::kCUDA);
    const auto expected = Run(c, t, m, AttentionKind::kExplicit, true);
    const auto got = Run(c, t, m, AttentionKind::kSdpa, padded);
    const double logits_error = RelativeError(got.first, expected.first);
    double worst = 0;
    for (const auto& [name, g] : expected.second) worst = std::max(worst, RelativeError(got.second.at(name), g));
    INFO((padded ? "padded" : "no padding") << ": logits " << logits_error << ", gradients " << worst);
    std::printf("gpu attention (%s): relative error logits %.2e, gradients %.2e\n",
                padded ? "padded, mask" : "no padding, causal only", logits_error, worst);
    CHECK(logits_error <= 1e-4);  // fp32 kernels reduce in another order than the explicit matmuls
    CHECK(worst <= 1e-4);
  }
}

TEST_CASE("gpu: in bf16 SDPA takes GQA KV heads unrepeated and groups them as repeated", "[gpu]") {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 5)
  const auto opts = torch::TensorOptions().dtype(torch::kBFloat16).device(torch::kCUDA);
  const auto q = torch::randn({4, 12, 128, 64}, opts), k = torch::randn({4, 3, 128, 64}, opts),
             v = torch::randn({4, 3, 128, 64}, opts);
  // The stage's test: a kernel other than math (0) takes enable_gqa here.
  const int64_t choice = at::_fused_sdp_choice(q, k, v, {}, 0.0, true, c10::nullopt, /*enable_gqa=*/true);
  std::printf("gpu attention: SDPA backend for bf16 causal GQA: %lld (1 flash, 2 efficient, 3 cudnn, 0 math)\n",
              static_cast<long long>(choice));
  CHECK(choice != 0);
  const auto grouped = at::scaled_dot_product_attention(q, k, v, {}, 0.0, true, c10::nullopt, true).to(torch::kFloat);
  const auto repeated =
      at::scaled_dot_product_attention(q, k.repeat_interleave(4, 1), v.repeat_interleave(4, 1), {}, 0.0, true)
          .to(torch::kFloat);
  CHECK(RelativeError(grouped, repeated) <= 1e-2);  // bf16
#else
  WARN("LibTorch " TORCH_VERSION " has no enable_gqa: nothing checked");
#endif
}

}  // namespace
}  // namespace pplab::gpu_attention_test
