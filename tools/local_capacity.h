// What this machine can hold: `pplab train` and `pplab profile` check it
// once, before any worker starts, so that a model too large for the host
// gets one line instead of the kernel's out-of-memory killer.
#pragma once

#include <string>

namespace pplab::cli {

struct LocalLoad {
  int processes = 1;          // worker processes on this machine
  double params = 0;          // parameters they hold together (every replica and model copy)
  bool state_on_host = true;  // the model state is in host memory (a CPU device), not on GPUs
};

// Host bytes `load` needs: 16 a parameter when its state is on the host
// (fp32 weights and gradients, AdamW's two moments), plus about 300 MB of
// LibTorch per process.
double HostBytesNeeded(const LocalLoad& load);

// Why `load` cannot run on `cores` cores with `available` bytes of memory
// available, "" when it can: at most 4 processes a core, and
// HostBytesNeeded within `available` (not checked when `available` <= 0,
// i.e. unknown). The reason ends with how to proceed, `override_flag`
// among it.
std::string WhyNotLocal(const LocalLoad& load, long cores, double available, const std::string& override_flag);

// WhyNotLocal on this machine (its online cores and /proc/meminfo's
// MemAvailable); throws pplab::Error with the reason.
void CheckLocalCapacity(const LocalLoad& load, const std::string& override_flag);

}  // namespace pplab::cli
