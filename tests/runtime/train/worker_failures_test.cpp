// The launcher's report of failed workers: which line comes first, who
// stopped after it, and the exit code, from rounds of pipe text and deaths.
#include "runtime/train/worker_failures.h"

#include <signal.h>
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <string>
#include <vector>

namespace pplab::worker_failures_test {
namespace {

WorkerExit Exited(int rank, int code) { return {rank, W_EXITCODE(code, 0), false}; }
// Killed by a signal: by the launcher at its deadline (late), or not by it.
WorkerExit Killed(int rank, bool by_launcher) { return {rank, W_EXITCODE(0, SIGKILL), by_launcher, by_launcher}; }
// Killed by the launcher at once: a peer died before the rendezvous.
WorkerExit StoppedAtOnce(int rank) { return {rank, W_EXITCODE(0, SIGKILL), true, false}; }

const std::string kLost = "rank 0: rank 0 waiting on 0RECV_B0 from rank 1: Connection reset by peer";

}  // namespace

TEST_CASE("workers that all exit 0 give no line and code 0", "[launcher]") {
  FailureLog log;
  log.Add("", {Exited(0, 0), Exited(1, 0)});
  CHECK_FALSE(log.AnyExitFailed());
  CHECK(log.ReportLines().empty());
  CHECK(log.ExitCode() == 0);
}

TEST_CASE("a rank's own line is reported whole, once, however the pipe splits it", "[launcher]") {
  FailureLog log;
  log.Add("rank 1: step 3: the loss", {});
  CHECK_FALSE(log.AnyExitFailed());
  log.Add(" is NaN\nrank 1: a second line of rank 1\n" + kLost + "\n", {Exited(1, 3), Exited(0, 2)});
  CHECK(log.AnyExitFailed());
  CHECK(log.ReportLines() == std::vector<std::string>{"pplab: error: rank 1: step 3: the loss is NaN",
                                                      "pplab: rank 0 stopped after rank 1 failed"});
  CHECK(log.ExitCode() == 3);  // the first failure's worker's code
}

TEST_CASE("a worker killed by a signal goes before the peer line that lost it, even reaped a round later",
          "[launcher]") {
  FailureLog log;
  log.Add(kLost + "\n", {Exited(0, 2)});
  log.Add("", {Killed(1, false)});
  CHECK(log.ReportLines() == std::vector<std::string>{"pplab: rank 1 was killed by signal Killed",
                                                      "pplab: rank 0 stopped after rank 1 failed"});
  CHECK(log.ExitCode() == 1);  // a signal gives 1
}

TEST_CASE("workers the launcher killed after a failure are named after it, as ranges, apart from those that stopped",
          "[launcher]") {
  FailureLog log;
  log.Add("rank 4: step 2: the loss is NaN\n", {Exited(4, 2)});
  // Rank 0's line does not name rank 4, and the launcher killed 1-3 and 5.
  log.Add("rank 0: " + std::string("rank 0 in all-reduce: Connection reset by peer\n"),
          {Exited(0, 2), Killed(1, true), Killed(2, true), Killed(3, true), Killed(5, true)});
  CHECK(log.ReportLines() ==
        std::vector<std::string>{"pplab: error: rank 4: step 2: the loss is NaN",
                                 "pplab: rank 0 stopped after rank 4 failed",
                                 "pplab: ranks 1-3, 5 did not exit after rank 4 failed; the launcher killed them"});
  CHECK(log.ExitCode() == 2);
}

TEST_CASE("workers the launcher stopped at once, a peer dead before the rendezvous, are named as stopped",
          "[launcher]") {
  FailureLog log;
  log.Add("", {Killed(1, false)});
  log.Add("", {StoppedAtOnce(0), StoppedAtOnce(2), StoppedAtOnce(3)});
  CHECK(log.ReportLines() == std::vector<std::string>{"pplab: rank 1 was killed by signal Killed",
                                                      "pplab: ranks 0, 2-3 stopped after rank 1 failed"});
}

TEST_CASE("a worker the launcher killed after its peers finished is the failure, said so", "[launcher]") {
  // Rank 0 ended well; rank 1 hung in its teardown until the deadline.
  FailureLog log;
  log.Add("", {Exited(0, 0)});
  CHECK_FALSE(log.AnyExitFailed());
  log.Add("", {Killed(1, true)});
  CHECK(log.ReportLines() == std::vector<std::string>{"pplab: rank 1 did not exit in time; the launcher killed it"});
  CHECK(log.ExitCode() == 1);
}

TEST_CASE("a death in the same round as a peer's line about it is read first", "[launcher]") {
  FailureLog log;
  log.Add(kLost + "\n", {Killed(1, false), Exited(0, 2)});
  CHECK(log.ReportLines().front() == "pplab: rank 1 was killed by signal Killed");
  // The same with a rank that exits with a code: no line of its own.
  FailureLog exited;
  exited.Add(kLost + "\n", {Exited(1, 7), Exited(0, 2)});
  CHECK(exited.ReportLines().front() == "pplab: rank 1 exited with code 7");
  CHECK(exited.ExitCode() == 7);
}

TEST_CASE("the launcher tells a line about a lost peer from a rank's own error", "[launcher]") {
  const std::string lost = "pplab: error: " + kLost;
  CHECK(NamesPeer(lost, 0, 1));
  CHECK_FALSE(NamesPeer(lost, 0, 2));
  CHECK_FALSE(NamesPeer(lost, 0, 0));  // its own rank is not a peer
  CHECK(NamesPeer("pplab: error: rank 3: connecting to rank 12 (up): timed out", 3, 12));
  CHECK_FALSE(NamesPeer("pplab: error: rank 3: connecting to rank 12 (up): timed out", 3, 1));
  CHECK_FALSE(NamesPeer("pplab: error: rank 1: step 3: the loss is NaN", 1, 0));
  // A collective's Gloo error names an address, not the rank it lost: any
  // peer's death explains it, unless it names another rank.
  const std::string reset =
      "pplab: error: rank 0: rank 0 in all-reduce: [./gloo/transport/tcp/pair.cc:589] Read error "
      "[127.0.0.1]:51593: Connection reset by peer";
  CHECK_FALSE(NamesPeer(reset, 0, 1));
  CHECK(LostPeer(reset, 0, 1));
  CHECK(LostPeer(reset, 0, 3));
  CHECK_FALSE(LostPeer(reset, 0, 0));
  CHECK(LostPeer(lost, 0, 1));        // it names rank 1
  CHECK_FALSE(LostPeer(lost, 0, 2));  // it names rank 1, not 2
  CHECK_FALSE(LostPeer("pplab: error: rank 1: step 3: the loss is NaN", 1, 0));
}

}  // namespace pplab::worker_failures_test
