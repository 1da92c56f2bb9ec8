// Runs the pplab binary under test as a user would, for CLI tests.
#pragma once

#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <string>

namespace pplab {

struct PplabRun {
  int code;         // exit code; 128 when killed by a signal
  std::string out;  // stdout and stderr together
};

// Runs `pplab args` through the shell, after `shell_prefix` (e.g. "ulimit
// -f 64; " to limit file sizes).
inline PplabRun Pplab(const std::string& args, const std::string& shell_prefix = "") {
  FILE* pipe = popen((shell_prefix + std::string(PPLAB_BINARY) + " " + args + " 2>&1").c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128, out};
}

}  // namespace pplab
