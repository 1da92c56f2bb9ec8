#include "tools/local_capacity.h"

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>

#include "schedules/error.h"
#include "sim/precision.h"

namespace pplab::cli {
namespace {

constexpr double kLibTorchBytes = 300e6;  // one process's LibTorch, measured on the CPU

std::string Megabytes(double bytes) { return std::to_string(static_cast<int64_t>(bytes / 1e6)) + " MB"; }

double MemAvailable() {
  double available = 0;
  if (FILE* f = std::fopen("/proc/meminfo", "r")) {
    char key[64];
    double kb = 0;
    while (std::fscanf(f, "%63s %lf kB", key, &kb) == 2) {
      if (std::string(key) == "MemAvailable:") available = kb * 1024;
    }
    std::fclose(f);
  }
  return available;
}

}  // namespace

double HostBytesNeeded(const LocalLoad& load) {
  return (load.state_on_host ? load.params * kStateBytesPerParameter : 0) + load.processes * kLibTorchBytes;
}

std::string WhyNotLocal(const LocalLoad& load, long cores, double available, const std::string& override_flag) {
  const std::string n = std::to_string(load.processes) + " local worker process" + (load.processes == 1 ? "" : "es");
  if (load.processes > 4 * std::max(1L, cores)) {
    return n + " on " + std::to_string(cores) +
           " cores (at most 4 per core): use fewer ranks, start them on several nodes (torchrun), or pass " +
           override_flag;
  }
  const double need = HostBytesNeeded(load);
  if (available > 0 && need > available) {
    return n + (load.processes == 1 ? " needs" : " need") + " about " + Megabytes(need) +
           (load.state_on_host ? " (model state and LibTorch)" : " (LibTorch)") + ", this machine has " +
           Megabytes(available) + " available: use fewer ranks or a smaller model, or pass " + override_flag;
  }
  return "";
}

void CheckLocalCapacity(const LocalLoad& load, const std::string& override_flag) {
  const std::string why = WhyNotLocal(load, ::sysconf(_SC_NPROCESSORS_ONLN), MemAvailable(), override_flag);
  if (!why.empty()) throw Error(why);
}

}  // namespace pplab::cli
