// The profiler in one process: activation bytes measured by the counting
// allocator against the tensors a stage produces, and the link fit.
#include "runtime/train/profile.h"

#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <set>

#include "models/llama.h"
#include "models/partition.h"
#include "runtime/comm/fake_transport.h"
#include "runtime/exec/autocast.h"
#include "runtime/exec/memory_meter.h"
#include "runtime/train/batches.h"
#include "runtime/train/profile_words.h"
#include "tools/plan_costs.h"

namespace pplab::profile_test {
namespace {

// Profile on one rank, through a fake transport, with the token
// cross-entropy loss: every stage of `placement` (all 0) is in `stages`.
ProfileResult ProfileOneRank(const std::vector<RankId>& placement, const std::map<StageId, Stage*>& stages,
                             const StepBatch& batch, const ProfileOptions& options) {
  FakeTransport transport(0, std::make_shared<FakeNetwork>());
  return Profile(
      placement, 0, stages, batch.microbatches[0],
      [](const TensorList& out, const at::Tensor& targets) { return TokenCrossEntropySum(out.at(0), targets, 0); },
      batch.loss_scale, transport, nullptr, MemoryMeter::Cpu(), options);
}

// A one-rank profile of the tiny model cut into two stages, microbatch size B.
// `padding`: stages built for batches that may hold padding, as `pplab
// train` builds them for text (with SDPA they take a mask then); `pplab
// profile` builds them without.
std::vector<StageProfile> ProfileTiny(int B, int T, bool padding = true) {
  const LlamaConfig config = LlamaPreset("tiny");
  const Partition partition = PartitionUniform(config, 2);
  std::vector<std::unique_ptr<Stage>> owned;
  std::map<StageId, Stage*> stages;
  LlamaOptions llama;
  llama.padding = padding;
  for (int s = 0; s < 2; ++s) {
    owned.push_back(BuildLlamaStage(config, partition, s, 1, torch::kCPU, llama));
    stages[s] = owned.back().get();
  }
  const StepBatch batch = SyntheticBatch(1, 0, B, T, config.vocab_size, 1);
  ProfileOptions options;
  options.warmup = 1;
  options.repeats = 3;
  options.overhead_microbatches = 2;
  const ProfileResult r = ProfileOneRank({0, 0}, stages, batch, options);
  REQUIRE(r.stages.size() == 2);
  // fp32: no weight casts to keep.
  for (const StageProfile& p : r.stages) CHECK(p.cast_weight_bytes == 0);
  REQUIRE(r.action_overhead.size() == 1);
  CHECK(r.action_overhead[0].overhead_ms >= 0);
  CHECK(r.action_overhead[0].action_ms > 0);
  // The host clock has no device lag to read.
  CHECK(std::isnan(r.action_overhead[0].device_lag_ms));
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
    // I keeps for W only each projection's input and output gradient (the
    // planner's StageWeightGradBytes, less the received output gradient on
    // stage 0), not the graph: within one (B,T,C) float of that formula
    // (autograd reuses a summed gradient's buffer or not, by arrival order),
    // and below the activations.
    const LlamaConfig config = LlamaPreset("tiny");
    const double formula = cli::StageWeightGradBytes(config, PartitionUniform(config, 2), s, 1, T, Precision::kFp32) -
                           (s == 0 ? T * C * 4 : 0);
    CHECK(static_cast<double>(one[s].weight_grad_bytes) == Approx(formula).margin(T * C * 4));
    CHECK(one[s].weight_grad_bytes < one[s].activation_bytes);
    // B's temporaries are the planner's StageWorkspaceBytes, exactly: one
    // layer's backward in its larger half, or on the last stage the head's
    // (the logits' gradient and the log-softmax's). I's (it also builds W's
    // stash while it frees the activations) are at least as large, by an
    // amount that differs between LibTorch versions.
    for (const auto& [p, B] : {std::pair<const StageProfile*, int>{&one[s], 1}, {&two[s], 2}}) {
      const double work = cli::StageWorkspaceBytes(config, PartitionUniform(config, 2), s, B, T, Precision::kFp32);
      INFO("B=" << B << ": F " << p->forward_transient_bytes << ", B " << p->backward_transient_bytes << ", I "
                << p->backward_input_transient_bytes << " bytes; formula " << work);
      CHECK(static_cast<double>(p->backward_transient_bytes) == work);
      CHECK(p->backward_input_transient_bytes >= p->backward_transient_bytes);
      // W's none in fp32: each product is summed into its gradient in place.
      CHECK(p->backward_weight_transient_bytes == 0);
      // F's on the last stage: the head's fp32 logits (StageForwardWorkspaceParts).
      const cli::WorkspaceParts f =
          cli::StageForwardWorkspaceParts(config, PartitionUniform(config, 2), s, B, T, Precision::kFp32);
      if (s == 1) CHECK(static_cast<double>(p->forward_transient_bytes) == Approx(f.head).margin(64));
    }
  }
  // The messages: stage 0 sends hidden (B,T,C) float and mask (B,T) int64.
  CHECK(two[0].forward_message_bytes == 2 * T * C * 4 + 2 * T * 8);
  CHECK(two[1].backward_message_bytes == 2 * T * C * 4);
  // What a recomputed stage keeps: stage 1's received hidden state and mask
  // (no header); stage 0's tokens belong to the batch.
  CHECK(two[0].input_bytes == 0);
  CHECK(two[1].input_bytes == 2 * T * C * 4 + 2 * T * 8);
}

namespace {

// ProfileTiny's stages as `pplab profile` writes them, for the planner's fit.
CostModel TinyCostModel(const std::vector<StageProfile>& stages, int B, int T) {
  const LlamaConfig config = LlamaPreset("tiny");
  ProfileMeta meta;
  meta.model = "tiny";
  meta.config_json = config.ToJson();
  meta.partition = PartitionUniform(config, 2).ToString();
  meta.microbatch_size = B;
  meta.seq_len = T;
  meta.device = "cpu";
  meta.threads_per_rank = 1;
  meta.ranks = 1;
  meta.attention = SdpaAvailable() ? "sdpa" : "explicit";
  std::string json = "{\"format\": \"pplab.cost\", \"version\": 1, \"stages\": [";
  for (size_t s = 0; s < stages.size(); ++s) {
    json += std::string(s ? "," : "") + "{\"forward_ms\": 1, \"backward_ms\": 2, \"activation_bytes\": " +
            std::to_string(stages[s].activation_bytes) + "}";
  }
  return CostModel::FromJson(json + "], \"meta\": " + ProfileMetaToJson(meta) + "}", "tiny.json");
}

}  // namespace

TEST_CASE("the planner's activation formula, fitted at one microbatch shape, gives the bytes measured at others",
          "[profile]") {
  // The stages as `pplab profile` builds them (no padding mask). Fitted at 2 sequences of 16 tokens (a
  // factor for the layers' part, one for the head's, the exact part as it is), the formula's terms grow
  // as a LibTorch's kernels keep them: with the tokens, and on the explicit path with the tokens times
  // the sequence length. Within 1 % (measured 2026-11-27: 0.06 % on LibTorch 1.13). At 1 sequence
  // LibTorch 1.13's explicit path keeps 8 floats a head and position a layer beyond the proportion;
  // from 2 sequences on the bytes are in proportion. (In one process the mask stage 1 gets is stage
  // 0's own tensor, which the exact part counts: the head's factor takes that in.)
  const LlamaConfig config = LlamaPreset("tiny");
  const Partition partition = PartitionUniform(config, 2);
  const bool sdpa = SdpaAvailable();
  const cli::CostFit fit = cli::FitProfile(TinyCostModel(ProfileTiny(2, 16, false), 2, 16), config);
  INFO("factors: layers " << fit.activation_scale << ", head " << fit.head_activation_scale);
  for (const auto& [B, T] : {std::pair<int, int>{4, 16}, {2, 32}, {4, 32}}) {
    const std::vector<StageProfile> measured = ProfileTiny(B, T, false);
    for (int s = 0; s < 2; ++s) {
      const double predicted = fit.Activations(
          cli::StageActivationParts(config, partition, s, B, T, Precision::kFp32, {1, /*fused_attention=*/sdpa}));
      INFO(B << " x " << T << ", stage " << s << ": measured " << measured[s].activation_bytes << ", predicted "
             << predicted);
      CHECK(predicted == Approx(static_cast<double>(measured[s].activation_bytes)).epsilon(0.01));
    }
  }
}

}  // namespace pplab::profile_test

