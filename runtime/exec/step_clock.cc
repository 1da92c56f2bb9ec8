#include "runtime/exec/step_clock.h"

#include "schedules/error.h"

namespace pplab {

void HostClock::BeginStep(std::chrono::steady_clock::time_point origin) {
  origin_ = origin;
  marks_.clear();
}

int HostClock::Mark() {
  marks_.push_back(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - origin_).count());
  return static_cast<int>(marks_.size()) - 1;
}

std::vector<TimeNs> HostClock::Resolve(std::chrono::milliseconds) { return marks_; }

#ifdef PPLAB_WITH_CUDA
std::unique_ptr<StepClock> MakeCudaClock(const c10::Device& device,
                                         std::chrono::milliseconds timeout);  // cuda_clock.cc
#endif

std::unique_ptr<StepClock> MakeStepClock(const c10::Device& device, std::chrono::milliseconds timeout) {
  if (!device.is_cuda()) return std::make_unique<HostClock>();
#ifdef PPLAB_WITH_CUDA
  return MakeCudaClock(device, timeout);
#else
  (void)timeout;
  throw Error("step clock: device " + device.str() + " needs a CUDA build of pplab");
#endif
}

}  // namespace pplab
