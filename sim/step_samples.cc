#include "sim/step_samples.h"

#include <algorithm>
#include <random>
#include <vector>

#include "schedules/error.h"
#include "schedules/lowering.h"
#include "sim/simulator.h"

namespace pplab {

StepTimeSamples SampleStepTime(const Schedule& schedule, const CostModel& costs, int samples, std::uint64_t seed) {
  if (samples < 1) throw Error("simulate '" + schedule.name + "': --samples must be at least 1");
  const Schedule lowered = !schedule.HasComm() && schedule.ranks > 1 ? Lower(schedule) : schedule;
  std::mt19937_64 rng(seed);
  std::vector<TimeNs> makespans;
  for (int i = 0; i < samples; ++i) makespans.push_back(Simulate(lowered, costs, &rng).makespan);
  std::sort(makespans.begin(), makespans.end());
  // Nearest rank: the ceil(q n)-th smallest, in integers so that no
  // rounding moves it.
  auto rank = [&](long percent) { return makespans[(percent * samples + 99) / 100 - 1]; };
  return {samples, seed, rank(50), rank(99), makespans.front(), makespans.back()};
}

}  // namespace pplab