namespace pplab::profile_test {
namespace {

// One stage, tokens to logits through x W with a leaf W that CPU autocast
// caches (torch::mm; it does not cache nn::Linear's weight on the CPU), and
// the node of each forward's cast of W, kept so that distinct nodes stay
// distinct.
class CastRecordingStage : public Stage {
 public:
  CastRecordingStage(int64_t vocab, int64_t hidden) : vocab_(vocab) {
    auto gen = at::detail::createCPUGenerator(7);
    params_ = {{"embed", torch::randn({vocab, hidden}, gen).requires_grad_(true)},
               {"w", (torch::randn({hidden, hidden}, gen) / 4).requires_grad_(true)},
               {"head", (torch::randn({hidden, vocab}, gen) / 4).requires_grad_(true)}};
  }
  TensorList Forward(const TensorList& inputs) override {
    const int64_t B = inputs.at(0).size(0), T = inputs.at(0).size(1);
    const at::Tensor x = params_[0].second.index_select(0, inputs[0].reshape({-1}));  // (B*T,C)
    const at::Tensor h = torch::mm(x, params_[1].second);                             // (B*T,C)
    casts.push_back(CastNodeOf(h, params_[1].second));
    return {torch::mm(x + torch::tanh(h), params_[2].second).view({B, T, vocab_})};  // logits (B,T,V)
  }
  std::vector<std::pair<std::string, at::Tensor>> NamedParameters() override { return params_; }
  std::vector<std::shared_ptr<torch::autograd::Node>> casts;

