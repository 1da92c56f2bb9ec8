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

}  // namespace pplab
