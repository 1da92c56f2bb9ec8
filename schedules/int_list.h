// Comma-separated lists of non-negative integers ("3,2,2,1"), as the flags
// and files that list stages or layers per stage write them.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace pplab {

// The numbers of `text`: items of 1 to 9 decimal digits between commas,
// every item present. None for anything else ("", "2,2,", "2,,2", "+2",
// " 2", "1234567890"): the caller words its own refusal.
std::optional<std::vector<int>> ParseIntList(const std::string& text);

}  // namespace pplab
