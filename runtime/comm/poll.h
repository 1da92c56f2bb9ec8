// A bounded wait by polling: for waits whose blocking form has no timeout
// (a CUDA event, a copy to the host after an NCCL operation), so that a
// message that never comes ends in an error instead of a hang. Torch-free.
#pragma once

#include <sys/prctl.h>

#include <algorithm>
#include <chrono>
#include <thread>

namespace pplab {

// How long PollUntil spins before it sleeps between looks, how much each
// sleep grows, and the longest one.
constexpr std::chrono::microseconds kPollSpin{2000};
constexpr std::chrono::microseconds kPollPauseStep{10};
constexpr std::chrono::microseconds kPollPauseMax{100};

// The sleep before the next look, after `waited` in all and a last sleep of
// `pause`: none while spinning, then growing by kPollPauseStep up to
// kPollPauseMax. The cap is small because a GPU step ends in such a wait,
// and the GPU idles from the moment the awaited work ends until the host
// looks again and queues the next. A cap of 1 ms (before) loses half a
// millisecond a wait on average, by arithmetic about 3 % of the 18 ms step
// of the bench's K=1 small row on an H100; not measured on a GPU. At
// 100 us the looks cost a few microseconds of a core each.
constexpr std::chrono::microseconds NextPollPause(std::chrono::nanoseconds waited, std::chrono::microseconds pause) {
  if (waited <= kPollSpin) return std::chrono::microseconds(0);
  return std::min(pause + kPollPauseStep, kPollPauseMax);
}

// Calls `ready()` until it returns true (then returns true) or `timeout` has
// passed (then returns false; `ready` is always asked at least once). It
// spins for the first kPollSpin, as the awaited work is usually microseconds
// away, then sleeps between looks as NextPollPause says.
template <typename Ready>
bool PollUntil(Ready&& ready, std::chrono::milliseconds timeout) {
  const auto start = std::chrono::steady_clock::now();
  auto pause = std::chrono::microseconds(0);
  while (!ready()) {
    const auto waited = std::chrono::steady_clock::now() - start;
    if (waited > timeout) return false;
    pause = NextPollPause(waited, pause);
    if (pause.count() > 0) std::this_thread::sleep_for(pause);
  }
  return true;
}

// Makes this thread's sleeps end within about 1 us of when they are due.
// Linux lets a thread's sleep run late by its timer slack, 50 us by default,
// so PollUntil's 10 us pauses would last about 60 us and its 100 us ones
// about 150 us, each of them GPU idle time at the end of a wait. A worker
// calls this once on the thread that polls (SetUpWorker).
inline void UseFineTimerSlack() { ::prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL); }

}  // namespace pplab
