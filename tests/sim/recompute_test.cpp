// Recomputed stages in the cost model and the simulator: times and bytes
// against hand-computed figures.
#include "sim/recompute.h"

#include <catch2/catch.hpp>

#include "schedules/error.h"
#include "schedules/generators.h"
#include "schedules/lowering.h"
#include "sim/simulator.h"

namespace pplab::recompute_test {
namespace {

constexpr TimeNs kMs = 1000000;

StageCost Uniform() {
  StageCost c;
  c.forward = 1 * kMs;
  c.backward = 2 * kMs;
  c.activation_bytes = 1000;
  c.message_bytes = 100;
  c.workspace_bytes = 50;
  return c;
}

SimResult Run(const std::string& name, int K, int M, const CostModel& costs) {
  return Simulate(Lower(Generate(name, {K, M, 0})), costs);
}

}  // namespace

TEST_CASE("a recomputed stage's B and I take one F more, and W stays", "[recompute]") {
  StageCost only_b = Uniform();  // I and W derived: B / 2 each
  StageCost split = Uniform();
  split.backward.reset();
  split.backward_input = 3 * kMs / 2;
  split.backward_weight = kMs / 2;
  split.backward_input_spread = Spread{kMs, 2 * kMs};
  split.forward_backward = 5 * kMs;
  const CostModel costs = CostModel::FromStages({only_b, split}, Link{});
  const CostModel rc = WithRecompute(costs, {0, 1});
  auto time = [&](ActionKind k, StageId s) { return rc.ComputeTime({k, s, 0}); };
  CHECK(time(ActionKind::kForward, 0) == kMs);
  CHECK(time(ActionKind::kBackward, 0) == 3 * kMs);
  CHECK(time(ActionKind::kBackwardInput, 0) == 2 * kMs);  // B/2 + F
  CHECK(time(ActionKind::kBackwardWeight, 0) == kMs);     // B/2, as before
  CHECK(time(ActionKind::kBackward, 1) == 3 * kMs);       // I + W + F
  CHECK(time(ActionKind::kBackwardInput, 1) == 5 * kMs / 2);
  CHECK(time(ActionKind::kBackwardWeight, 1) == kMs / 2);
  REQUIRE(rc.Stage(1).backward_input_spread);
  CHECK(rc.Stage(1).backward_input_spread->p10 == 2 * kMs);
  CHECK(rc.Stage(1).backward_input_spread->p90 == 3 * kMs);
  CHECK_FALSE(rc.Stage(1).forward_backward);  // measured with the old backward
  // Bytes: stage 0 holds its tokens (0), stage 1 its received input.
  CHECK(rc.Stage(0).activation_bytes == 0);
  CHECK(rc.Stage(1).activation_bytes == 100);
  CHECK(rc.Stage(1).workspace_bytes == 50);
  CHECK(rc.Stage(1).recomputed_bytes == 1000);  // rebuilt by B or I
  // Stages not named keep their costs.
  const CostModel first = WithRecompute(costs, {0});
  CHECK(first.ComputeTime({ActionKind::kBackwardInput, 1, 0}) == 3 * kMs / 2);
  CHECK(first.Stage(1).activation_bytes == 1000);
}

TEST_CASE("GPipe on one rank: recomputing holds one microbatch's activations for one more F each", "[recompute]") {
  const CostModel costs = CostModel::Uniform(1, Uniform(), Link{});
  const SimResult plain = Run("gpipe", 1, 4, costs);
  const SimResult rc = Run("gpipe", 1, 4, WithRecompute(costs, {0}));
  CHECK(plain.makespan == 4 * (1 + 2) * kMs);
  CHECK(rc.makespan == 4 * (1 + 2 + 1) * kMs);
  // Four microbatches' activations at the last F, plus its workspace.
  CHECK(plain.per_rank[0].peak_activation_bytes == 4 * 1000 + 50);
  // Tokens only are held; a B rebuilds one microbatch's activations.
  CHECK(rc.per_rank[0].peak_activation_bytes == 1000 + 50);
}

TEST_CASE("1F1B on two ranks: (M + K - 1)(F + B + F), and the last stage holds its inputs", "[recompute]") {
  const CostModel costs = CostModel::Uniform(2, Uniform(), Link{});
  const SimResult plain = Run("1f1b", 2, 4, costs);
  const SimResult rc = Run("1f1b", 2, 4, WithRecompute(costs, {0, 1}));
  CHECK(plain.makespan == (4 + 2 - 1) * (1 + 2) * kMs);
  CHECK(rc.makespan == (4 + 2 - 1) * (1 + 2 + 1) * kMs);
  // Rank 0 has two microbatches in flight; rank 1 one at a time.
  CHECK(plain.per_rank[0].peak_activation_bytes == 2 * 1000 + 50);
  CHECK(rc.per_rank[0].peak_activation_bytes == 1000 + 50);
  CHECK(rc.per_rank[1].peak_activation_bytes == 100 + 1000 + 50);
  // input_bytes, when given, is what the stage holds.
  StageCost held = Uniform();
  held.input_bytes = 300;
  const SimResult with_inputs = Run("1f1b", 2, 4, WithRecompute(CostModel::Uniform(2, held, Link{}), {0, 1}));
  CHECK(with_inputs.per_rank[0].peak_activation_bytes == 2 * 300 + 1000 + 50);
}

TEST_CASE("zb-h1 recomputed: I rebuilds the activations and keeps them for W, and W and F hold no more",
          "[recompute]") {
  // F = I = W = 1 ms; 1000 bytes of activations, 1200 kept from I to W.
  StageCost c = Uniform();
  c.backward.reset();
  c.backward_input = kMs;
  c.backward_weight = kMs;
  c.weight_grad_bytes = 1200;
  const CostModel costs = CostModel::Uniform(2, c, Link{});
  const SimResult plain = Run("zb-h1", 2, 2, costs);
  const SimResult rc = Run("zb-h1", 2, 2, WithRecompute(costs, {0, 1}));
  // Rank 0 runs F0 F1 I0 W0 I1 W1. Without: both F's activations, then
  // I0's stash beside F1's, plus W0's workspace: 1200 + 1000 + 50.
  CHECK(plain.per_rank[0].peak_activation_bytes == 1200 + 1000 + 50);
  // Recomputed, F keeps the tokens only; the peak is W0's (one stash).
  CHECK(rc.per_rank[0].peak_activation_bytes == 1200 + 50);
  // Rank 1 runs F0 I0 F1 I1 W0 W1: at W0 both stashes are held either way.
  CHECK(plain.per_rank[1].peak_activation_bytes == 2 * 1200 + 50);
  CHECK(rc.per_rank[1].peak_activation_bytes == 2 * 1200 + 50);
}

TEST_CASE("recompute stages are named as none, all or stage ids, and nothing else", "[recompute]") {
  CHECK(ParseRecomputeStages("none", 4, "--recompute").empty());
  CHECK(ParseRecomputeStages("all", 3, "--recompute") == std::set<StageId>{0, 1, 2});
  CHECK(ParseRecomputeStages("2,0", 4, "--recompute") == std::set<StageId>{0, 2});
  CHECK(FormatRecomputeStages({0, 2}, 4) == "0,2");
  CHECK(FormatRecomputeStages({0, 1}, 2) == "all");
  CHECK(FormatRecomputeStages({}, 2) == "none");
  CHECK_THROWS_WITH(ParseRecomputeStages("4", 4, "--recompute"),
                    "--recompute names stage 4, but the plan has stages 0 to 3");
  CHECK_THROWS_WITH(ParseRecomputeStages("1,1", 4, "--recompute"), "--recompute names stage 1 twice");
  for (const char* bad : {"", "yes", "1,", ",1", "-1", "1;2", "99999999999"}) {
    CHECK_THROWS_WITH(ParseRecomputeStages(bad, 4, "--recompute"),
                      Catch::StartsWith("--recompute takes none, all, or stage ids"));
  }
  StageCost no_forward;
  no_forward.backward = kMs;
  const CostModel costs = CostModel::Uniform(1, no_forward, Link{});
  CHECK_THROWS_WITH(WithRecompute(costs, {0}),
                    Catch::Contains("stage 0 has no forward_ms, which recomputing it needs"));
}

TEST_CASE("input_bytes round-trips through the cost file", "[recompute][cost_model]") {
  const CostModel m = CostModel::FromJson(
      R"({"format": "pplab.cost", "version": 1, "stages": [{"forward_ms": 1, "backward_ms": 2, "input_bytes": 640}]})",
      "c.json");
  CHECK(m.Stage(0).input_bytes == 640);
  CHECK(CostModel::FromJson(m.ToJson(), "again.json").Stage(0).input_bytes == 640);
  CHECK_THROWS_WITH(
      CostModel::FromJson(R"({"format": "pplab.cost", "version": 1, "stages": [{"forward_ms": 1, "input_bytes": -1}]})",
                          "c.json"),
      Catch::Contains("input_bytes"));
}

}  // namespace pplab::recompute_test
