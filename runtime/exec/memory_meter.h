// MemoryMeter: live bytes of CPU tensor storage, for measuring what a stage's
// activations really hold.
//
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
#pragma once

#include "schedules/units.h"

namespace pplab {

class MemoryMeter {
 public:
  // The process's CPU meter, installed on the first call. Throws pplab::Error
  // if LibTorch refuses the allocator.
  static MemoryMeter& Cpu();

  Bytes Live() const;
  Bytes Peak() const;
  // Peak = Live() from now on.
  void ResetPeak();

  MemoryMeter(const MemoryMeter&) = delete;
  MemoryMeter& operator=(const MemoryMeter&) = delete;

 private:
  MemoryMeter() = default;
};

}  // namespace pplab
