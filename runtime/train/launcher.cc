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
#include <optional>
#include <random>
#include <set>
#include <thread>

#include "runtime/comm/process_group.h"
#include "runtime/train/fork_worker.h"
#include "runtime/train/store_dir.h"
#include "runtime/train/worker_failures.h"
#include "schedules/error.h"
#include "schedules/file_io.h"
#include "schedules/one_line.h"

extern char** environ;

namespace pplab {

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

namespace {

// The signal that asks the launcher to stop (0: none). A signal handler may
// only set a flag, so this one is process-wide.
volatile sig_atomic_t g_stop_signal = 0;
void OnStopSignal(int sig) { g_stop_signal = sig; }

}  // namespace

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
  const std::string line = "rank " + std::to_string(rank) + ": " + ControlEscaped(OneLineError(message)) + "\n";
  const char* fd_text = std::getenv("PPLAB_ERROR_FD");
  if (fd_text != nullptr) {
    // One write of a short line into a pipe is atomic; the launcher prints it.
    const std::string bounded = line.size() < 4000 ? line : line.substr(0, 3999) + "\n";
    if (::write(std::atoi(fd_text), bounded.data(), bounded.size()) == static_cast<ssize_t>(bounded.size())) return;
  }
  std::fprintf(stderr, "pplab: error: %s", line.c_str());
  std::fflush(stderr);
}

