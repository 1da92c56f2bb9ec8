// Variability of the step time: `simulate --samples N --seed S`, and the tie
// rule `pplab plan` uses to say when two plans differ by less than the noise.
#pragma once

#include <cstdint>

#include "schedules/schedule.h"
#include "sim/cost_model.h"

namespace pplab {

// Step-time percentiles over `samples` simulations of `schedule` whose
// action and per-step times are drawn from the cost model's spreads
// (Simulate with a generator), all from one std::mt19937_64 seeded with
// `seed`: the same arguments give the same figures. Percentiles are by
// nearest rank: the q-th is the ceil(q n)-th smallest makespan.
struct StepTimeSamples {
  int samples = 0;
  std::uint64_t seed = 0;
  TimeNs p10 = 0;  // the ceil(0.1 n)-th smallest makespan
  TimeNs p50 = 0;  // the ceil(0.5 n)-th smallest
  TimeNs p90 = 0;  // the ceil(0.9 n)-th smallest
  TimeNs p99 = 0;  // the ceil(0.99 n)-th smallest
  TimeNs min = 0, max = 0;
};

// Throws pplab::Error when `samples` < 1, or as Simulate does.
StepTimeSamples SampleStepTime(const Schedule& schedule, const CostModel& costs, int samples, std::uint64_t seed);

// Whether two plans' step times are a tie: their sampled [p10, p90]
// intervals overlap (touching counts), so that neither plan's typical step
// (80 % of its samples) is clear of the other's. Symmetric. With the same
// seed for both (common random numbers), two plans of identical costs draw
// identical samples and always tie. docs/planning.md says why this rule.
bool StepTimesTie(const StepTimeSamples& a, const StepTimeSamples& b);

}  // namespace pplab
