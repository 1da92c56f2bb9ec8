#include "runtime/exec/host_watch.h"

#include <algorithm>
#include <cstdio>
#include <utility>

namespace pplab {

HostWatch::HostWatch(std::chrono::milliseconds bound, std::string bound_name, OnStuck on_stuck)
    : bound_(bound), bound_name_(std::move(bound_name)), on_stuck_(std::move(on_stuck)), thread_([this] { Run(); }) {}

HostWatch::~HostWatch() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void HostWatch::SetStep(int step) {
  std::lock_guard<std::mutex> lock(mutex_);
  step_ = step;
}

void HostWatch::Enter(const Action& action) {
  std::lock_guard<std::mutex> lock(mutex_);
  inside_ = action;
  since_ = std::chrono::steady_clock::now();
}

void HostWatch::Leave() {
  std::lock_guard<std::mutex> lock(mutex_);
  inside_.reset();
}

void HostWatch::Run() {
  // Looks a few times per bound (at most once a second): the line comes at
  // most a quarter of the bound, or a second, after the bound has passed.
  const auto period = std::min<std::chrono::milliseconds>(
      std::chrono::milliseconds(1000), std::max<std::chrono::milliseconds>(bound_ / 4, std::chrono::milliseconds(1)));
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_ && !reported_) {
    wake_.wait_for(lock, period);
    if (stopping_ || !inside_) continue;
    const auto inside_for = std::chrono::steady_clock::now() - since_;
    if (inside_for <= bound_) continue;
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%.0f", std::chrono::duration<double>(inside_for).count());
    const std::string line = "the host has been inside " + FormatAction(*inside_) + " of step " +
                             std::to_string(step_) + " for " + seconds + " s, more than " + bound_name_ +
                             ": a CUDA call there is blocked, most likely behind a posted NCCL operation whose peer "
                             "never came";
    reported_ = true;
    lock.unlock();
    on_stuck_(line);
    lock.lock();
  }
}

}  // namespace pplab