int RunAsWorker(const std::function<int(RankId rank, int world)>& body, const std::function<void()>& on_failure) {
  int rank = 0;
  try {
    rank = EnvInt("RANK", 0);
    const int world = EnvInt("WORLD_SIZE", 1);
    if (rank < 0 || rank >= world || world < 1) {
      throw Error("RANK " + std::to_string(rank) + " is not a rank of WORLD_SIZE " + std::to_string(world) +
                  " (this process is a worker because both are set in the environment)");
    }
    // The node's share, which picks the GPU: refused where it cannot be one
    // (LOCAL_RANK -1 or past LOCAL_WORLD_SIZE ran unsaid).
    const int local_world = EnvInt("LOCAL_WORLD_SIZE", world), local_rank = EnvInt("LOCAL_RANK", rank);
    if (local_world < 1 || local_world > world) {
      throw Error("LOCAL_WORLD_SIZE " + std::to_string(local_world) + " is not a count of this node's ranks (1 to " +
                  "WORLD_SIZE " + std::to_string(world) + ")");
    }
    if (local_rank < 0 || local_rank >= local_world) {
      throw Error("LOCAL_RANK " + std::to_string(local_rank) + " is not a rank of LOCAL_WORLD_SIZE " +
                  std::to_string(local_world));
    }
    return body(rank, world);
  } catch (const std::exception& e) {
    ReportWorkerError(rank, e.what());
    if (on_failure) on_failure();
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

// A file descriptor this scope owns.
class OwnedFd {
 public:
  explicit OwnedFd(int fd) : fd_(fd) {}
  ~OwnedFd() { Close(); }
  OwnedFd(const OwnedFd&) = delete;
  OwnedFd& operator=(const OwnedFd&) = delete;
  int get() const { return fd_; }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
};

// While one lives, SIGINT, SIGTERM and SIGHUP only set g_stop_signal, and they are
// held (blocked) until Release(), so that no worker is left half-started:
// once all are known, a held signal stops them. The destructor puts back
// the handlers and the signal mask it found.
class StopSignals {
 public:
  StopSignals() {
    g_stop_signal = 0;
    struct sigaction stop {};
    stop.sa_handler = OnStopSignal;
    sigemptyset(&stop.sa_mask);
    ::sigaction(SIGINT, &stop, &old_int_);
    ::sigaction(SIGTERM, &stop, &old_term_);
    ::sigaction(SIGHUP, &stop, &old_hup_);  // a closed terminal or ssh session
    sigset_t held;
    sigemptyset(&held);
    sigaddset(&held, SIGINT);
    sigaddset(&held, SIGTERM);
    sigaddset(&held, SIGHUP);
    ::sigprocmask(SIG_BLOCK, &held, &old_mask_);
  }
  ~StopSignals() {
    ::sigaction(SIGINT, &old_int_, nullptr);
    ::sigaction(SIGTERM, &old_term_, nullptr);
    ::sigaction(SIGHUP, &old_hup_, nullptr);
    Release();
  }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;
  // A held SIGINT, SIGTERM or SIGHUP arrives here.
  void Release() const { ::sigprocmask(SIG_SETMASK, &old_mask_, nullptr); }

 private:
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
  struct sigaction old_hup_ {};
  sigset_t old_mask_{};
};

// Starts worker `argv` in environment `env` ("KEY=value" entries): forked
// where `fork` asks and that is safe, else exec'd with default signal
// handling and nothing blocked. Returns its pid; throws naming `rank`.
pid_t StartWorker(int rank, std::vector<std::string> argv, std::vector<std::string> env, bool fork) {
  std::string why;  // why not forked: the worker is exec'd then (runtime/train/fork_worker.h)
  if (fork) {
    const pid_t pid = ForkWorker(argv, env, &why);
    if (pid > 0) return pid;
  }
  std::vector<char*> envp, argvp;
  for (std::string& s : env) envp.push_back(s.data());
  envp.push_back(nullptr);
  for (std::string& a : argv) argvp.push_back(a.data());
  argvp.push_back(nullptr);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGINT);
  sigaddset(&defaults, SIGTERM);
  sigaddset(&defaults, SIGHUP);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t pid = -1;
  const int err = posix_spawn(&pid, "/proc/self/exe", nullptr, &attr, argvp.data(), envp.data());
  posix_spawnattr_destroy(&attr);
  if (err != 0) throw Error("launcher: cannot start rank " + std::to_string(rank) + ": " + std::strerror(err));
  return pid;
}

// The workers still running, by pid. However LaunchLocal leaves, an error
// included, the destructor kills and reaps those that are left.
class Workers {
 public:
  Workers() = default;
  ~Workers() { KillAll(); }
  Workers(const Workers&) = delete;
  Workers& operator=(const Workers&) = delete;

  void Add(pid_t pid, int rank) { rank_of_[pid] = rank; }
  bool empty() const { return rank_of_.empty(); }
  size_t size() const { return rank_of_.size(); }

  // The workers that have ended since the last call, without waiting.
  std::vector<WorkerExit> ReapEnded() {
    std::vector<WorkerExit> ended;
    int status = 0;
    pid_t pid;
    while ((pid = ::waitpid(-1, &status, WNOHANG)) > 0) {
      const auto it = rank_of_.find(pid);
      if (it == rank_of_.end()) continue;
      const auto killed = killed_here_.find(pid);
      ended.push_back(
          {it->second, status, killed != killed_here_.end(), killed != killed_here_.end() && killed->second});
      rank_of_.erase(it);
    }
    return ended;
  }

  // Kills the workers that are left, saying so for each where `why` is not
  // empty ("after a peer failed"); ReapEnded reports them as killed by the
  // launcher.
  void KillLate(const std::string& why) {
    for (const auto& [pid, rank] : rank_of_) {
      if (!why.empty()) std::fprintf(stderr, "pplab: rank %d did not exit %s; killing it\n", rank, why.c_str());
      ::kill(pid, SIGKILL);
      killed_here_[pid] = !why.empty();  // late, or stopped at once
    }
  }

  // Kills and reaps every worker that is left.
  void KillAll() {
    for (const auto& [pid, rank] : rank_of_) ::kill(pid, SIGKILL);
    for (const auto& [pid, rank] : rank_of_) ::waitpid(pid, nullptr, 0);
    rank_of_.clear();
  }

 private:
  std::map<pid_t, int> rank_of_;
  std::map<pid_t, bool> killed_here_;  // killed by the launcher: whether late (given time to exit)
};

// What can be read from non-blocking `fd` now.
std::string ReadAvailable(int fd) {
  std::string text;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(n));
  return text;
}

const char* StopSignalName(int sig) {
  return sig == SIGINT ? "interrupted (SIGINT)" : sig == SIGHUP ? "hung up (SIGHUP)" : "terminated (SIGTERM)";
}

}  // namespace

