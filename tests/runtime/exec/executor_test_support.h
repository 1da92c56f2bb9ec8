// What the executor tests share (executor_test.cpp and the executor_*_test.cpp
// beside it, host_watch_test.cpp): a padded batch of random tokens, the
// token cross-entropy, the tiny Llama, and a step of a plan run by its ranks
// as threads over the in-process transport.
#pragma once

#include <torch/torch.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "models/llama.h"
#include "models/partition.h"
#include "runtime/comm/fake_transport.h"
#include "runtime/exec/executor.h"
#include "runtime/train/model_copies.h"
#include "schedules/lowering.h"
#include "schedules/schedule.h"
#include "sim/zb_auto.h"

namespace pplab {

inline constexpr int64_t kPad = 0;

struct Batch {
  at::Tensor inputs, mask, targets;  // (B,T) each
  int64_t valid_tokens;
};

// Random tokens in [1, V) with some rows padded at the end.
inline Batch MakeBatch(const LlamaConfig& c, int64_t B, int64_t T, uint64_t seed) {
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

inline LossFn CrossEntropy() {
  return [](const TensorList& outputs, const at::Tensor& targets) {
    return TokenCrossEntropySum(outputs.at(0), targets, kPad);
  };
}

using Grads = std::map<std::string, at::Tensor>;

struct PipelineRun {
  double loss = 0;
  Grads grads;
  std::vector<std::vector<TimelineEvent>> events;             // per rank
  std::vector<Bytes> peak_activation_bytes;                   // per rank, with ExecutorOptions::memory
  std::vector<std::vector<std::optional<Bytes>>> live_after;  // per rank, likewise (StepResult::live_after)
};

// What the executor runs of stage s, given the Llama stage built for it (the
// stage itself when unset).
using StageWrap = std::function<std::unique_ptr<Stage>(StageId, std::unique_ptr<Stage>)>;

inline PipelineRun RunPipeline(const LlamaConfig& c, const Schedule& schedule, const Partition& partition,
                               const Batch& batch, uint64_t seed, ExecutorOptions options = {},
                               const StageWrap& wrap = {}) {
  const int K = schedule.ranks, M = schedule.microbatches;
  std::vector<std::unique_ptr<Stage>> stages;
  // Stage s runs part ModelStage(s) of the model: s itself, except in
  // DualPipe's second copy.
  for (int s = 0; s < schedule.stages; ++s) {
    stages.push_back(BuildLlamaStage(c, partition, schedule.ModelStage(s), seed, torch::kCPU));
    if (wrap) stages.back() = wrap(s, std::move(stages.back()));
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
    run.live_after.push_back(r.live_after);
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

// Generator `name`'s plan for K ranks, M microbatches and v stages a rank,
// lowered; zb-auto searches its order with costs F 1 ms, I 1.5 ms, W 0.5 ms.
inline Schedule LoweredPlan(const std::string& name, int K, int M, int v) {
  StageCost cost;
  cost.forward = 1000000, cost.backward_input = 1500000, cost.backward_weight = 500000;
  return Lower(GenerateWithCosts(name, {K, M, v}, CostModel::Uniform(K * std::max(v, 1), cost, Link{})));
}

// The tiny preset with `layers` decoder layers.
inline LlamaConfig Tiny(int layers) {
  LlamaConfig c = LlamaPreset("tiny");
  c.num_hidden_layers = layers;
  return c;
}

}  // namespace pplab
