// What the local launcher reports when workers fail: the first failure's
// line, and one line naming the ranks that stopped after it.
//
// The launcher sees two things, in rounds: the error lines the workers write
// into its pipe ("rank R: ..."), and the workers it reaps. A worker killed
// by a signal writes no line, and its peers may report losing it before it
// can be reaped; the log puts such a death before the lines that lost it, so
// that the user reads the cause first.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

namespace pplab {

// A worker the launcher reaped: its rank, its wait status (waitpid's), and
// whether the launcher itself killed it (after a peer failed, or after a
// peer finished), and if so whether late.
struct WorkerExit {
  int rank = 0;
  int status = 0;
  bool killed_by_launcher = false;
  // Killed at the deadline, after the time it was given to exit (not
  // stopped at once because a peer died before the rendezvous).
  bool late = false;
};

class FailureLog {
 public:
  // One round: `text` read from the workers' error pipe (a line may arrive
  // over several rounds), then the workers reaped after it. Within a round
  // the deaths go first: a death that made a peer fail is read before the
  // peer's line. A worker that exited 0 is no failure; one with a line of
  // its own is reported by that line alone.
  void Add(const std::string& text, const std::vector<WorkerExit>& exits);

  // Whether a worker has exited with a failure (from then on the launcher
  // gives the others a grace period).
  bool AnyExitFailed() const { return exit_code_ != 0; }
  // The ranks whose exit was a failure so far.
  std::vector<int> FailedRanks() const {
    std::vector<int> out;
    for (const auto& [rank, code] : code_of_) out.push_back(rank);
    return out;
  }

  // The lines to print (none when nothing failed): the first failure's, then
  // "pplab: ranks 1-3, 5 stopped after rank 0 failed" when others did, and
  // "pplab: rank 4 did not exit after rank 0 failed; the launcher killed it"
  // for those killed at the deadline (a hung rank the others waited on).
  std::vector<std::string> ReportLines() const;
  // The launcher's exit code: the first failure's worker's (1 for a signal),
  // else the first nonzero exit seen, else 0.
  int ExitCode() const;

 private:
  struct Failure {
    int rank;
    std::string line;  // the worker's error line, or how it died
    // Died from a signal the launcher did not send, with no line of its own.
    bool killed = false;
    // Killed by the launcher at its deadline: it did not exit in time.
    bool late = false;
  };
  std::vector<Failure> Ordered() const;

  std::string pending_;  // pipe text not yet ended by a newline
  std::vector<Failure> failures_;
  std::set<int> reported_;      // ranks with a failure recorded
  std::map<int, int> code_of_;  // rank -> the exit code its failed exit gives the launcher
  int exit_code_ = 0;           // the first nonzero exit
};

// Whether rank `own`'s error line names rank `peer` as the one it lost (the
// workers' lines say "... from rank N", "to rank N", "connecting to rank
// N"). The log reports a worker killed by a signal before such a line.
bool NamesPeer(const std::string& line, int own, int peer);
// Whether rank `own`'s error line could be the loss of rank `peer`: it names
// it (NamesPeer), or it reports a connection its peer closed or reset
// without naming any other rank (a collective's Gloo error names an address,
// not a rank). The log reports a worker killed by a signal it did not
// send before such a line.
bool LostPeer(const std::string& line, int own, int peer);

}  // namespace pplab
