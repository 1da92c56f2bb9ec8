// Fuzzes the schedule JSON reader, then validates what it accepts, as
// `pplab validate FILE.json` would.
#include <cstddef>
#include <cstdint>
#include <string>

#include "schedules/error.h"
#include "schedules/schedule_io.h"
#include "schedules/validate.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const pplab::Schedule s = pplab::ScheduleFromJson(text, "fuzz.json");
    if (pplab::ShapeProblems(s).empty()) pplab::Validate(s);
  } catch (const pplab::Error&) {
    // Refused with a message: what bad input should get.
  }
  return 0;
}
