#include "schedules/one_line.h"

#include <algorithm>

namespace pplab {

std::string OneLineError(const std::string& what) {
  std::string line = what.substr(0, what.find("\nException raised from "));
  line = line.substr(0, line.find("\nframe #"));
  std::replace(line.begin(), line.end(), '\n', ' ');
  while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.pop_back();
  return line;
}

std::string ControlEscaped(const std::string& text) {
  static const char* kHex = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  for (unsigned char c : text) {
    if (c < 0x20 || c == 0x7f) {
      out += std::string("\\x") + kHex[c >> 4] + kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

}  // namespace pplab
