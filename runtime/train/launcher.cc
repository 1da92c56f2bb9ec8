#include "runtime/train/launcher.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "runtime/comm/process_group.h"
#include "runtime/train/fork_worker.h"
#include "runtime/train/store_dir.h"
#include "schedules/error.h"
#include "schedules/file_io.h"

extern char** environ;

namespace pplab {
namespace {

// Binds a TCP socket on all interfaces (where the TCPStore will listen) at
// `port` (0: any); returns the port, or -1 with errno set.
int BindPort(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  socklen_t len = sizeof addr;
  int result = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    result = ntohs(addr.sin_port);
  }
  const int saved = errno;
  ::close(fd);
  errno = saved;
  return result;
}

std::string Describe(int status) {
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("was killed by signal ") + strsignal(WTERMSIG(status));
  return "stopped";
}

// The signal that asks the launcher to stop (0: none). A signal handler may
// only set a flag, so this one is process-wide.
volatile sig_atomic_t g_stop_signal = 0;
void OnStopSignal(int sig) { g_stop_signal = sig; }

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

std::string NewRunId() {
  std::random_device device;
  const uint64_t id = (static_cast<uint64_t>(device()) << 32) ^ device() ^
                      static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(id));
  return hex;
}

bool IsWorker() { return std::getenv("RANK") != nullptr && std::getenv("WORLD_SIZE") != nullptr; }

void ReportWorkerError(int rank, const std::string& message) {
  const std::string line = "rank " + std::to_string(rank) + ": " + message + "\n";
  const char* fd_text = std::getenv("PPLAB_ERROR_FD");
  if (fd_text != nullptr) {
    // One write of a short line into a pipe is atomic; the launcher prints it.
    const std::string bounded = line.size() < 4000 ? line : line.substr(0, 3999) + "\n";
    if (::write(std::atoi(fd_text), bounded.data(), bounded.size()) == static_cast<ssize_t>(bounded.size())) return;
  }
  std::fprintf(stderr, "pplab: error: %s", line.c_str());
  std::fflush(stderr);
}

int RunAsWorker(const std::function<int(RankId rank, int world)>& body) {
  int rank = 0;
  try {
    rank = EnvInt("RANK", 0);
    return body(rank, EnvInt("WORLD_SIZE", 1));
  } catch (const std::exception& e) {
    ReportWorkerError(rank, e.what());
    std::_Exit(2);
  }
}

bool DieWithLauncher() {
  const char* launcher = std::getenv("PPLAB_LAUNCHER_PID");
  if (launcher == nullptr) return true;
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  // The launcher may have died before the line above took effect.
  return ::getppid() == static_cast<pid_t>(std::atol(launcher));
}

namespace {

// The port the workers' process groups use: MASTER_PORT when set (and
// free), else one the kernel picks.
std::string MasterPort() {
  const char* port_env = std::getenv("MASTER_PORT");
  if (port_env == nullptr) {
    const int free_port = BindPort(0);
    if (free_port < 0) throw Error(std::string("launcher: cannot find a free port: ") + std::strerror(errno));
    return std::to_string(free_port);
  }
  const std::string port = port_env;
  const int wanted = EnvInt("MASTER_PORT", 0);
  if (wanted < 1 || wanted > 65535) throw Error("MASTER_PORT " + port + " is not a port number");
  if (BindPort(wanted) < 0) {
    throw Error("MASTER_PORT " + port + " is in use (" + std::strerror(errno) +
                "): another run or program holds it; unset MASTER_PORT to let pplab pick a free port");
  }
  return port;
}

// Worker `rank`'s environment: this process's, less the variables the
// launcher sets, with its rank and the run's rendezvous, then options.env
// (which replaces any variable of the same name).
std::vector<std::string> WorkerEnv(int rank, const LaunchOptions& options, const std::string& port,
                                   const std::string& run_id, const std::string& store_dir, int error_fd) {
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv = *e;
    const std::string key = kv.substr(0, kv.find('='));
    if (key == "RANK" || key == "LOCAL_RANK" || key == "WORLD_SIZE" || key == "MASTER_ADDR" || key == "MASTER_PORT" ||
        key == "PPLAB_LAUNCHER_PID" || key == "PPLAB_RUN_ID" || key == "PPLAB_ERROR_FD" || key == "LOCAL_WORLD_SIZE" ||
        key == "PPLAB_STORE_FILE") {
      continue;
    }
    bool replaced = false;
    for (const std::string& extra : options.env)
      replaced = replaced || extra.compare(0, key.size() + 1, key + "=") == 0;
    if (replaced) continue;
    env_strings.push_back(kv);
  }
  env_strings.push_back("RANK=" + std::to_string(rank));
  env_strings.push_back("LOCAL_RANK=" + std::to_string(rank));
  env_strings.push_back("WORLD_SIZE=" + std::to_string(options.nproc));
  env_strings.push_back("LOCAL_WORLD_SIZE=" + std::to_string(options.nproc));
  env_strings.push_back("MASTER_ADDR=127.0.0.1");
  env_strings.push_back("MASTER_PORT=" + port);
  env_strings.push_back("PPLAB_LAUNCHER_PID=" + std::to_string(::getpid()));
  env_strings.push_back("PPLAB_RUN_ID=" + run_id);
  env_strings.push_back("PPLAB_STORE_FILE=" + store_dir + "/store");
  env_strings.push_back("PPLAB_ERROR_FD=" + std::to_string(error_fd));
  env_strings.insert(env_strings.end(), options.env.begin(), options.env.end());
  return env_strings;
}

