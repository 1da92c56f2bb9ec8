// Fuzzes the cost-model JSON reader (`--cost FILE`) and its checks.
#include <cstddef>
#include <cstdint>
#include <string>

#include "schedules/error.h"
#include "sim/cost_model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const pplab::CostModel m = pplab::CostModel::FromJson(text, "fuzz.json");
    m.CheckStages(m.NumStages(), "fuzz");
    (void)m.Profile();
    (void)m.ToJson();
  } catch (const pplab::Error&) {
  }
  return 0;
}
