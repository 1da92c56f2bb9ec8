// StepClock: when each action of a step ran, on the device that ran it.
//
// The executor calls Mark() on its host thread before and after each action.
// A host clock reads the steady clock there. A CUDA clock records an event on
// the current stream instead, so a mark is when the GPU reaches that point of
// the stream, not when the host launched the work; the events are resolved
// once, after the step (Resolve), so timing adds no synchronisation inside it.
#pragma once

#include <c10/core/Device.h>

#include <chrono>
#include <memory>
#include <vector>

#include "schedules/units.h"

namespace pplab {

class StepClock {
 public:
  virtual ~StepClock() = default;
  // Starts a step whose time 0 is `origin` (a host time shared by the ranks).
  // Marks of an earlier step are forgotten.
  virtual void BeginStep(std::chrono::steady_clock::time_point origin) = 0;
  // Takes a mark now; returns its index within the step (0, 1, 2, ...).
  virtual int Mark() = 0;
  // Every mark of the step, in ns since `origin`. A CUDA clock waits here for
  // the device to pass the last mark, at most `timeout`; past it, it throws
  // pplab::Error. On a GPU this is where a rank waits for its step's messages
  // (NCCL waits only order streams), so it is the bound on a peer that never
  // sends or receives.
  virtual std::vector<TimeNs> Resolve(std::chrono::milliseconds timeout) = 0;
  // After a Resolve that timed out: the index of the step's first mark the
  // device has not reached, where a rank's GPU is stuck. -1 when every mark
  // is reached or the clock cannot tell (the host clock: its marks are
  // taken when reached).
  virtual int FirstUnfinishedMark() const { return -1; }
  // The host's steady clock at each mark of the step, in ns since `origin`:
  // when the host issued that point of the work. On the host clock these are
  // the marks themselves; on a GPU, a mark's device time minus its host time
  // is how far the device trails the host there (0: it waits for the host).
  virtual std::vector<TimeNs> HostMarks() const = 0;
  // "host" or "cuda-events".
  virtual const char* Name() const = 0;
};

// The host's steady clock.
class HostClock final : public StepClock {
 public:
  void BeginStep(std::chrono::steady_clock::time_point origin) override;
  int Mark() override;
  std::vector<TimeNs> Resolve(std::chrono::milliseconds timeout) override;
  std::vector<TimeNs> HostMarks() const override { return marks_; }
  const char* Name() const override { return "host"; }

 private:
  std::chrono::steady_clock::time_point origin_;
  std::vector<TimeNs> marks_;
};

// The clock for stages on `device`: CUDA events on a CUDA device (a CUDA
// build only; pplab::Error otherwise), the host clock elsewhere. A CUDA
// clock's BeginStep waits at most `timeout` for the work queued before the
// step, then throws pplab::Error.
std::unique_ptr<StepClock> MakeStepClock(const c10::Device& device, std::chrono::milliseconds timeout);

}  // namespace pplab
