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

}  // namespace pplab