int LaunchLocal(const LaunchOptions& options) {
  const std::string port = MasterPort();
  const std::string run_id = NewRunId();
  // The workers rendezvous through a file in a directory only this user can
  // read, not through a TCP store: a local launch listens on no network port
  // for its store, and no process of another run can join it by accident.
  const std::string store_dir = MakeStoreDir(std::filesystem::temp_directory_path().string());
  struct RemoveStore {
    const std::string& dir;
    ~RemoveStore() { RemoveTree(dir); }
  } remove_store{store_dir};
  // Workers report their error line through this pipe, so that the launcher
  // prints the first one and summarises the rest.
  int error_pipe[2];
  if (::pipe(error_pipe) != 0) throw Error(std::string("launcher: pipe: ") + std::strerror(errno));
  OwnedFd read_end(error_pipe[0]), write_end(error_pipe[1]);
  ::fcntl(read_end.get(), F_SETFD, FD_CLOEXEC);
  ::fcntl(read_end.get(), F_SETFL, O_NONBLOCK);
  const StopSignals stop_signals;
  Workers workers;  // declared last: its destructor kills what is left first

  std::error_code ec;
  std::string self = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  if (ec || self.empty()) self = "/proc/self/exe";
  for (int r = 0; r < options.nproc; ++r) {
    // argv[0] is the executable's real path, so that ps and pkill show
    // exec'd workers as what they are (a forked one shows the launcher's).
    std::vector<std::string> argv = {self};
    argv.insert(argv.end(), options.args.begin(), options.args.end());
    workers.Add(StartWorker(r, std::move(argv), WorkerEnv(r, options, port, run_id, store_dir, write_end.get()),
                            options.fork_workers),
                r);
  }
  write_end.Close();  // the workers hold the write ends now
  stop_signals.Release();

  FailureLog log;
  // For the others, once one failed.
  std::optional<std::chrono::steady_clock::time_point> deadline;
  std::string late_why;  // why those killed at the deadline were late ("": stopped at once, not late)
  // And once one finished well: a rank hung in its teardown, after its
  // peers ended well, kept the launcher waiting for ever. Rank 0 writes
  // the run's files (traces, the picture) after the others' last
  // collective, so until it has finished the others get 10 minutes more.
  using Clock = std::chrono::steady_clock;
  std::optional<Clock::time_point> rank0_done, first_done;
  int first_done_rank = -1;
  constexpr std::chrono::minutes kRankZeroWrites{10};
  while (!workers.empty()) {
    if (g_stop_signal != 0) {
      const int sig = g_stop_signal;
      std::fprintf(stderr, "pplab: %s: stopping %zu worker(s)\n", StopSignalName(sig), workers.size());
      std::fflush(stderr);
      workers.KillAll();
      return 128 + sig;
    }
    // The pipe is read first and the dead reaped second, so a death that
    // caused a peer's error line is recorded before that line.
    std::string text = ReadAvailable(read_end.get());
    const std::vector<WorkerExit> ended = workers.ReapEnded();
    for (const WorkerExit& e : ended) {
      if (!WIFEXITED(e.status) || WEXITSTATUS(e.status) != 0) continue;
      if (!first_done) {
        first_done = Clock::now();
        first_done_rank = e.rank;
      }
      if (e.rank == 0) rank0_done = Clock::now();
    }
    log.Add(text, ended);
    if (workers.empty()) break;
    if (!deadline && log.AnyExitFailed()) {
      // A rank that ended before the rendezvous (no joined-R file: see
      // MarkJoined) leaves the others waiting in it for the whole timeout,
      // with nothing to report: they are stopped at once. After it, they
      // get the grace to say what they waited on.
      bool before_rendezvous = false;
      for (int r : log.FailedRanks()) {
        std::error_code exists_ec;
        before_rendezvous =
            before_rendezvous || !std::filesystem::exists(store_dir + "/joined-" + std::to_string(r), exists_ec);
      }
      // Those stopped at once were not late: the summary line names them.
      late_why = before_rendezvous ? "" : "after a peer failed";
      deadline = std::chrono::steady_clock::now() + (before_rendezvous ? std::chrono::milliseconds(0) : options.grace);
    } else if (!deadline && first_done) {
      // The others end within their last collective's timeout of rank 0
      // (of the first to finish, and the time rank 0 takes to write, while
      // rank 0 runs).
      const auto bound = rank0_done ? options.grace : options.grace + kRankZeroWrites;
      const auto since = rank0_done ? *rank0_done : *first_done;
      if (Clock::now() > since + bound) {
        late_why = "within " + std::to_string(std::chrono::duration_cast<std::chrono::seconds>(bound).count()) +
                   " s after rank " + std::to_string(rank0_done ? 0 : first_done_rank) + " finished";
        deadline = since + bound;
      }
    }
    if (deadline && std::chrono::steady_clock::now() > *deadline) {
      workers.KillLate(late_why);
      deadline = std::chrono::steady_clock::time_point::max();  // now reap them
    }
    // Polling keeps the loop simple and bounded; a signal cuts the sleep short.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  log.Add(ReadAvailable(read_end.get()), {});
  if (g_stop_signal != 0) {  // the workers got the terminal's signal too, and were all reaped above
    std::fprintf(stderr, "pplab: %s: the workers stopped\n", StopSignalName(g_stop_signal));
    return 128 + g_stop_signal;
  }
  for (const std::string& line : log.ReportLines()) std::fprintf(stderr, "%s\n", line.c_str());
  return log.ExitCode();
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
