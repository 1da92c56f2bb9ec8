// Fuzzes the safetensors reader (`train --init-from FILE`): the bytes as a
// file, its header read and each tensor pplab can widen read back.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "models/safetensors.h"
#include "schedules/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The input goes to a file in $TMPDIR (run.sh points it at a folder it
  // removes afterwards), one per process.
  static const std::string path = [] {
    const char* dir = std::getenv("TMPDIR");
    return std::string(dir != nullptr && *dir != '\0' ? dir : "/tmp") + "/pplab-fuzz-" + std::to_string(getpid()) +
           ".safetensors";
  }();
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  try {
    for (const auto& [name, t] : pplab::ReadSafetensorsHeader(path)) {
      if (t.Elements() > (1 << 16)) continue;
      std::vector<float> out(static_cast<size_t>(t.Elements()));
      try {
        pplab::ReadAsFloat32(name, t, out.data());
      } catch (const pplab::Error&) {
      }
    }
  } catch (const pplab::Error&) {
  }
  return 0;
}
