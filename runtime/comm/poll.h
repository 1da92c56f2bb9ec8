// A bounded wait by polling: for waits whose blocking form has no timeout
// (a CUDA event, a copy to the host after an NCCL operation), so that a
// message that never comes ends in an error instead of a hang. Torch-free.
#pragma once

#include <algorithm>
#include <chrono>
#include <thread>

namespace pplab {

// Calls `ready()` until it returns true (then returns true) or `timeout` has
// passed (then returns false; `ready` is always asked at least once). It
// spins for the first 2 ms, as the awaited work is usually microseconds away,
// then sleeps between looks, backing off to at most 1 ms.
template <typename Ready>
bool PollUntil(Ready&& ready, std::chrono::milliseconds timeout) {
  const auto start = std::chrono::steady_clock::now();
  auto pause = std::chrono::microseconds(0);
  while (!ready()) {
    const auto waited = std::chrono::steady_clock::now() - start;
    if (waited > timeout) return false;
    if (waited > std::chrono::milliseconds(2)) {
      pause = std::min(pause + std::chrono::microseconds(50), std::chrono::microseconds(1000));
      std::this_thread::sleep_for(pause);
    }
  }
  return true;
}

}  // namespace pplab
