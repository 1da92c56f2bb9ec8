// The one error type thrown by pplab libraries.
//
// Library code never prints or exits: it throws pplab::Error with a message
// that names the file, field, flag or action at fault. Only main() catches,
// prints the message on one line and returns a non-zero exit code.
#pragma once

#include <stdexcept>
#include <string>

namespace pplab {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// A time or byte count past what pplab's int64 nanoseconds and bytes hold:
// an Error, which a search over candidates (plan) may catch to pass over
// the one candidate whose microbatches are too large, where the others
// still cost.
class OverflowError : public Error {
 public:
  explicit OverflowError(const std::string& what) : Error(what) {}
};

}  // namespace pplab
