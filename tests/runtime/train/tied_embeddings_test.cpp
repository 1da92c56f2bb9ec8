// Tied word embeddings through the trainer: the two halves of the weight
// (embed_tokens.weight on the first stage, lm_head.weight on the last) stay
// equal bit for bit through updates, and the global norm counts the weight
// once. The gradients themselves are held to a single process's in
// tests/runtime/exec/executor_test.cpp.
#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <string>

#include "models/llama.h"
#include "runtime/comm/fake_transport.h"
#include "runtime/train/trainer.h"
#include "schedules/generators.h"
#include "schedules/lowering.h"
#include "tests/runtime/train/trainer_test_support.h"

namespace pplab::tied_embeddings_test {
namespace {

struct Finished {
  TrainSummary summary;
  std::map<std::string, at::Tensor> params, grads;  // after the last step
};

// `steps` steps of a one-rank plan holding `stages` stages (both halves on
// this rank: interleaved-1f1b with v = stages).
Finished TrainTied(int steps, int stages, double lr) {
  at::set_num_threads(1);
  LlamaConfig c = LlamaPreset("tiny");
  c.tie_word_embeddings = true;
  const Schedule schedule = Lower(Generate(stages == 1 ? "1f1b" : "interleaved-1f1b", {1, 2, stages}));
  REQUIRE(schedule.stages == stages);
  const Partition partition = PartitionUniform(c, stages);
  TrainerOptions options;
  options.steps = steps;
  options.lr = lr;
  options.tied_parameters = {kEmbeddingWeight, kLmHeadWeight};
  Finished out;
  options.after_last_step = [&](const std::map<StageId, Stage*>& built) {
    for (const auto& [s, stage] : built) {
      for (auto& [name, p] : stage->NamedParameters()) {
        out.params[name] = p.detach().clone();
        out.grads[name] = p.grad().clone();
      }
    }
  };
  FakeTransport transport(0, std::make_shared<FakeNetwork>());
  const StageFactory make_stage = [&](StageId s) { return BuildLlamaStage(c, partition, s, 3, torch::kCPU); };
  const BatchFn batch = [&](int step) { return RandomTokenBatch(c, 4, 8, 2, 100 + step); };
  out.summary = Train(schedule, 0, transport, nullptr, make_stage, batch, SummedTokenLoss(), options);
  return out;
}

TEST_CASE("tied embeddings: the halves stay one weight through updates, and the norm counts it once", "[trainer]") {
  for (const int stages : {1, 2}) {
    INFO(stages << " stage(s)");
    const Finished f = TrainTied(3, stages, 1e-2);
    REQUIRE(f.summary.grad_norms.size() == 3);
    // Equal bit for bit after three AdamW updates, and not still at their start.
    CHECK(torch::equal(f.params.at(kEmbeddingWeight), f.params.at(kLmHeadWeight)));
    const Finished start = TrainTied(1, stages, 0.0);
    CHECK(!torch::equal(f.params.at(kEmbeddingWeight), start.params.at(kEmbeddingWeight)));
    // The last step's norm: every parameter's squared gradient, the tied
    // weight's (the sum of both uses) once.
    CHECK(torch::equal(f.grads.at(kEmbeddingWeight), f.grads.at(kLmHeadWeight)));
    double squares = 0;
    for (const auto& [name, g] : f.grads) {
      if (name != kLmHeadWeight) squares += g.to(torch::kFloat64).pow(2).sum().item<double>();
    }
    // (Each buffer's norm is taken in fp32, as clip_grad_norm_ does: 1e-5.)
    CHECK(f.summary.grad_norms.back() == Approx(std::sqrt(squares)).epsilon(1e-5));
    // Counting it twice would be far off that.
    const double twice = squares + f.grads.at(kLmHeadWeight).to(torch::kFloat64).pow(2).sum().item<double>();
    CHECK(std::sqrt(twice) > 1.01 * std::sqrt(squares));
  }
}

}  // namespace
}  // namespace pplab::tied_embeddings_test
