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
  StepTimeSamples out;
  out.samples = samples;
  out.seed = seed;
  out.p10 = rank(10);
  out.p50 = rank(50);
  out.p90 = rank(90);
  out.p99 = rank(99);
  out.min = makespans.front();
  out.max = makespans.back();
  return out;
}

bool StepTimesTie(const StepTimeSamples& a, const StepTimeSamples& b) { return a.p10 <= b.p90 && b.p10 <= a.p90; }

}  // namespace pplab
