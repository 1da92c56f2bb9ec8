// Runs the pplab binary under test as a user would, for CLI tests.
#pragma once

#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <string>
#include <vector>

namespace pplab {

struct PplabRun {
  int code;         // exit code; 128 when killed by a signal
  std::string out;  // stdout and stderr together
};

// Runs `command` through the shell: its exit code and stdout + stderr.
inline PplabRun Shell(const std::string& command) {
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128, out};
}

// Runs `pplab args` through the shell, after `shell_prefix` (e.g. "ulimit
// -f 64; " to limit file sizes).
inline PplabRun Pplab(const std::string& args, const std::string& shell_prefix = "") {
  return Shell(shell_prefix + std::string(PPLAB_BINARY) + " " + args);
}

// Runs `PPLAB_BINARY args...` directly (no shell), output to /dev/null, and
// returns its peak resident set size in KiB (getrusage of that one child),
// or -1 when it did not exit with 0.
inline long PeakRssKib(const std::vector<std::string>& args) {
  std::vector<std::string> strings = {PPLAB_BINARY};
  strings.insert(strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& s : strings) argv.push_back(s.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  const int err = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  REQUIRE(err == 0);
  int status = 0;
  struct rusage usage {};
  REQUIRE(::wait4(pid, &status, 0, &usage) == pid);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? usage.ru_maxrss : -1;
}

// The flags of `pplab COMMAND` whose type its --help shows as `type`
// (CLI11: FLOAT for floating-point, UINT for unsigned integers), e.g.
// {"--f-time", "--b-time", ...} for FLOAT.
inline std::vector<std::string> TypedFlags(const std::string& command, const std::string& type) {
  const PplabRun help = Pplab(command + " --help");
  REQUIRE(help.code == 0);
  std::vector<std::string> flags;
  const std::string shown = " " + type;
  size_t pos = 0;
  while ((pos = help.out.find(shown, pos)) != std::string::npos) {
    const size_t line = help.out.rfind('\n', pos) + 1;
    const size_t dash = help.out.rfind("--", pos);
    if (dash != std::string::npos && dash >= line) {
      flags.push_back(help.out.substr(dash, help.out.find_first_of(" ,", dash) - dash));
    }
    pos += shown.size();
  }
  return flags;
}

inline std::vector<std::string> FloatFlags(const std::string& command) { return TypedFlags(command, "FLOAT"); }

}  // namespace pplab