 private:
  // The cast node of `weight` in `output`'s graph (its only path to the weight).
  static std::shared_ptr<torch::autograd::Node> CastNodeOf(const at::Tensor& output, const at::Tensor& weight) {
    for (const torch::autograd::Edge& e : output.grad_fn()->next_edges()) {
      if (e.function != nullptr && !e.function->next_edges().empty() &&
          e.function->next_edges()[0].function == torch::autograd::impl::grad_accumulator(weight)) {
        return e.function;
      }
    }
    return nullptr;
  }
  int64_t vocab_;
  std::vector<std::pair<std::string, at::Tensor>> params_;
};

}  // namespace

TEST_CASE("in bf16 the profile casts the weights once per timed phase, as a training step does", "[profile]") {
  auto owned = std::make_unique<CastRecordingStage>(32, 16);
  CastRecordingStage& recording = *owned;
  std::unique_ptr<Stage> stage = MixedPrecisionStage(std::move(owned), c10::kCPU);
  const StepBatch batch = SyntheticBatch(1, 0, 2, 8, 32, 1);
  ProfileOptions options;
  options.warmup = 1;
  options.repeats = 3;
  options.overhead_microbatches = 0;
  const ProfileResult r = ProfileOneRank({0}, {{0, stage.get()}}, batch, options);
  // The pass through the pipeline, then two phases of warm-up + repeats forwards each.
  REQUIRE(recording.casts.size() == 1 + 2 * 4);
  for (const auto& node : recording.casts) REQUIRE(node != nullptr);
  const std::set<torch::autograd::Node*> distinct = [&] {
    std::set<torch::autograd::Node*> out;
    for (const auto& node : recording.casts) out.insert(node.get());
    return out;
  }();
  // One cast for the pass, one for each phase's forwards: not one per forward.
  CHECK(distinct.size() == 3);
  // What those casts hold for the rest of a step: bf16 copies of the two
  // weights autocast caches, w (16 x 16) and head (16 x 32); the embedding
  // is indexed, not cast.
  REQUIRE(r.stages.size() == 1);
  CHECK(r.stages[0].cast_weight_bytes == 2 * (16 * 16 + 16 * 32));
  // Without warm-up the first measured F makes the casts: its activation
  // and I-to-W samples leave them out, as the warmed-up ones do.
  options.warmup = 0;
  options.repeats = 1;
  const ProfileResult cold = ProfileOneRank({0}, {{0, stage.get()}}, batch, options);
  CHECK(cold.stages[0].cast_weight_bytes == r.stages[0].cast_weight_bytes);
  CHECK(cold.stages[0].activation_bytes == r.stages[0].activation_bytes);
  CHECK(cold.stages[0].weight_grad_bytes == r.stages[0].weight_grad_bytes);
}

TEST_CASE("a rank's profile round-trips through the gather's words, doubles bit for bit", "[profile]") {
  StageProfile a;
  a.stage = 3;
  a.rank = 1;
  a.forward = {0.1, 0.2, 0.30000000000000004};
  a.reduce_grad = {1e-300, 2.5, 7};
  a.activation_bytes = 123456789012;
  a.forward_send_bytes = 42;
  a.input_received = true;
  a.cast_weight_bytes = 7;
  a.backward_input_transient_bytes = 9;
  a.backward_weight_transient_bytes = 11;
  StageProfile b = a;
  b.stage = 4;
  b.forward_send_bytes.reset();
  LinkProfile link;
  link.from = 1;
  link.to = 2;
  link.latency_ms = 0.0123;
  link.bandwidth_gbps = 3.25;
  link.samples = {{1, 0.01}, {1 << 24, 5.5}};
  StepProfile step;
  step.optimizer = {1, 2, 3};
  step.tied_exchange = {0.25, 0.5, 0.75};
  const std::vector<int64_t> words = PackRankProfile({{3, a}, {4, b}}, {link}, {0.004, 0.125, 2.5}, step);
  std::map<StageId, StageProfile> stages;
  ProfileResult r;
  UnpackRankProfile(words, true, stages, r);
  REQUIRE(stages.size() == 2);
  const StageProfile& got = stages.at(3);
  CHECK(got.rank == 1);
  CHECK(got.forward.p90 == 0.30000000000000004);
  CHECK(got.reduce_grad.p10 == 1e-300);
  CHECK(got.activation_bytes == 123456789012);
  CHECK(got.forward_send_bytes == std::optional<Bytes>(42));
  CHECK(got.input_received);
  CHECK(got.cast_weight_bytes == 7);
  CHECK(got.backward_input_transient_bytes == 9);
  CHECK(got.backward_weight_transient_bytes == 11);
  CHECK_FALSE(stages.at(4).forward_send_bytes.has_value());
  REQUIRE(r.links.size() == 1);
  CHECK(r.links[0].bandwidth_gbps == 3.25);
  CHECK(r.links[0].samples.size() == 2);
  CHECK(r.links[0].samples[1].one_way_ms == 5.5);
  REQUIRE(r.action_overhead.size() == 1);
  CHECK(r.action_overhead[0].overhead_ms == 0.004);
  CHECK(r.action_overhead[0].device_lag_ms == 0.125);
  CHECK(r.action_overhead[0].action_ms == 2.5);
  REQUIRE(r.step.size() == 1);
  CHECK(r.step[0].optimizer.p90 == 3);
  CHECK(r.step[0].tied_exchange.median == 0.5);
  // Another replica's words: only its step's work is kept.
  std::map<StageId, StageProfile> none;
  UnpackRankProfile(words, false, none, r);
  CHECK(none.empty());
  CHECK(r.links.size() == 1);
  CHECK(r.step.size() == 2);
}

}  // namespace pplab::profile_test

namespace pplab::profile_test {

TEST_CASE("in bf16 a Llama stage keeps 2 bytes of weight casts per linear weight parameter for the step", "[profile]") {
  // The stages cast their linear weights themselves (models/projections.h), so
  // autocast's cache holds them on the CPU as on a GPU.
  const LlamaConfig config = LlamaPreset("tiny");
  const Partition partition = PartitionUniform(config, 1);
  std::unique_ptr<Stage> stage = MixedPrecisionStage(BuildLlamaStage(config, partition, 0, 3, torch::kCPU), c10::kCPU);
  const StepBatch batch = SyntheticBatch(1, 0, 2, 16, config.vocab_size, 1);
  ProfileOptions options;
  options.warmup = 1;
  options.repeats = 1;
  options.overhead_microbatches = 0;
  const ProfileResult r = ProfileOneRank({0}, {{0, stage.get()}}, batch, options);
  REQUIRE(r.stages.size() == 1);
  CHECK(r.stages[0].cast_weight_bytes == 2 * StageLinearParams(config, partition, 0));
}

}  // namespace pplab::profile_test
