// The counting CPU allocator: exact live and peak bytes of tensor storage.
#include "runtime/exec/memory_meter.h"

#include <c10/core/CPUAllocator.h>
#include <torch/torch.h>

#include <catch2/catch.hpp>

namespace pplab::memory_meter_test {

TEST_CASE("the memory meter counts a tensor's bytes exactly while it lives", "[memory]") {
  MemoryMeter& meter = MemoryMeter::Cpu();
  const Bytes before = meter.Live();
  meter.ResetPeak();
  {
    at::Tensor t = torch::empty({1000}, torch::kFloat32);  // 4000 bytes
    CHECK(meter.Live() - before == 4000);
    at::Tensor u = torch::empty({10, 10}, torch::kFloat64);  // 800 bytes more
    CHECK(meter.Live() - before == 4800);
  }
  CHECK(meter.Live() == before);
  CHECK(meter.Peak() - before == 4800);
  meter.ResetPeak();
  CHECK(meter.Peak() == meter.Live());
  // The raw interface (used by some kernels) goes through the meter too.
  void* p = c10::GetCPUAllocator()->raw_allocate(123);
  CHECK(meter.Live() - before == 123);
  c10::GetCPUAllocator()->raw_deallocate(p);
  CHECK(meter.Live() == before);
  // Installing twice is the same meter.
  CHECK(&MemoryMeter::Cpu() == &meter);
}

}  // namespace pplab::memory_meter_test
