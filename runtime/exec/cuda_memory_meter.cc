// The GPU MemoryMeter (compiled only in CUDA builds): the CUDA caching
// allocator's statistics of one device, aggregated over its pools.
#include <c10/core/Device.h>
#include <c10/cuda/CUDACachingAllocator.h>

#include <map>
#include <memory>
#include <mutex>

#include "runtime/exec/memory_meter.h"
#include "schedules/error.h"

namespace pplab {
namespace {

class CudaMeter final : public MemoryMeter {
 public:
  explicit CudaMeter(c10::DeviceIndex index) : index_(index) {}
  Bytes Live() const override {
    return static_cast<Bytes>(c10::cuda::CUDACachingAllocator::getDeviceStats(index_).allocated_bytes[0].current);
  }
  Bytes Peak() const override {
    return static_cast<Bytes>(c10::cuda::CUDACachingAllocator::getDeviceStats(index_).allocated_bytes[0].peak);
  }
  void ResetPeak() override { c10::cuda::CUDACachingAllocator::resetPeakStats(index_); }

 private:
  c10::DeviceIndex index_;
};

}  // namespace

MemoryMeter& CudaMemoryMeter(const c10::Device& device) {
  if (!device.has_index()) throw Error("memory meter: CUDA device without an index");
  static std::mutex mu;
  static std::map<c10::DeviceIndex, std::unique_ptr<CudaMeter>> meters;
  std::lock_guard<std::mutex> lock(mu);
  auto& meter = meters[device.index()];
  if (meter == nullptr) meter = std::make_unique<CudaMeter>(device.index());
  return *meter;
}

}  // namespace pplab
