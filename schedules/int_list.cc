#include "schedules/int_list.h"

#include <algorithm>

namespace pplab {

std::optional<std::vector<int>> ParseIntList(const std::string& text) {
  std::vector<int> out;
  size_t at = 0;
  while (at <= text.size()) {
    const size_t comma = std::min(text.find(',', at), text.size());
    const std::string item = text.substr(at, comma - at);
    if (item.empty() || item.size() > 9 || item.find_first_not_of("0123456789") != std::string::npos) {
      return std::nullopt;
    }
    out.push_back(std::stoi(item));
    at = comma + 1;
  }
  return out;
}

}  // namespace pplab
