#include "sim/step_samples.h"

#include <catch2/catch.hpp>
#include <random>

#include "schedules/generators.h"
#include "schedules/lowering.h"
#include "sim/simulator.h"

namespace pplab::step_samples_test {
namespace {

CostModel Uniform(int stages, TimeNs f, TimeNs b) {
  StageCost c;
  c.forward = f;
  c.backward = b;
  return CostModel::Uniform(stages, c, Link{});
}

}  // namespace

TEST_CASE("sampled step time: one draw per action in program order, the same for a seed", "[sim][samples]") {
  // One rank, GPipe M=2: F0 F1 B0 B1 back to back, so the makespan is the
  // sum of the four draws. F is spread (p10 0.8, median 1, p90 1.4 ms), B
  // is not (2 ms) but still takes its draw.
  StageCost c;
  c.forward = 1000000;
  c.backward = 2000000;
  c.forward_spread = Spread{800000, 1400000};
  const CostModel costs = CostModel::Uniform(1, c, Link{});
  const Schedule s = Lower(GenerateGPipe(1, 2));
  std::mt19937_64 expected_rng(42), rng(42);
  auto draw = [&] { return static_cast<double>(expected_rng() >> 11) * 0x1.0p-53; };
  const Action f{ActionKind::kForward, 0, 0};
  for (int sample = 0; sample < 3; ++sample) {
    TimeNs expected = costs.SampleComputeTime(f, draw());
    expected += costs.SampleComputeTime(f, draw());
    draw();
    draw();
    expected += 2 * 2000000;
    CHECK(Simulate(s, costs, &rng).makespan == expected);
  }
  CHECK(Simulate(s, costs).makespan == 6000000);  // no generator: the model's times
  const StepTimeSamples a = SampleStepTime(s, costs, 200, 7), b = SampleStepTime(s, costs, 200, 7);
  CHECK(a.p50 == b.p50);
  CHECK(a.p99 == b.p99);
  CHECK(a.min <= a.p50);
  CHECK(a.p50 <= a.p99);
  CHECK(a.p99 <= a.max);
  CHECK(a.max <= 2 * 1500000 + 4000000);
  CHECK(a.min >= 2 * 750000 + 4000000);
  CHECK(SampleStepTime(s, costs, 200, 8).p50 != a.p50);
  // Without spreads every sample is the plain makespan.
  const StepTimeSamples plain = SampleStepTime(Lower(GenerateGPipe(2, 4)), Uniform(2, 1000, 2000), 5, 1);
  CHECK(plain.p50 == 15000);
  CHECK(plain.p99 == 15000);
}

TEST_CASE("sampled step time: per-step costs and a measured REDUCE_GRAD with spreads are drawn too", "[sim][samples]") {
  // One rank, GPipe M=1, D = 2: F 1 ms, B 2 ms, REDUCE_GRAD 0.5 ms (p10 0.4, p90 0.7), then the step: loss
  // and norm all-reduces 0.1 ms each without spread, clip 0.2 ms, optimizer 1 ms (p10 0.9, p90 1.2).
  const CostModel costs = CostModel::FromJson(R"({"format": "pplab.cost", "version": 1, "num_stages": 1,
    "default": {"forward_ms": 1, "backward_ms": 2, "reduce_grad_ms": 0.5, "reduce_grad_p10_ms": 0.4,
                "reduce_grad_p90_ms": 0.7},
    "data_parallel": {"degree": 2},
    "step": {"loss_allreduce_ms": 0.1, "norm_allreduce_ms": 0.1, "clip_ms": 0.2, "optimizer_ms": 1,
             "optimizer_p10_ms": 0.9, "optimizer_p90_ms": 1.2}})",
                                              "s.json");
  CHECK(costs.HasSpread());
  const Schedule s = AddReduceGrad(Lower(GenerateGPipe(1, 1)));
  CHECK(Simulate(s, costs).makespan == 1000000 + 2000000 + 500000 + 200000 + 200000 + 1000000);
  // Draws: F, B (no spread, still drawn), REDUCE_GRAD, then the optimizer; the rest keep their times.
  std::mt19937_64 expected_rng(5), rng(5);
  auto draw = [&] { return static_cast<double>(expected_rng() >> 11) * 0x1.0p-53; };
  for (int sample = 0; sample < 3; ++sample) {
    draw();
    draw();
    const TimeNs reduce = DrawFromSpread(500000, Spread{400000, 700000}, draw());
    const TimeNs optimizer = DrawFromSpread(1000000, Spread{900000, 1200000}, draw());
    CHECK(Simulate(s, costs, &rng).makespan == 3000000 + reduce + 400000 + optimizer);
  }
  const StepTimeSamples a = SampleStepTime(s, costs, 100, 3);
  CHECK(a.min >= 3000000 + 375000 + 400000 + 875000);
  CHECK(a.max <= 3000000 + 750000 + 400000 + 1250000);
  CHECK(a.p10 <= a.p50);
  CHECK(a.p50 <= a.p90);
  CHECK(a.p90 <= a.p99);
}

TEST_CASE("sim tie rule: overlapping sampled [p10, p90] intervals tie, separated ones do not", "[sim][samples][plan]") {
  StepTimeSamples a, b;
  a.p10 = 100, a.p50 = 110, a.p90 = 130;
  b.p10 = 125, b.p50 = 140, b.p90 = 150;
  CHECK(StepTimesTie(a, b));
  CHECK(StepTimesTie(b, a));
  b.p10 = 130;  // touching
  CHECK(StepTimesTie(a, b));
  b.p10 = 131;
  CHECK_FALSE(StepTimesTie(a, b));
  CHECK_FALSE(StepTimesTie(b, a));
  // Identical plans (one schedule, one cost model) drawn with one seed draw identical samples: a tie.
  StageCost c;
  c.forward = 1000000;
  c.backward = 2000000;
  c.forward_spread = Spread{900000, 1300000};
  const CostModel costs = CostModel::Uniform(2, c, Link{});
  const StepTimeSamples x = SampleStepTime(Lower(GenerateGPipe(2, 4)), costs, 100, 1);
  const StepTimeSamples y = SampleStepTime(Lower(GenerateGPipe(2, 4)), costs, 100, 1);
  CHECK(x.p10 < x.p90);
  CHECK((x.p10 == y.p10 && x.p50 == y.p50 && x.p90 == y.p90));
  CHECK(StepTimesTie(x, y));
}

}  // namespace pplab::step_samples_test
