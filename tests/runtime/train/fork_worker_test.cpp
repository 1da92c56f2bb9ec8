// A forked worker runs the given arguments in exactly the given environment,
// keeps the descriptors an exec'd worker keeps and closes the others; a
// process with more threads than it started with does not fork.
#include "runtime/train/fork_worker.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <future>
#include <string>
#include <thread>
#include <vector>

namespace pplab::fork_worker_test {
namespace {

// Where the stand-in worker writes what it saw.
std::string ReportPath() { return std::string(PPLAB_TEST_TMP_DIR) + "/fork_worker_report.txt"; }

bool IsOpen(const char* fd_text) { return fd_text != nullptr && ::fcntl(std::atoi(fd_text), F_GETFD) != -1; }

// The stand-in for main(): writes its arguments, parent, environment size,
// one variable, and which of two descriptors it has, then exits 7.
int StandInMain(int argc, char** argv) {
  std::ofstream out(ReportPath());
  for (int i = 0; i < argc; ++i) out << argv[i] << (i + 1 < argc ? " " : "\n");
  int entries = 0;
  for (char** e = environ; *e != nullptr; ++e) ++entries;
  const char* x = std::getenv("PPLAB_FORK_TEST");
  out << ::getppid() << "\n" << entries << "\n" << (x != nullptr ? x : "(unset)") << "\n";
  out << (IsOpen(std::getenv("PPLAB_FORK_TEST_KEPT")) ? "open" : "closed") << "\n";
  out << (IsOpen(std::getenv("PPLAB_FORK_TEST_CLOSED")) ? "open" : "closed") << "\n";
  return 7;
}

// waitpid bounded at 60 s: the exit code, or -1.
int WaitExitCode(pid_t pid) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  int status = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    const pid_t got = ::waitpid(pid, &status, WNOHANG);
    if (got == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (got < 0) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::kill(pid, SIGKILL);
  return -1;
}

}  // namespace

TEST_CASE("a forked worker runs its arguments in its environment alone, with the descriptors exec keeps",
          "[launcher]") {
  NoteProcessStart(StandInMain);
  std::remove(ReportPath().c_str());
  int kept[2], closed[2];
  REQUIRE(::pipe(kept) == 0);
  REQUIRE(::pipe2(closed, O_CLOEXEC) == 0);
  std::string why;
  const pid_t pid = ForkWorker({"worker", "train", "-k", "2"},
                               {"PPLAB_FORK_TEST=given", "PPLAB_FORK_TEST_KEPT=" + std::to_string(kept[1]),
                                "PPLAB_FORK_TEST_CLOSED=" + std::to_string(closed[1])},
                               &why);
  INFO(why);
  REQUIRE(pid > 0);
  CHECK(WaitExitCode(pid) == 7);
  for (int fd : {kept[0], kept[1], closed[0], closed[1]}) ::close(fd);
  std::ifstream in(ReportPath());
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  REQUIRE(lines.size() == 6);
  CHECK(lines[0] == "worker train -k 2");
  CHECK(lines[1] == std::to_string(::getpid()));
  CHECK(lines[2] == "3");  // nothing of this process's environment came along
  CHECK(lines[3] == "given");
  CHECK(lines[4] == "open");
  CHECK(lines[5] == "closed");
}

TEST_CASE("a process with more threads than it started with, or PPLAB_FORK_WORKERS=0, does not fork workers",
          "[launcher]") {
  NoteProcessStart(StandInMain);
  std::string why;
  CHECK(CanForkWorker(&why));
  {
    std::promise<void> release;
    std::thread extra([done = release.get_future()] { done.wait(); });  // one thread more, until released
    CHECK_FALSE(CanForkWorker(&why));
    CHECK_THAT(why, Catch::Contains("more than the"));
    CHECK(ForkWorker({"worker"}, {}, &why) == -1);
    release.set_value();
    extra.join();
  }
  ::setenv("PPLAB_FORK_WORKERS", "0", 1);
  CHECK_FALSE(CanForkWorker(&why));
  CHECK(why == "PPLAB_FORK_WORKERS=0");
  ::unsetenv("PPLAB_FORK_WORKERS");
  CHECK(CanForkWorker(&why));
}

}  // namespace pplab::fork_worker_test
