// Fuzzes the PyTorch pipelining CSV reader, then validates what it accepts,
// as `pplab validate FILE.csv` would.
#include <cstddef>
#include <cstdint>
#include <string>

#include "schedules/error.h"
#include "schedules/schedule_io.h"
#include "schedules/validate.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const pplab::Schedule s = pplab::ScheduleFromPytorchCsv(text, "fuzz.csv", "fuzz");
    if (pplab::ShapeProblems(s).empty()) pplab::Validate(s);
  } catch (const pplab::Error&) {
  }
  return 0;
}
