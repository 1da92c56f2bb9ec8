#include "runtime/exec/memory_meter.h"

#include <c10/core/CPUAllocator.h>
#include <c10/core/Device.h>
#include <torch/version.h>

#include <atomic>
#include <cstring>
#include <mutex>

#include "schedules/error.h"

namespace pplab {
namespace {

// Each block carries its size in a header in front of the data. The header is
// as large as LibTorch's alignment (64 bytes) so the data stays aligned, and
// it lets the deleter be a plain function of the data pointer, which keeps
// the raw_allocate/raw_deallocate interface working (some kernels use it).
constexpr size_t kHeader = 64;

// The allocator hook is process-wide, so is its state: the wrapped
// allocator and the counters.
c10::Allocator* g_inner = nullptr;
c10::DeleterFnPtr g_inner_delete = nullptr;
std::atomic<Bytes> g_live{0};
std::atomic<Bytes> g_peak{0};

void Count(Bytes delta) {
  const Bytes now = g_live.fetch_add(delta, std::memory_order_relaxed) + delta;
  Bytes peak = g_peak.load(std::memory_order_relaxed);
  while (now > peak && !g_peak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}

void CountingDelete(void* data) {
  if (data == nullptr) return;
  char* base = static_cast<char*>(data) - kHeader;
  Bytes n = 0;
  std::memcpy(&n, base, sizeof n);
  Count(-n);
  g_inner_delete(base);
}

// LibTorch 2.3 made allocate() non-const and added copy_data().
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
#define PPLAB_ALLOCATE_CONST
#define PPLAB_ALLOCATOR_COPY_DATA 1
#else
#define PPLAB_ALLOCATE_CONST const
#define PPLAB_ALLOCATOR_COPY_DATA 0
#endif

struct CountingAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t n) PPLAB_ALLOCATE_CONST override {
    char* base = static_cast<char*>(g_inner->raw_allocate(n + kHeader));
    const Bytes bytes = static_cast<Bytes>(n);
    std::memcpy(base, &bytes, sizeof bytes);
    Count(bytes);
    void* data = base + kHeader;
    return {data, data, &CountingDelete, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &CountingDelete; }
#if PPLAB_ALLOCATOR_COPY_DATA
  void copy_data(void* dest, const void* src, std::size_t count) const override { std::memcpy(dest, src, count); }
#endif
};

CountingAllocator g_counting;

class CpuMeter final : public MemoryMeter {
 public:
  Bytes Live() const override { return g_live.load(std::memory_order_relaxed); }
  Bytes Peak() const override { return g_peak.load(std::memory_order_relaxed); }
  void ResetPeak() override { g_peak.store(g_live.load(std::memory_order_relaxed), std::memory_order_relaxed); }
};

}  // namespace

#ifdef PPLAB_WITH_CUDA
MemoryMeter& CudaMemoryMeter(const c10::Device& device);  // cuda_memory_meter.cc
#endif

MemoryMeter& MemoryMeter::For(const c10::Device& device) {
  if (device.is_cpu()) return Cpu();
#ifdef PPLAB_WITH_CUDA
  if (device.is_cuda()) return CudaMemoryMeter(device);
#endif
  throw Error("memory meter: no meter for device " + device.str() + " in this build");
}

MemoryMeter& MemoryMeter::Cpu() {
  static std::once_flag installed;
  std::call_once(installed, [] {
    c10::Allocator* current = c10::GetCPUAllocator();
    if (current == nullptr || current->raw_deleter() == nullptr) {
      throw Error("memory meter: the CPU allocator has no raw interface to wrap");
    }
    g_inner = current;
    g_inner_delete = current->raw_deleter();
    c10::SetCPUAllocator(&g_counting, /*priority=*/100);
    if (c10::GetCPUAllocator() != &g_counting) throw Error("memory meter: LibTorch kept its own CPU allocator");
  });
  static CpuMeter meter;
  return meter;
}

}  // namespace pplab