// A failed worker, as the launcher reports it.
struct Failure {
  int rank;
  std::string line;  // the worker's error line, or how it died
  // Died from a signal the launcher did not send, with no line of its
  // own: it goes before a peer's line that lost it (below).
  bool killed = false;
};

// Prints the first failure's line, and one line naming the ranks that
// stopped after it; returns the launcher's exit code: the first failure's
// worker's, or `result` (the first nonzero exit seen) where it has none.
int ReportFailures(std::vector<Failure>& failures, std::map<int, int>& code_of, int result) {
  // A killed worker's peers may report losing it before it can be reaped
  // (its sockets close while it exits): its death goes before the first
  // line that lost it (LostPeer).
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
  if (!failures.empty() && code_of.count(failures.front().rank) > 0) result = code_of[failures.front().rank];
  if (!failures.empty()) {
    std::fprintf(stderr, "%s\n", failures.front().line.c_str());
    std::vector<int> others;
    for (size_t i = 1; i < failures.size(); ++i) {
      if (failures[i].rank != failures.front().rank && failures[i].rank >= 0) others.push_back(failures[i].rank);
    }
    std::sort(others.begin(), others.end());
    others.erase(std::unique(others.begin(), others.end()), others.end());
    if (!others.empty()) {
      std::fprintf(stderr, "pplab: %s %s stopped after rank %d failed\n", others.size() == 1 ? "rank" : "ranks",
                   RankRanges(others).c_str(), failures.front().rank);
    }
  }
  return result;
}

}  // namespace

