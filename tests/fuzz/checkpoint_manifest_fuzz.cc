// Fuzzes the checkpoint manifest reader (manifest.json of a step directory)
// and its field checks.
#include <cstddef>
#include <cstdint>
#include <string>

#include "runtime/train/manifest.h"
#include "schedules/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const nlohmann::json m = pplab::ParseManifest(text, "manifest.json");
    (void)pplab::IdentityFields(m);
  } catch (const pplab::Error&) {
  }
  return 0;
}
