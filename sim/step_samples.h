// Variability of the step time: `simulate --samples N --seed S`.
#pragma once

#include <cstdint>

#include "schedules/schedule.h"
#include "sim/cost_model.h"

namespace pplab {

// Step-time percentiles over `samples` simulations of `schedule` whose
// F/B/I/W times are drawn from the cost model's spreads (Simulate with a
// generator), all from one std::mt19937_64 seeded with `seed`: the same
// arguments give the same figures.
struct StepTimeSamples {
  int samples = 0;
  std::uint64_t seed = 0;
  TimeNs p50 = 0;  // nearest rank: the ceil(0.5 n)-th smallest makespan
  TimeNs p99 = 0;  // the ceil(0.99 n)-th smallest
  TimeNs min = 0, max = 0;
};

// Throws pplab::Error when `samples` < 1, or as Simulate does.
StepTimeSamples SampleStepTime(const Schedule& schedule, const CostModel& costs, int samples, std::uint64_t seed);

}  // namespace pplab
