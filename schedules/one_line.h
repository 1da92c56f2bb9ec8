// Error messages as the one line pplab prints for each.
#pragma once

#include <string>

namespace pplab {

// An exception's message as one line: LibTorch's (c10::Error) end in a
// backtrace ("Exception raised from ...", "frame #0: ..."), which is cut;
// other line breaks become spaces. Used by main() and by each worker's
// error line.
std::string OneLineError(const std::string& what);

}  // namespace pplab
