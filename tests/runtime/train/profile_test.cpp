// The profiler in one process: activation bytes measured by the counting
// allocator against the tensors a stage produces, and the link fit.
#include "runtime/train/profile.h"

#include <torch/torch.h>

#include <catch2/catch.hpp>

#include "models/llama.h"
#include "runtime/train/batches.h"
#include "runtime/comm/fake_transport.h"
#include "runtime/exec/memory_meter.h"

namespace pplab {
namespace {

// A one-rank profile of the tiny model cut into two stages, microbatch size B.
std::vector<StageProfile> ProfileTiny(int B, int T) {
  const LlamaConfig config = LlamaPreset("tiny");
  const Partition partition = PartitionUniform(config, 2);
  std::vector<std::unique_ptr<Stage>> owned;
  std::map<StageId, Stage*> stages;
  for (int s = 0; s < 2; ++s) {
    owned.push_back(BuildLlamaStage(config, partition, s, 1, torch::kCPU));
    stages[s] = owned.back().get();
  }
  const StepBatch batch = SyntheticBatch(1, 0, B, T, config.vocab_size, 1);
  FakeTransport transport(0, std::make_shared<FakeNetwork>());
  ProfileOptions options;
  options.warmup = 1;
  options.repeats = 3;
  options.overhead_microbatches = 2;
  const ProfileResult r = Profile(
      {0, 0}, 0, stages, batch.microbatches[0],
      [](const TensorList& out, const at::Tensor& targets) { return TokenCrossEntropySum(out.at(0), targets, 0); },
      batch.loss_scale, transport, nullptr, MemoryMeter::Cpu(), options);
  REQUIRE(r.stages.size() == 2);
  REQUIRE(r.action_overhead_ms.size() == 1);
  CHECK(r.action_overhead_ms[0] >= 0);
  CHECK(r.links.empty());  // one rank: no link
  // The step's work after the actions: no group, so no loss all-reduce; the
  // norm (its local sum of squares), clipping and the optimizer take time.
  REQUIRE(r.step.size() == 1);
  CHECK(r.step[0].loss_allreduce.median == 0);
  for (const SampleSpread* x : {&r.step[0].norm_allreduce, &r.step[0].clip, &r.step[0].optimizer}) {
    CHECK(x->median > 0);
    CHECK(x->p10 <= x->median);
    CHECK(x->median <= x->p90);
  }
  return r.stages;
}

}  // namespace

TEST_CASE("a stage's measured activation bytes cover its output and grow linearly with the microbatch", "[profile]") {
  const int T = 16, C = LlamaPreset("tiny").hidden_size;
  const std::vector<StageProfile> one = ProfileTiny(1, T), two = ProfileTiny(2, T);
  for (int s = 0; s < 2; ++s) {
    INFO("stage " << s << ": activation bytes " << one[s].activation_bytes << " at B=1, " << two[s].activation_bytes
                  << " at B=2");
    for (const SampleSpread* x : {&one[s].forward, &one[s].backward, &one[s].backward_input, &one[s].backward_weight}) {
      CHECK(x->median > 0);
      CHECK(x->p10 <= x->median);
      CHECK(x->median <= x->p90);
    }
    // At least what F hands on: the hidden state (B,T,C) floats on stage 0.
    if (s == 0) CHECK(one[s].activation_bytes >= 1 * T * C * 4);
    CHECK(one[s].activation_bytes >= one[s].output_bytes);
    const double ratio = static_cast<double>(two[s].activation_bytes) / static_cast<double>(one[s].activation_bytes);
    CHECK(ratio == Approx(2.0).epsilon(0.1));
    // I keeps the graph for W, so it holds at least the activations.
    CHECK(one[s].weight_grad_bytes >= one[s].activation_bytes);
  }
  // The messages: stage 0 sends (hidden (B,T,C) float, mask (B,T) int64) and a 512-byte header.
  CHECK(two[0].forward_message_bytes == 2 * T * C * 4 + 2 * T * 8 + 512);
  CHECK(two[1].backward_message_bytes == 2 * T * C * 4 + 512);
}

TEST_CASE("the link fit recovers latency and bandwidth from exact samples", "[profile]") {
  LinkProfile link;
  // 0.05 ms + bytes / (2 GB/s = 2e6 bytes per ms)
  for (Bytes b : {Bytes{513}, Bytes{1} << 20, Bytes{16} << 20}) link.samples.push_back({b, 0.05 + b / 2e6});
  FitLink(link);
  CHECK(link.latency_ms == Approx(0.05).epsilon(1e-6));
  CHECK(link.bandwidth_gbps == Approx(2.0).epsilon(1e-6));
}

}  // namespace pplab
