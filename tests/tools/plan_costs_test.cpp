// The planner's cost estimates (tools/plan_costs.h): a stage's FLOPs and bytes against
// hand-computed figures, and the cost fits, analytic and fitted to profiles.
#include "tools/plan_costs.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>

#include "models/tensor_parallel.h"
#include "tests/tools/plan_test_support.h"
#include "tools/plan_search.h"

namespace pplab::cli::plan_costs_test {

TEST_CASE("plan: the balanced model's stages cost the same", "[plan]") {
  const LlamaConfig c = BalancedModel();
  const Partition p = PartitionUniform(c, 2);
  REQUIRE(p.ToString() == "2,1");
  CHECK(StageForwardFlops(c, p, 0, 1, kSeqLen) == StageForwardFlops(c, p, 1, 1, kSeqLen));
  // 2 layers of 2 T P + 4 L^2 h FLOPs, T = 16 tokens.
  const double layer = 2.0 * 16 * DecoderLayerParams(c) + 4.0 * 16 * 16 * 32;
  CHECK(StageForwardFlops(c, p, 0, 1, kSeqLen) == 2 * layer);
  CHECK(StageForwardFlops(c, p, 0, 4, kSeqLen) == 4 * 2 * layer);  // linear in the microbatch size
  CHECK(MessageBytes(c, 2, kSeqLen, Precision::kFp32) == 4.0 * 2 * 16 * 32);
}

TEST_CASE("plan: a profile's activations fit the layers and the head each its own factor, the exact part as it is",
          "[plan]") {
  const LlamaConfig c = BalancedModel();
  // Measured: the layers' formula times 1.25, the head's times 1.05, the exact part as it is (the
  // probabilities, stage 0's output, stage 1's mask), as a LibTorch whose kernels keep more than the
  // formula would measure.
  const auto measured = [&](const Partition& p, int s) {
    const ActivationParts a = StageActivationParts(c, p, s, 2, kSeqLen, Precision::kFp32);
    return std::llround(1.25 * a.layers + 1.05 * a.head + a.exact);
  };
  const auto stage = [](long long bytes) {
    return "{\"forward_ms\": 1, \"backward_ms\": 2, \"activation_bytes\": " + std::to_string(bytes) + "}";
  };
  const Partition two = PartitionUniform(c, 2);
  const CostModel profile =
      CostModel::FromJson(ProfileJson(c, stage(measured(two, 0)) + "," + stage(measured(two, 1))), "cost.json");
  const CostFit fit = FitProfile(profile, c);
  // (To the measured bytes' rounding.)
  CHECK(fit.activation_scale == Approx(1.25).epsilon(1e-5));
  CHECK(fit.head_activation_scale == Approx(1.05).epsilon(1e-5));
  // Another partition and microbatch size: each part scaled by its own factor.
  const Partition other = PartitionExplicit(c, 2, {1, 2});
  for (int s = 0; s < 2; ++s) {
    const ActivationParts a = StageActivationParts(c, other, s, 4, kSeqLen, Precision::kFp32);
    CHECK(fit.Activations(a) == Approx(1.25 * a.layers + 1.05 * a.head + a.exact).epsilon(1e-5));
  }
  // One stage cannot tell the two apart: one factor for both, fitted to the stage.
  const Partition whole = PartitionUniform(c, 1);
  std::string one = ProfileJson(c, stage(measured(whole, 0)));
  for (const auto& [from, to] : {std::pair<std::string, std::string>{"\"partition\": \"2,1\"", "\"partition\": \"3\""},
                                 {"\"ranks\": 2", "\"ranks\": 1"}}) {
    one.replace(one.find(from), from.size(), to);
  }
  const CostFit single = FitProfile(CostModel::FromJson(one, "one.json"), c);
  const ActivationParts a = StageActivationParts(c, whole, 0, 2, kSeqLen, Precision::kFp32);
  CHECK(single.activation_scale == single.head_activation_scale);
  CHECK(single.activation_scale == Approx((1.25 * a.layers + 1.05 * a.head) / (a.layers + a.head)).epsilon(1e-5));
}

TEST_CASE("plan: a profile's F, B, I and W temporaries fit their own factors, the head's parts theirs", "[plan]") {
  const LlamaConfig c = BalancedModel();
  const Partition two = PartitionUniform(c, 2);
  // Measured in bf16: on stage 0 F's at 0.5 x the layers' formula, B's at 1.2 x and I's at 1.5 x (it
  // builds W's stash while it frees the activations); on the last stage the head's exactly (the logits,
  // their gradient), but B's at 1.5 x (as a vocabulary split over --tp 2 took); W's at 3 x its formula
  // (a CPU's bf16 products go through fp32).
  const auto stage = [&](int s) {
    const WorkspaceParts f = StageForwardWorkspaceParts(c, two, s, 2, kSeqLen, Precision::kBf16);
    const WorkspaceParts b = StageBackwardWorkspaceParts(c, two, s, 2, kSeqLen, Precision::kBf16);
    return "{\"forward_ms\": 1, \"backward_ms\": 2, \"activation_bytes\": 1000, \"forward_workspace_bytes\": " +
           std::to_string(std::llround(f.Scaled(0.5))) +
           ", \"backward_workspace_bytes\": " + std::to_string(std::llround(b.Scaled(1.2, 1.5))) +
           ", \"backward_input_workspace_bytes\": " + std::to_string(std::llround(b.Scaled(1.5))) +
           ", \"backward_weight_workspace_bytes\": " +
           std::to_string(std::llround(3 * StageWeightWorkspaceBytes(c, two, s, Precision::kBf16))) + "}";
  };
  const std::string bf16 = "\"precision\": \"bf16\", ";
  const CostFit fit = FitProfile(CostModel::FromJson(ProfileJson(c, stage(0) + "," + stage(1), bf16), "bf16.json"), c);
  for (int k = 0; k < 3; ++k) REQUIRE(fit.kind_workspace_fitted[k]);
  REQUIRE(fit.weight_workspace_fitted);
  CHECK(fit.kind_workspace_scale[0] == Approx(0.5).epsilon(1e-4));
  CHECK(fit.kind_workspace_scale[1] == Approx(1.2).epsilon(1e-4));
  CHECK(fit.kind_workspace_scale[2] == Approx(1.5).epsilon(1e-4));
  CHECK(fit.weight_workspace_scale == Approx(3.0).epsilon(1e-4));
  // The head's: B's own, the others as the formula.
  CHECK(fit.kind_head_workspace_scale[0] == Approx(1.0).epsilon(1e-4));
  CHECK(fit.kind_head_workspace_scale[1] == Approx(1.5).epsilon(1e-4));
  CHECK(fit.kind_head_workspace_scale[2] == Approx(1.0).epsilon(1e-4));
  // A profile without them (files from before 2026-11-28) fits neither.
  const std::string plain = R"({"forward_ms": 1, "backward_ms": 2, "activation_bytes": 1000})";
  const CostFit old = FitProfile(CostModel::FromJson(ProfileJson(c, plain + "," + plain, bf16), "old.json"), c);
  for (int k = 0; k < 3; ++k) CHECK_FALSE(old.kind_workspace_fitted[k]);
  CHECK_FALSE(old.weight_workspace_fitted);
}

namespace {

// A profile of BalancedModel at `mb` sequences a microbatch whose F takes
// `fixed_ms` a fixed unit (StageFixedUnits) plus `ns_per_flop` a FLOP, and
// B twice that; `extra_top` goes beside its stages (ProfileJson).
CostModel FixedAndFlopsProfile(const LlamaConfig& c, int mb, double fixed_ms, double ns_per_flop,
                               const std::string& extra_top = "") {
  const Partition p = PartitionUniform(c, 2);
  std::string stages;
  for (int s = 0; s < 2; ++s) {
    const double f = fixed_ms * StageFixedUnits(p, s) + ns_per_flop * StageForwardFlops(c, p, s, mb, kSeqLen) / 1e6;
    stages += FormulaStage(c, p, s, mb, f);
  }
  return CostModel::FromJson(ProfileJson(c, stages, "", extra_top, mb), "cost-mb" + std::to_string(mb) + ".json");
}

}  // namespace

TEST_CASE("plan: profiles at two microbatch sizes fit a fixed time a layer besides the time per FLOP", "[plan]") {
  const LlamaConfig c = BalancedModel();
  const Partition p = PartitionUniform(c, 2);
  // Units: stage 0 holds 2 layers and the embedding, stage 1 a layer and the head.
  CHECK(StageFixedUnits(p, 0) == 2.5);
  CHECK(StageFixedUnits(p, 1) == 1.5);
  CHECK(StageFixedUnits(PartitionUniform(c, 1), 0) == 4.0);
  const CostModel two = FixedAndFlopsProfile(c, 2, 0.25, 3), four = FixedAndFlopsProfile(c, 4, 0.25, 3);
  const CostFit fit = FitProfiles({&four, &two}, c);
  REQUIRE(fit.ranges.size() == 1);
  CHECK(fit.ranges[0].from == 2);
  CHECK(fit.ranges[0].to == 4);
  // Every size takes the one range.
  for (const int mb : {1, 2, 3, 4, 8}) {
    const TimeCoefficients t = fit.At(mb);
    CHECK(t.fixed_ns_per_unit[0] == Approx(0.25e6).epsilon(1e-6));
    CHECK(t.fixed_ns_per_unit[1] == Approx(0.5e6).epsilon(1e-6));
    CHECK(t.ns_per_flop[0] == Approx(3.0).epsilon(1e-6));
    CHECK(t.ns_per_flop[1] == Approx(6.0).epsilon(1e-6));
  }
  CHECK(fit.activation_scale == Approx(1.0).epsilon(1e-6));
  // Either profile alone puts the fixed time into the time per FLOP.
  CHECK_FALSE(FitProfile(two, c).At(2).HasFixed());
  CHECK(FitProfile(two, c).ns_per_flop[0] > 3.0);
  // The search: each profile's own candidate (M = 4 of 2, M = 2 of 4, for
  // gpipe and 1f1b) as measured, and the fit carries to microbatches of 1
  // (M = 8): each stage's F is the fixed time plus 3 ns a FLOP.
  PlanSearchOptions o = Options(c, Bytes{1} << 40);
  o.fit = fit;
  o.profiles = {&two, &four};
  const PlanSearchResult r = SearchPlans(o);
  int measured = 0;
  for (const PlanCandidate& cand : r.fitting) {
    measured += cand.measured_costs;
    if (cand.measured_costs) CHECK((cand.microbatch_size == 2 || cand.microbatch_size == 4));
  }
  CHECK(measured == 4);
  const CandidateModel eight = CandidateCostModel(o, OneFOneB8(r));
  for (int s = 0; s < 2; ++s) {
    const double f = 0.25e6 * StageFixedUnits(p, s) + 3 * StageForwardFlops(c, p, s, 1, kSeqLen);
    CHECK(static_cast<double>(eight.costs.ComputeTime({ActionKind::kForward, s, 0})) == Approx(f).margin(1));
    CHECK(static_cast<double>(eight.costs.ComputeTime({ActionKind::kBackward, s, 0})) == Approx(2 * f).margin(1));
  }
  // Times that grow faster than the FLOPs (3 ns a FLOP at 2 a microbatch,
  // 4.5 at 4) would need a negative fixed time: none, and the time per FLOP
  // alone, by least squares (x4 = 2 x2 FLOPs: (3 + 2 * 9) / (1 + 4) = 4.2).
  const CostModel flat = FixedAndFlopsProfile(c, 2, 0, 3), steep = FixedAndFlopsProfile(c, 4, 0, 4.5);
  const TimeCoefficients clamped = FitProfiles({&flat, &steep}, c).At(4);
  CHECK(clamped.fixed_ns_per_unit[0] == 0);
  CHECK(clamped.ns_per_flop[0] == Approx(4.2).epsilon(1e-6));
  // Three sizes: a range between each two, each fitted to its own two
  // profiles (1 to 2: 0.25 ms a unit and 3 ns a FLOP; 2 to 4: 4.2 ns a FLOP
  // alone, as above), chosen by the candidate's size.
  const CostModel one = FixedAndFlopsProfile(c, 1, 0.25, 3), two_fixed = FixedAndFlopsProfile(c, 2, 0.25, 3);
  const CostFit three = FitProfiles({&steep, &one, &flat}, c);
  REQUIRE(three.ranges.size() == 2);
  CHECK(three.ranges[0].from == 1);
  CHECK(three.ranges[1].from == 2);
  CHECK(three.ranges[1].to == 4);
  const CostFit pieces = FitProfiles({&steep, &one, &two_fixed}, c);
  CHECK(pieces.At(1).fixed_ns_per_unit[0] == Approx(0.25e6).epsilon(1e-6));
  CHECK(pieces.At(2).ns_per_flop[0] == Approx(3.0).epsilon(1e-6));  // the lower range at a shared size
  // 2 to 4: the fit of those two profiles alone, not of all three.
  const TimeCoefficients upper = FitProfiles({&two_fixed, &steep}, c).At(3);
  for (int k = 0; k < 4; ++k) {
    CHECK(pieces.At(3).fixed_ns_per_unit[k] == upper.fixed_ns_per_unit[k]);
    CHECK(pieces.At(3).ns_per_flop[k] == upper.ns_per_flop[k]);
  }
  CHECK(pieces.At(3).ns_per_flop[0] != FitProfiles({&one, &two_fixed, &steep}, c).ns_per_flop[0]);
  CHECK(pieces.At(16).ns_per_flop[0] == pieces.At(3).ns_per_flop[0]);  // above the largest: the last range
  // The step's all-reduces: the mean of the profiles that measured them (a
  // one-process profile has none: 0).
  const CostModel with_group =
      FixedAndFlopsProfile(c, 4, 0, 3, "\"step\": {\"loss_allreduce_ms\": 2.0, \"norm_allreduce_ms\": 0.5}, ");
  const CostFit mixed = FitProfiles({&flat, &with_group}, c);
  CHECK(mixed.loss_allreduce == MsToNs(2.0));
  CHECK(mixed.norm_allreduce == MsToNs(0.5));
}

TEST_CASE(
    "plan: a profile of 2 tensor-parallel ranks is fitted to a rank's share, its collectives held, for its T alone",
    "[plan][tp]") {
  const LlamaConfig c = BalancedModel();
  const LlamaConfig share = TensorParallelShare(c, 2);
  const Partition p = PartitionUniform(c, 2);
  // Measured: F = 3 ns per FLOP of a rank's share (B = 2F), bytes = the share's formulas.
  std::string stages;
  for (int s = 0; s < 2; ++s) {
    // bf16 casts of a rank's share of the weights: 2 bytes a parameter.
    stages += FormulaStage(share, p, s, 2, 3 * StageForwardFlops(share, p, s, 2, kSeqLen) / 1e6,
                           ", \"cast_weight_bytes\": " + std::to_string(2 * StageLinearParams(share, p, s)));
  }
  const CostModel profile = CostModel::FromJson(ProfileJson(c, stages, "\"tensor_parallel\": 2, "), "cost.json");
  const CostFit fit = FitProfile(profile, c);
  CHECK(fit.tensor_parallel == 2);
  CHECK_FALSE(fit.sequence_parallel);
  CHECK(fit.ns_per_flop[0] == Approx(3.0).epsilon(1e-6));
  CHECK(fit.ns_per_flop[1] == Approx(6.0).epsilon(1e-6));
  CHECK(fit.activation_scale == Approx(1.0).epsilon(1e-6));
  CHECK(fit.cast_bytes_per_param == Approx(2.0).epsilon(1e-9));
  // T = 2 over a slow link (1 ms a collective): the fitted times already
  // hold the profile's collectives, so no candidate gets them again, and
  // every step is what it is over a free link.
  PlanSearchOptions o = Options(c, Bytes{1} << 40);
  o.tp = 2;
  o.fit = fit;
  o.profiles = {&profile};
  o.tp_link = Link{MsToNs(1), 1.0};
  const PlanSearchResult slow = SearchPlans(o);
  o.tp_link = Link{};
  const PlanSearchResult free = SearchPlans(o);
  REQUIRE(slow.fitting.size() == free.fitting.size());
  int measured = 0;
  for (size_t i = 0; i < slow.fitting.size(); ++i) {
    CHECK(slow.fitting[i].step_time == free.fitting[i].step_time);
    CHECK(slow.fitting[i].tp == 2);
    measured += slow.fitting[i].measured_costs;
  }
  // The profile's own configuration (K = 2, T = 2, M = 4 of 2 sequences) uses its stages as measured.
  CHECK(measured == 2);
  // The same fit taken as whole layers' (T = 1) gets the link's collectives: slower.
  CostFit whole = fit;
  whole.tensor_parallel = 1;
  o.fit = whole;
  o.profiles.clear();
  o.tp_link = Link{MsToNs(1), 1.0};
  const PlanSearchResult added = SearchPlans(o);
  CHECK(added.fitting.front().step_time > free.fitting.front().step_time + MsToNs(1));
}

TEST_CASE("plan: bf16 counts 2 bytes per activation value, the model state stays 16 bytes per parameter", "[plan]") {
  const LlamaConfig c = BalancedModel();  // h 32, f 64, 4 heads, kv = 2 x 8 = 16, V = P / h + 32
  const Partition p = PartitionUniform(c, 2);
  const int mb = 2;
  const double T = 2.0 * kSeqLen;  // 32 tokens
  // h 32, q 32, kv 16, n = 4 heads, L 16. One layer keeps, in bytes a token: each of its two norms its fp32
  // input and 1 / rms and, for the projections, its output in the compute dtype ((4 + e) h + 4); the
  // attention a copy of q, K and V repeated to q each and o_proj's input (4 e q), and the fp32 softmax
  // probabilities (4 n L, in bf16 also their bf16 copy, 6 n L); the MLP gate, up and product (3 e f).
  const double fp32_layer = 2 * (8 * 32 + 4) + 4 * 4 * 32 + 4 * 4 * 16 + 3 * 4 * 64;  // 2056
  const double bf16_layer = 2 * (6 * 32 + 4) + 4 * 2 * 32 + 6 * 4 * 16 + 3 * 2 * 64;  // 1416
  // Stage 0 has 2 layers and holds its output, the fp32 residual stream (4h).
  CHECK(StageActivationBytes(c, p, 0, mb, kSeqLen, Precision::kFp32) == T * (2 * fp32_layer + 4 * 32));
  CHECK(StageActivationBytes(c, p, 0, mb, kSeqLen, Precision::kBf16) == T * (2 * bf16_layer + 4 * 32));
  // The last stage: 1 layer, the head (the final norm, the loss's fp32 log-softmax of V logits) and the
  // received int64 mask.
  const double head = 6 * 32 + 4 + 4.0 * c.vocab_size;
  const ActivationParts last = StageActivationParts(c, p, 1, mb, kSeqLen, Precision::kBf16);
  // Its parts: the probabilities are exact (6 n L = 384 bytes a token), with the mask.
  CHECK(last.layers == T * (bf16_layer - 384));
  CHECK(last.head == T * head);
  CHECK(last.exact == T * (384 + 8));
  CHECK(StageActivationBytes(c, p, 1, mb, kSeqLen, Precision::kBf16) == T * (bf16_layer + head + 8));
  // Fused attention in bf16: q, K and V unrepeated (the rotary's one q-and-k tensor and V) and the
  // output, e (2q + 2kv), and an fp32 log-sum-exp a head, in place of the copies and probabilities.
  const double fused_layer = 2 * (6 * 32 + 4) + 2 * (2 * 32 + 2 * 16) + 4 * 4 + 3 * 2 * 64;  // 984
  CHECK(StageActivationBytes(c, p, 0, mb, kSeqLen, Precision::kBf16, {1, /*fused_attention=*/true}) ==
        T * (2 * fused_layer + 4 * 32));
  // W's stash: 6h + 2kv + 3f = 192 + 32 + 192 = 416 values per token and layer.
  CHECK(StageWeightGradBytes(c, p, 0, mb, kSeqLen, Precision::kBf16) == 2 * T * 416 * 2);
  // Workspace: a layer's backward peaks in its attention half (the fp32 score gradients of every head,
  // n L = 64 a token, beside the fp32 gradient of h = 32) or its MLP half (3f = 192 values a token, e
  // bytes each); the head's, 2 x 4 V bytes a token.
  CHECK(StageWorkspaceBytes(c, p, 0, mb, kSeqLen, Precision::kFp32) == T * 4 * 192);        // the MLP's
  CHECK(StageWorkspaceBytes(c, p, 0, mb, kSeqLen, Precision::kBf16) == T * 4 * (64 + 32));  // both: 384 a token
  CHECK(StageWorkspaceBytes(c, p, 0, mb, kSeqLen, Precision::kBf16, {1, /*fused_attention=*/true}) == T * 2 * 192);
  CHECK(StageWorkspaceBytes(c, p, 1, mb, kSeqLen, Precision::kFp32) == T * 8 * c.vocab_size);  // the head's is larger
  // F's: on the last stage the fp32 logits, 4 V bytes a token; elsewhere the layers' part, B's layer formula.
  CHECK(StageForwardWorkspaceParts(c, p, 1, mb, kSeqLen, Precision::kBf16).head == T * 4 * c.vocab_size);
  CHECK(StageForwardWorkspaceParts(c, p, 1, mb, kSeqLen, Precision::kBf16).layers == 0);
  CHECK(StageForwardWorkspaceParts(c, p, 0, mb, kSeqLen, Precision::kBf16).layers == T * 4 * (64 + 32));
  CHECK(StageForwardWorkspaceParts(c, p, 0, mb, kSeqLen, Precision::kBf16).head == 0);
  // W's: none in fp32 (summed into the gradients in place); in bf16 the largest product, gate and up
  // (2 f h = 4096 values) on a stage of layers, the head's V h where that is larger.
  CHECK(StageWeightWorkspaceBytes(c, p, 0, Precision::kFp32) == 0);
  CHECK(StageWeightWorkspaceBytes(c, p, 1, Precision::kFp32) == 0);
  CHECK(StageWeightWorkspaceBytes(c, p, 0, Precision::kBf16) == 2 * 2 * 64 * 32);
  CHECK(StageWeightWorkspaceBytes(c, p, 1, Precision::kBf16) == 2.0 * std::max(2 * 64 * 32, c.vocab_size * 32));
  // A message is one (mb, L, h) tensor: 2 x 16 x 32 values, 4096 bytes in fp32, 2048 in bf16.
  CHECK(MessageBytes(c, mb, kSeqLen, Precision::kFp32) == 4096);
  CHECK(MessageBytes(c, mb, kSeqLen, Precision::kBf16) == 2048);
  // The search: rank 0's peak is 16 B per parameter plus K = 2 microbatches of activations (1f1b), at
  // 2 bytes per value.
  PlanSearchOptions o = Options(c, Bytes{1} << 40);
  o.precision = Precision::kBf16;
  const PlanCandidate best = SearchPlans(o).fitting.front();
  REQUIRE(best.schedule == "1f1b");
  REQUIRE(best.microbatch_size == 1);
  const Bytes weights = 16 * StageParams(c, best.partition, 0), weights1 = 16 * StageParams(c, best.partition, 1);
  const Bytes act = std::llround(StageActivationBytes(c, best.partition, 0, 1, kSeqLen, Precision::kBf16));
  const Bytes act1 = std::llround(StageActivationBytes(c, best.partition, 1, 1, kSeqLen, Precision::kBf16));
  const Bytes work = Work(c, best.partition, 0, Precision::kBf16), work1 = Work(c, best.partition, 1, Precision::kBf16);
  CHECK(best.peak_memory == std::max(weights + 2 * act + work, weights1 + act1 + work1));  // no casts: fp32's fit
  std::printf(
      "plan, balanced model, 1f1b M=8: peak memory per rank %lld B in bf16 (activations %lld B per microbatch)\n",
      static_cast<long long>(best.peak_memory), static_cast<long long>(act));
}

TEST_CASE("plan: a bf16 profile is fitted at 2 bytes per value and refuses an fp32 search", "[plan]") {
  const LlamaConfig c = BalancedModel();
  const Partition p = PartitionUniform(c, 2);
  // Measured bytes exactly the bf16 formulas: the fit's byte scales are 1.
  std::string stages;
  for (int s = 0; s < 2; ++s) {
    stages += std::string(s ? "," : "") + "{\"forward_ms\": 1, \"backward_ms\": 2, \"activation_bytes\": " +
              std::to_string(std::llround(StageActivationBytes(c, p, s, 2, kSeqLen, Precision::kBf16))) +
              ", \"message_bytes\": " + std::to_string(std::llround(MessageBytes(c, 2, kSeqLen, Precision::kBf16))) +
              "}";
  }
  const CostModel profile = CostModel::FromJson(ProfileJson(c, stages, "\"precision\": \"bf16\", "), "bf16.json");
  const CostFit fit = FitProfile(profile, c);
  CHECK(fit.activation_scale == Approx(1.0).epsilon(1e-6));
  CHECK(fit.message_scale == Approx(1.0).epsilon(1e-6));
  PlanSearchOptions o = Options(c, Bytes{1} << 40);
  o.fit = fit;
  o.profiles = {&profile};
  CHECK_THROWS_WITH(SearchPlans(o),
                    Catch::Contains("plan: --precision fp32, but the profile bf16.json was measured in bf16"));
  o.precision = Precision::kBf16;
  CHECK_FALSE(SearchPlans(o).fitting.empty());
}

TEST_CASE("plan ties: a profile's spreads are fitted relative to the medians", "[plan][samples]") {
  const LlamaConfig c = BalancedModel();
  const Partition p = PartitionUniform(c, 2);
  std::string stages;
  for (int s = 0; s < 2; ++s) {
    const double f = 3 * StageForwardFlops(c, p, s, 2, kSeqLen) / 1e6;  // ms
    stages += std::string(s ? "," : "") + "{\"forward_ms\": " + std::to_string(f) +
              ", \"forward_p10_ms\": " + std::to_string(0.9 * f) + ", \"forward_p90_ms\": " + std::to_string(1.2 * f) +
              ", \"backward_ms\": " + std::to_string(2 * f) + "}";
  }
  const CostModel profile =
      CostModel::FromJson(ProfileJson(c, stages, "", "\"step\": {\"optimizer_ms\": 5}, "), "cost.json");
  const CostFit fit = FitProfile(profile, c);
  CHECK(fit.has_spread[0]);
  CHECK_FALSE(fit.has_spread[1]);
  CHECK(fit.spread_low[0] == Approx(0.1).epsilon(1e-4));
  CHECK(fit.spread_high[0] == Approx(0.2).epsilon(1e-4));
  PlanSearchOptions o = Options(c, Bytes{1} << 40);
  o.fit = fit;
  o.profiles = {&profile};
  const PlanSearchResult r = SearchPlans(o);
  REQUIRE(r.fitting.front().samples);
  // The profile's own configuration (measured costs) keeps its per-step work, as simulate does.
  // gpipe M = 4 at 2 sequences per microbatch: (M + K - 1)(F + B) = 5 x 3 F, then the 5 ms optimizer.
  const PlanCandidate& measured = Find(r, "gpipe", 4);
  CHECK(measured.measured_costs);
  const double F = 3 * StageForwardFlops(c, p, 0, 2, kSeqLen);
  CHECK(static_cast<double>(measured.step_time) == Approx(15 * F + 5e6).margin(15));
  // The fit: 5 ms over the parameters of the larger of the profile's two ranks.
  const double largest = static_cast<double>(std::max(StageParams(c, p, 0), StageParams(c, p, 1)));
  CHECK(fit.optimizer_ns_per_param == Approx(5e6 / largest));
  CHECK(fit.clip_ns_per_param == 0);
}

TEST_CASE("plan: a profile's message rules and send share carry into fitted candidates", "[plan]") {
  const LlamaConfig c = BalancedModel();
  // Stage 0's send held half its message; stage 1 sends no forward message.
  const std::string stages =
      R"({"forward_ms": 1, "backward_ms": 2, "message_bytes": 1000, "forward_send_bytes": 500},
         {"forward_ms": 1, "backward_ms": 2, "message_bytes": 1000})";
  const CostModel profile = CostModel::FromJson(
      ProfileJson(c, stages, "",
                  R"("message_memory": {"sent_freed": "next_send_after_delivery", "receive_posted": "at_use"}, )"),
      "cost.json");
  const CostFit fit = FitProfile(profile, c);
  REQUIRE(fit.messages);
  CHECK(fit.messages->sent_freed == MessageMemory::SentFreed::kNextSendAfterDelivery);
  CHECK(fit.forward_send_share == Approx(0.5));
  // Without a profile (analytic costs), messages hold no memory.
  CHECK_FALSE(AnalyticFit(1e9, Precision::kFp32).messages);
}

}  // namespace pplab::cli::plan_costs_test
