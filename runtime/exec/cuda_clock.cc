// The CUDA-event StepClock (compiled only in CUDA builds). Each mark is an
// event recorded on the current stream. Time 0 of the step is the host time
// `origin`; the first event, recorded in BeginStep, is placed at the host
// time the host saw it run, and every later mark at that plus the GPU time
// between the two events. BeginStep waits (bounded) for the work queued
// before the step (the last optimizer update, the gradients' zeroing, the
// batch's copies): taking the host time while that backlog ran would place
// every mark of the step earlier than it happened, by the backlog.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "runtime/comm/cuda_event.h"
#include "runtime/comm/device_wait.h"
#include "runtime/exec/step_clock.h"
#include "schedules/error.h"

namespace pplab {
namespace {

class CudaClock final : public StepClock {
 public:
  CudaClock(const c10::Device& device, std::chrono::milliseconds timeout) : device_(device), timeout_(timeout) {}

  void BeginStep(std::chrono::steady_clock::time_point origin) override {
    c10::cuda::CUDAGuard guard(device_);
    used_ = 0;
    origin_ = origin;
    host_marks_.clear();
    WaitForDevice(device_, timeout_, "the step clock, before the step");
    start_.record(at::cuda::getCurrentCUDAStream(device_.index()));
    // The host time is read once the host has seen the event run, spinning,
    // so the look is late by microseconds. On a GPU that another process
    // shares, the idle stream's event still runs only when this process's
    // time slice comes, up to a slice (about 2.5 ms on the H200,
    // docs/fidelity.md "Two ranks on one GPU") after the host recorded it;
    // read at the recording, every mark of this rank's step would be early
    // by that much against the other ranks'.
    // (A bound of its own: with the wait above, up to twice the timeout.)
    const auto deadline = std::chrono::steady_clock::now() + timeout_;
    while (!start_.query()) {
      if (std::chrono::steady_clock::now() > deadline) {
        char seconds[32];
        std::snprintf(seconds, sizeof seconds, "%g", static_cast<double>(timeout_.count()) / 1000.0);
        throw Error(std::string("the step clock, before the step: the GPU has not reached the step's first mark "
                                "after ") +
                    seconds + " s (--comm-timeout)");
      }
    }
    start_host_ns_ =
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - origin).count();
  }

  int Mark() override {
    c10::cuda::CUDAGuard guard(device_);
    // Events are reused from step to step: creating one per action would
    // cost a driver call each.
    if (used_ == events_.size()) events_.push_back(std::make_unique<CudaEvent>(cudaEventDefault));
    events_[used_]->record(at::cuda::getCurrentCUDAStream(device_.index()));
    host_marks_.push_back(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - origin_).count());
    return static_cast<int>(used_++);
  }

  std::vector<TimeNs> Resolve(std::chrono::milliseconds timeout) override {
    c10::cuda::CUDAGuard guard(device_);
    std::vector<TimeNs> out;
    out.reserve(used_);
    // The stream orders every mark before what is queued now. Polled rather
    // than synchronized, so that a step stuck behind a message that never
    // comes ends in an error instead of a hang.
    if (used_ > 0) WaitForDevice(device_, timeout, "the step's work");
    for (size_t i = 0; i < used_; ++i) {
      const double ms = start_.elapsed_time(*events_[i]);
      out.push_back(start_host_ns_ + static_cast<TimeNs>(ms * 1e6));
    }
    return out;
  }

  int FirstUnfinishedMark() const override {
    c10::cuda::CUDAGuard guard(device_);
    for (size_t i = 0; i < used_; ++i) {
      if (!events_[i]->query()) return static_cast<int>(i);
    }
    return -1;
  }

  std::vector<TimeNs> HostMarks() const override { return host_marks_; }

  const char* Name() const override { return "cuda-events"; }

 private:
  c10::Device device_;
  std::chrono::milliseconds timeout_;
  CudaEvent start_{cudaEventDefault};
  TimeNs start_host_ns_ = 0;
  std::chrono::steady_clock::time_point origin_;
  std::vector<TimeNs> host_marks_;  // when the host recorded each event
  std::vector<std::unique_ptr<CudaEvent>> events_;
  size_t used_ = 0;
};

}  // namespace

std::unique_ptr<StepClock> MakeCudaClock(const c10::Device& device, std::chrono::milliseconds timeout) {
  if (!device.has_index()) throw Error("step clock: CUDA device without an index");
  return std::make_unique<CudaClock>(device, timeout);
}

}  // namespace pplab