int LaunchLocal(const LaunchOptions& options) {
  const std::string port = MasterPort();
  const std::string run_id = NewRunId();
  // The workers rendezvous through a file in a directory only this user can
  // read, not through a TCP store: a local launch listens on no network port
  // for its store, and no process of another run can join it by accident.
  const std::string store_dir = MakeStoreDir(std::filesystem::temp_directory_path().string());
  // Workers report their error line through this pipe, so that the launcher
  // prints the first one and summarises the rest.
  int error_pipe[2];
  if (::pipe(error_pipe) != 0) throw Error(std::string("launcher: pipe: ") + std::strerror(errno));
  ::fcntl(error_pipe[0], F_SETFD, FD_CLOEXEC);
  ::fcntl(error_pipe[0], F_SETFL, O_NONBLOCK);
  // SIGINT and SIGTERM are held while workers start, so that none can be
  // left half-started; once they are all known, a held signal stops them.
  g_stop_signal = 0;
  struct sigaction stop {};
  stop.sa_handler = OnStopSignal;
  sigemptyset(&stop.sa_mask);
  struct sigaction old_int {
  }, old_term{};
  ::sigaction(SIGINT, &stop, &old_int);
  ::sigaction(SIGTERM, &stop, &old_term);
  sigset_t stop_set, old_mask;
  sigemptyset(&stop_set);
  sigaddset(&stop_set, SIGINT);
  sigaddset(&stop_set, SIGTERM);
  ::sigprocmask(SIG_BLOCK, &stop_set, &old_mask);
  // The workers start with default signal handling and nothing blocked.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGINT);
  sigaddset(&defaults, SIGTERM);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  auto restore = [&] {
    RemoveTree(store_dir);
    posix_spawnattr_destroy(&attr);
    ::close(error_pipe[0]);
    ::sigaction(SIGINT, &old_int, nullptr);
    ::sigaction(SIGTERM, &old_term, nullptr);
    ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  };
  std::map<pid_t, int> rank_of;
  auto kill_all = [&rank_of] {
    for (const auto& [p, rank] : rank_of) ::kill(p, SIGKILL);
  };
  auto reap_all = [&rank_of] {
    for (const auto& [p, rank] : rank_of) ::waitpid(p, nullptr, 0);
    rank_of.clear();
  };
  std::error_code ec;
  std::string self = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  if (ec || self.empty()) self = "/proc/self/exe";
  for (int r = 0; r < options.nproc; ++r) {
    std::vector<std::string> env_strings = WorkerEnv(r, options, port, run_id, store_dir, error_pipe[1]);
    // argv[0] is the executable's real path, so that ps and pkill show
    // exec'd workers as what they are (a forked one shows the launcher's).
    std::vector<std::string> argv_strings = {self};
    argv_strings.insert(argv_strings.end(), options.args.begin(), options.args.end());
    pid_t pid = -1;
    std::string why;  // why not forked: the worker is exec'd then (runtime/train/fork_worker.h)
    if (options.fork_workers) pid = ForkWorker(argv_strings, env_strings, &why);
    std::vector<char*> env, argv;
    for (std::string& s : env_strings) env.push_back(s.data());
    env.push_back(nullptr);
    for (std::string& a : argv_strings) argv.push_back(a.data());
    argv.push_back(nullptr);
    const int err = pid > 0 ? 0 : posix_spawn(&pid, "/proc/self/exe", nullptr, &attr, argv.data(), env.data());
    if (err != 0) {
      kill_all();
      reap_all();
      ::close(error_pipe[1]);
      restore();
      throw Error(std::string("launcher: cannot start rank ") + std::to_string(r) + ": " + std::strerror(err));
    }
    rank_of[pid] = r;
  }
  ::close(error_pipe[1]);                          // the workers hold the write ends now
  ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);  // a held SIGINT or SIGTERM arrives here
  std::string pending;                             // error text read but not yet split into lines
  std::vector<Failure> failures;
  std::map<int, bool> reported;  // ranks with a failure recorded
  std::set<pid_t> killed_here;   // workers the launcher killed
  std::map<int, int> code_of;    // rank -> the exit code its failure gives the launcher
  int result = 0;
  bool deadline_set = false;
  std::chrono::steady_clock::time_point deadline;
  // One round: the pipe is read first and the dead reaped second, so a death
  // that caused a peer's error line is recorded before that line.
  auto collect = [&] {
    char buf[4096];
    ssize_t n;
    while ((n = ::read(error_pipe[0], buf, sizeof buf)) > 0) pending.append(buf, static_cast<size_t>(n));
    std::vector<Failure> lines;
    size_t eol;
    while ((eol = pending.find('\n')) != std::string::npos) {
      const std::string line = pending.substr(0, eol);
      pending.erase(0, eol + 1);
      lines.push_back({line.rfind("rank ", 0) == 0 ? std::atoi(line.c_str() + 5) : -1, "pplab: error: " + line});
    }
    int status = 0;
    pid_t pid;
    while ((pid = ::waitpid(-1, &status, WNOHANG)) > 0) {
      const auto it = rank_of.find(pid);
      if (it == rank_of.end()) continue;
      const int rank = it->second;
      rank_of.erase(it);
      if (WIFEXITED(status) && WEXITSTATUS(status) == 0) continue;
      code_of[rank] = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
      if (result == 0) result = code_of[rank];
      if (!deadline_set) {
        deadline_set = true;
        deadline = std::chrono::steady_clock::now() + options.grace;
      }
      bool has_line = reported[rank];
      for (const Failure& f : lines) has_line = has_line || f.rank == rank;
      if (!has_line) {
        failures.push_back({rank, "pplab: rank " + std::to_string(rank) + " " + Describe(status),
                            WIFSIGNALED(status) && killed_here.count(pid) == 0});
        reported[rank] = true;
      }
    }
    for (Failure& f : lines) {
      if (reported[f.rank]) continue;
      reported[f.rank] = true;
      failures.push_back(std::move(f));
    }
  };
  while (!rank_of.empty()) {
    if (g_stop_signal != 0) {
      const int sig = g_stop_signal;
      std::fprintf(stderr, "pplab: %s: stopping %zu worker(s)\n",
                   sig == SIGINT ? "interrupted (SIGINT)" : "terminated (SIGTERM)", rank_of.size());
      std::fflush(stderr);
      kill_all();
      reap_all();
      restore();
      return 128 + sig;
    }
    collect();
    if (rank_of.empty()) break;
    if (deadline_set && std::chrono::steady_clock::now() > deadline) {
      for (const auto& [p, rank] : rank_of) {
        std::fprintf(stderr, "pplab: rank %d did not exit after a peer failed; killing it\n", rank);
        ::kill(p, SIGKILL);
        killed_here.insert(p);
      }
      deadline = std::chrono::steady_clock::now() + std::chrono::hours(24 * 365);  // now reap them
    }
    // Polling keeps the loop simple and bounded; a signal cuts the sleep short.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  collect();
  restore();
  if (g_stop_signal != 0) {  // the workers got the terminal's signal too, and were all reaped above
    const int sig = g_stop_signal;
    std::fprintf(stderr, "pplab: %s: the workers stopped\n",
                 sig == SIGINT ? "interrupted (SIGINT)" : "terminated (SIGTERM)");
    return 128 + sig;
  }
  return ReportFailures(failures, code_of, result);
}

int LaunchWorkers(int nproc, const std::vector<std::string>& args, double comm_timeout_s,
                  const std::vector<std::string>& env, bool fork_workers) {
  LaunchOptions launch;
  launch.fork_workers = fork_workers;
  launch.nproc = nproc;
  launch.args = args;
  launch.env = env;
  launch.grace = std::chrono::milliseconds(static_cast<int64_t>(comm_timeout_s * 1000) + 10000);
  return LaunchLocal(launch);
}

}  // namespace pplab
