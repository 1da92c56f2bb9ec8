#include "runtime/train/worker_failures.h"

#include <sys/wait.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>

namespace pplab {
namespace {

std::string Describe(int status) {
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("was killed by signal ") + strsignal(WTERMSIG(status));
  return "stopped";
}

// "1-3, 5" for ranks {1, 2, 3, 5}.
std::string RankRanges(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ", ";
    out += std::to_string(ranks[i]);
    if (j > i) out += "-" + std::to_string(ranks[j]);
    i = j + 1;
  }
  return out;
}

}  // namespace

void FailureLog::Add(const std::string& text, const std::vector<WorkerExit>& exits) {
  pending_ += text;
  std::vector<Failure> lines;
  size_t eol;
  while ((eol = pending_.find('\n')) != std::string::npos) {
    const std::string line = pending_.substr(0, eol);
    pending_.erase(0, eol + 1);
    lines.push_back({line.rfind("rank ", 0) == 0 ? std::atoi(line.c_str() + 5) : -1, "pplab: error: " + line});
  }
  for (const WorkerExit& e : exits) {
    if (WIFEXITED(e.status) && WEXITSTATUS(e.status) == 0) continue;
    const int code = WIFEXITED(e.status) ? WEXITSTATUS(e.status) : 1;
    code_of_[e.rank] = code;
    if (exit_code_ == 0) exit_code_ = code;
    bool has_line = reported_.count(e.rank) > 0;
    for (const Failure& f : lines) has_line = has_line || f.rank == e.rank;
    if (has_line) continue;
    failures_.push_back({e.rank,
                         "pplab: rank " + std::to_string(e.rank) + " " +
                             (e.late ? "did not exit in time; the launcher killed it" : Describe(e.status)),
                         WIFSIGNALED(e.status) && !e.killed_by_launcher, e.late});
    reported_.insert(e.rank);
  }
  for (Failure& f : lines) {
    if (!reported_.insert(f.rank).second) continue;
    failures_.push_back(std::move(f));
  }
}

std::vector<FailureLog::Failure> FailureLog::Ordered() const {
  std::vector<Failure> failures = failures_;
  // A killed worker's peers may report losing it before it can be reaped
  // (its sockets close while it exits): its death goes before the first
  // line that lost it.
  for (size_t j = 0; j < failures.size(); ++j) {
    if (!failures[j].killed) continue;
    for (size_t i = 0; i < j; ++i) {
      if (LostPeer(failures[i].line, failures[i].rank, failures[j].rank)) {
        std::rotate(failures.begin() + static_cast<long>(i), failures.begin() + static_cast<long>(j),
                    failures.begin() + static_cast<long>(j) + 1);
        break;
      }
    }
  }
  return failures;
}

std::vector<std::string> FailureLog::ReportLines() const {
  const std::vector<Failure> failures = Ordered();
  if (failures.empty()) return {};
  std::vector<std::string> out = {failures.front().line};
  std::vector<int> others, late;
  for (const Failure& f : failures) {
    if (f.rank != failures.front().rank && f.rank >= 0) (f.late ? late : others).push_back(f.rank);
  }
  const std::string after = " after rank " + std::to_string(failures.front().rank) + " failed";
  for (std::vector<int>* ranks : {&others, &late}) {
    std::sort(ranks->begin(), ranks->end());
    ranks->erase(std::unique(ranks->begin(), ranks->end()), ranks->end());
  }
  if (!others.empty()) {
    out.push_back(std::string("pplab: ") + (others.size() == 1 ? "rank " : "ranks ") + RankRanges(others) + " stopped" +
                  after);
  }
  // Those that never exited: a rank hung, that the others waited on, is
  // among them (the first failure is then the others' timeout).
  if (!late.empty()) {
    out.push_back(std::string("pplab: ") + (late.size() == 1 ? "rank " : "ranks ") + RankRanges(late) +
                  " did not exit" + after + "; the launcher killed " + (late.size() == 1 ? "it" : "them"));
  }
  return out;
}

int FailureLog::ExitCode() const {
  const std::vector<Failure> failures = Ordered();
  if (!failures.empty()) {
    const auto it = code_of_.find(failures.front().rank);
    if (it != code_of_.end()) return it->second;
  }
  return exit_code_;
}

bool NamesPeer(const std::string& line, int own, int peer) {
  if (peer == own) return false;
  const std::string word = "rank ";
  for (size_t at = line.find(word); at != std::string::npos; at = line.find(word, at + 1)) {
    size_t end = at + word.size();
    while (end < line.size() && std::isdigit(static_cast<unsigned char>(line[end]))) ++end;
    if (end > at + word.size() && std::atoi(line.c_str() + at + word.size()) == peer) return true;
  }
  return false;
}

bool LostPeer(const std::string& line, int own, int peer) {
  if (peer == own) return false;
  if (NamesPeer(line, own, peer)) return true;
  for (size_t at = line.find("rank "); at != std::string::npos; at = line.find("rank ", at + 1)) {
    const char* digits = line.c_str() + at + 5;
    if (std::isdigit(static_cast<unsigned char>(*digits)) && std::atoi(digits) != own) return false;  // another rank
  }
  for (const char* lost : {"Connection reset by peer", "Connection closed by peer", "Broken pipe"}) {
    if (line.find(lost) != std::string::npos) return true;
  }
  return false;
}

}  // namespace pplab
