// The step's shared bf16 weight casts on a GPU (runtime/exec/autocast.h):
// the Llama stages cast their linear weights through autocast's cache
// themselves (models/projections.h: autocast inside nn::Linear casts W^T, a view
// it never caches, on CUDA as on the CPU), so within an AutocastCacheScope
// a stage's microbatches share one cast of every linear weight; the CPU
// test beside this one checks the same (autocast_test.cpp). Run by
// `ctest -L gpu`; skipped without a CUDA device.
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/autocast_mode.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "models/llama.h"
#include "models/partition.h"
#include "runtime/exec/autocast.h"
#include "runtime/exec/memory_meter.h"
#include "tests/runtime/exec/cast_node.h"

namespace pplab::gpu_autocast_test {
namespace {

bool IsLinearWeight(const std::string& name) {
  return name.find("_proj.") != std::string::npos || name.rfind("lm_head.", 0) == 0;
}

}  // namespace

TEST_CASE("gpu: in a cache scope a bf16 Llama stage casts each linear weight once for all microbatches", "[gpu]") {
  {
    // The mechanism alone: autocast's cast of one fp32 leaf, asked for twice
    // in one scope under two guards. Printed beside it: whether LibTorch's
    // own linear shares its cast (2.11's did not: it casts the transposed
    // weight), the reason the stages cast their weights themselves.
    const at::Tensor w = torch::randn({16, 16}, torch::kCUDA).requires_grad_(true);
    const at::Tensor x = torch::randn({4, 16}, torch::kCUDA);
    AutocastCacheScope scope;
    at::Tensor a, b, ya, yb;
    {
      AutocastGuard guard(c10::kCUDA);
      a = at::autocast::cached_cast(c10::ScalarType::BFloat16, w, c10::DeviceType::CUDA);
      ya = torch::nn::functional::linear(x, w);
    }
    {
      AutocastGuard guard(c10::kCUDA);
      b = at::autocast::cached_cast(c10::ScalarType::BFloat16, w, c10::DeviceType::CUDA);
      yb = torch::nn::functional::linear(x, w);
    }
    const torch::autograd::Node* na = CastNodeOf(ya, w);
    const torch::autograd::Node* nb = CastNodeOf(yb, w);
    std::printf(
        "gpu: cached_cast twice in a scope: same tensor %d, same grad_fn %d (%s); linear's cast nodes %s, %s, same "
        "%d\n",
        a.is_same(b), a.grad_fn() == b.grad_fn(), a.grad_fn() ? a.grad_fn()->name().c_str() : "none",
        na ? na->name().c_str() : "none", nb ? nb->name().c_str() : "none", na == nb);
    CHECK(a.is_same(b));  // what the stages rely on; what plain linear does is LibTorch's, printed only
  }
  const LlamaConfig c = LlamaPreset("small");
  const int M = 4;
  const int64_t B = 2, T = 128;
  auto gen = at::detail::createCPUGenerator(17);
  std::vector<at::Tensor> tokens, upstream;
  for (int m = 0; m < M; ++m) {
    tokens.push_back(torch::randint(1, c.vocab_size, {B, T}, gen, torch::kLong).to(torch::kCUDA));
    upstream.push_back(torch::randn({B, T, c.vocab_size}, gen).to(torch::kCUDA));  // d loss / d logits
  }
  std::map<std::string, at::Tensor> grads[2];
  double ms[2] = {0, 0};
  // What the M forwards hold: without the scope each keeps its own casts,
  // one bf16 copy of every linear weight (2 bytes a parameter), with it they
  // share one; the caching allocator rounds each block up to 512 bytes.
  MemoryMeter& meter = MemoryMeter::For(c10::Device(c10::kCUDA, 0));
  Bytes held[2] = {0, 0}, one_copy = 0;
  for (int shared = 0; shared < 2; ++shared) {
    std::unique_ptr<Stage> stage =
        MixedPrecisionStage(BuildLlamaStage(c, PartitionUniform(c, 1), 0, 5, torch::kCUDA), c10::kCUDA);
    for (int round = 0; round < 3; ++round) {  // round 0 warms up; the last one is checked
      for (auto& [name, p] : stage->NamedParameters()) p.mutable_grad() = at::Tensor();
      torch::cuda::synchronize();
      const auto start = std::chrono::steady_clock::now();
      std::optional<AutocastCacheScope> step;
      if (shared) step.emplace();
      std::vector<at::Tensor> logits;
      const Bytes before = meter.Live();
      for (int m = 0; m < M; ++m) logits.push_back(stage->Forward({tokens[m], torch::ones_like(tokens[m])}).at(0));
      if (round == 2) {
        for (auto& [name, p] : stage->NamedParameters()) {
          if (!IsLinearWeight(name)) continue;
          INFO((shared ? "shared " : "per forward ") << name);
          const torch::autograd::Node* first = CastNodeOf(logits[0], p);
          REQUIRE(first != nullptr);
          // Cast inside the projections' function, through the cache.
          CHECK_THAT(first->name(), Catch::Contains("ColumnProjections"));
        }
        held[shared] = meter.Live() - before;
      }
      for (int m = 0; m < M; ++m) logits[m].backward(upstream[m]);  // each frees its graph
      step.reset();
      torch::cuda::synchronize();
      if (round > 0) {
        ms[shared] += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() / 2;
      }
    }
    for (auto& [name, p] : stage->NamedParameters()) grads[shared][name] = p.grad().cpu();
    one_copy = 0;
    for (auto& [name, p] : stage->NamedParameters()) {
      if (IsLinearWeight(name)) one_copy += (2 * p.numel() + 511) / 512 * 512;
    }
  }
  CHECK(held[0] - held[1] == (M - 1) * one_copy);
  // cuBLAS gives the same bits for the same calls on one GPU, and the shared
  // cast node casts each microbatch's gradient back to fp32 as its own did.
  for (const auto& [name, g] : grads[0]) {
    INFO(name);
    CHECK(torch::equal(grads[1].at(name), g));
  }
  std::printf(
      "gpu: small preset, %d microbatches of %lld x %lld, forward and backward: %.2f ms casting per forward, "
      "%.2f ms sharing the casts\n",
      M, static_cast<long long>(B), static_cast<long long>(T), ms[0], ms[1]);
}

}  // namespace pplab::gpu_autocast_test
