// How the profile times its work (runtime/train/profile.cc and
// profile_steps.cc): one region on the step clock, an action's time with
// its share of the cores, medians, barriers before a collective or a turn,
// and the spread of repeated runs.
#pragma once

#include <ATen/Parallel.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "runtime/comm/collectives.h"
#include "runtime/exec/step_clock.h"
#include "runtime/train/profile.h"
#include "schedules/error.h"
#include "sim/percentiles.h"

namespace pplab::profile_detail {

using Clock = std::chrono::steady_clock;

// The time `body` takes on `clock`: the host clock on the CPU; CUDA events
// on a GPU, so the time is the GPU's work, not its launch.
template <typename F>
double TimeMs(StepClock& clock, std::chrono::milliseconds timeout, F body) {
  clock.BeginStep(Clock::now());
  const int begin = clock.Mark();
  body();
  const int end = clock.Mark();
  const std::vector<TimeNs> marks = clock.Resolve(timeout);
  return NsToMs(marks[end] - marks[begin]);
}

// The CPU time of every thread of this process so far, ms.
inline double ProcessCpuMs() {
  timespec t{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) / 1e6;
}

// One timed action's time, ms, and on a CPU device the share of the rank's
// cores it kept busy (StageProfile::cpu_share).
struct Timed {
  double ms = 0;
  double cpu_share = -1;
};
template <typename F>
Timed TimeAction(StepClock& clock, const ProfileOptions& options, F body) {
  const double cpu_before = ProcessCpuMs();
  Timed t;
  t.ms = TimeMs(clock, options.comm_timeout, body);
  if (options.device.is_cpu() && t.ms > 0) {
    const double cores = std::max(1, at::get_num_threads());
    t.cpu_share = std::min(1.0, (ProcessCpuMs() - cpu_before) / (t.ms * cores));
  }
  return t;
}

inline double Median(std::vector<double> xs) {
  if (xs.empty()) return 0;
  std::sort(xs.begin(), xs.end());
  const size_t n = xs.size();
  return n % 2 == 1 ? xs[n / 2] : (xs[n / 2 - 1] + xs[n / 2]) / 2;
}

inline Bytes MedianBytes(const std::vector<Bytes>& xs) {
  std::vector<double> d(xs.begin(), xs.end());
  return static_cast<Bytes>(Median(d));
}

// Every rank together, before a collective is timed: ranks leave within
// the poll's spin of each other, so the collective's time is its own.
inline void Sync(ProcessGroupHandle* group, std::chrono::milliseconds timeout) {
  if (group != nullptr) Barrier(*group, timeout);
}

// Every rank together, before one rank (or pair) times its work while the
// others wait: through the store, so that no waiting rank's barrier kernel
// spins on a GPU the ranks share (an NCCL barrier would, and the timed
// rank's kernels would share the GPU with it).
// A rank waits here while another rank's turn is timed, which lasts as long
// as its repeats take: past --comm-timeout the message says so (it read as
// a hung peer's "host barrier: Wait timeout").
inline void Turn(ProcessGroupHandle* group, std::chrono::milliseconds timeout) {
  if (group == nullptr) return;
  try {
    HostBarrier(*group, timeout);
  } catch (const Error& e) {
    throw Error(std::string(e.what()) + " (ranks that share a device past its slots are timed in turns, and a rank " +
                "waits for the others' whole turn: with many --repeats or slow stages give a larger " +
                "--comm-timeout)");
  }
}

// `warmup + repeats` runs of `body`, each after a barrier so that every rank
// starts it together (a collective's time is then its own, not the wait for
// a late peer); the spread of the timed runs.
template <typename F>
SampleSpread Repeat(StepClock& clock, ProcessGroupHandle* group, const ProfileOptions& options, F body) {
  std::vector<double> ms;
  for (int i = 0; i < options.warmup + options.repeats; ++i) {
    Sync(group, options.comm_timeout);
    const double t = TimeMs(clock, options.comm_timeout, body);
    if (i >= options.warmup) ms.push_back(t);
  }
  return SpreadOfSamples(ms);
}

}  // namespace pplab::profile_detail
