#include "sim/step_samples.h"

#include <catch2/catch.hpp>
#include <random>

#include "schedules/generators.h"
#include "schedules/lowering.h"
#include "sim/simulator.h"

namespace pplab {
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

}  // namespace pplab
