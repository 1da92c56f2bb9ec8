// Error messages as the one line pplab prints for each.
#pragma once

#include <string>

namespace pplab {

// An exception's message as one line: LibTorch's (c10::Error) end in a
// backtrace ("Exception raised from ...", "frame #0: ..."), which is cut;
// other line breaks become spaces. Used by main() and by each worker's
// error line.
std::string OneLineError(const std::string& what);

// `text` with its control bytes (below 0x20, and 0x7f) written as \xNN and
// every other byte as it is (UTF-8 text stays readable): a name the user
// gave, printed in an error, holding a line break or a terminal escape,
// split the one line or drove the terminal.
std::string ControlEscaped(const std::string& text);

}  // namespace pplab
