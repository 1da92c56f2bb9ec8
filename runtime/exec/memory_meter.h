// MemoryMeter: live bytes of tensor storage on one device, for measuring what
// a stage's activations really hold.
//
// On the CPU:
// Installing the meter replaces LibTorch's CPU allocator (c10::SetCPUAllocator)
// with a counting wrapper around the default one. Only storage allocated
// after the installation is counted: Live() is the bytes allocated through
// the meter and not yet freed; Peak() the largest Live() since the last
// ResetPeak(). Both are exact (no sampling) and thread-safe (intra-op threads
// and the autograd engine allocate too).
//
// The CPU allocator is one per process, so the meter is too: Cpu() installs
// it on first use and returns the same meter afterwards. Installation is
// cheap; each allocation then costs two atomic operations.
//
// On a GPU: the CUDA caching allocator's own statistics of the device
// (allocated bytes, current and peak), which count every tensor of the
// process on that device; ResetPeak() resets the allocator's peak. Bytes the
// allocator caches but no tensor uses are not counted, as on the CPU.
#pragma once

#include "schedules/units.h"

namespace c10 {
struct Device;
}

namespace pplab {

class MemoryMeter {
 public:
  virtual ~MemoryMeter() = default;
  // The process's CPU meter, installed on the first call. Throws pplab::Error
  // if LibTorch refuses the allocator.
  static MemoryMeter& Cpu();
  // The meter of `device`: Cpu() for the CPU, the caching allocator's
  // statistics for a CUDA device (CUDA builds; pplab::Error otherwise).
  static MemoryMeter& For(const c10::Device& device);

  virtual Bytes Live() const = 0;
  virtual Bytes Peak() const = 0;
  // Peak = Live() from now on.
  virtual void ResetPeak() = 0;

  MemoryMeter(const MemoryMeter&) = delete;
  MemoryMeter& operator=(const MemoryMeter&) = delete;

 protected:
  MemoryMeter() = default;
};

}  // namespace pplab
