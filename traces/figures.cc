#include "traces/figures.h"

#include <charconv>
#include <cstdlib>
#include <system_error>

namespace pplab {

std::string Fixed(double value, int decimals) {
  char buf[128];
  const auto r = std::to_chars(buf, buf + sizeof buf, value, std::chars_format::fixed, decimals);
  return r.ec == std::errc() ? std::string(buf, r.ptr) : std::string("0");
}

std::string ByteCount(Bytes bytes, int decimals) {
  static const char* kUnits[] = {"kB", "MB", "GB", "TB"};
  if (std::llabs(bytes) < 1000) return std::to_string(bytes) + " B";
  double x = static_cast<double>(bytes) / 1e3;
  int u = 0;
  while (std::abs(x) >= 1000 && u < 3) {
    x /= 1e3;
    ++u;
  }
  return Fixed(x, decimals) + " " + kUnits[u];
}

}  // namespace pplab
