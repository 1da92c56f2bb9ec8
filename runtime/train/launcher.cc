#include "runtime/train/launcher.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <thread>

#include "runtime/comm/process_group.h"
#include "schedules/error.h"

extern char** environ;

namespace pplab {
namespace {

int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw Error(std::string("launcher: socket: ") + std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    throw Error(std::string("launcher: cannot find a free port: ") + std::strerror(errno));
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

std::string Describe(int status) {
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("was killed by signal ") + strsignal(WTERMSIG(status));
  return "stopped";
}

}  // namespace

bool IsWorker() { return std::getenv("RANK") != nullptr && std::getenv("WORLD_SIZE") != nullptr; }

int RunAsWorker(const std::function<int(RankId rank, int world)>& body) {
  int rank = 0;
  try {
    rank = EnvInt("RANK", 0);
    return body(rank, EnvInt("WORLD_SIZE", 1));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pplab: error: rank %d: %s\n", rank, e.what());
    std::fflush(stderr);
    std::_Exit(2);
  }
}

void DieWithLauncher() {
  const char* launcher = std::getenv("PPLAB_LAUNCHER_PID");
  if (launcher == nullptr) return;
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  // The launcher may have died before the line above took effect.
  if (std::to_string(::getppid()) != launcher) {
    throw Error(std::string("the launching pplab (pid ") + launcher + ") is gone");
  }
}

int LaunchLocal(const LaunchOptions& options) {
  const char* port_env = std::getenv("MASTER_PORT");
  const std::string port = port_env != nullptr ? port_env : std::to_string(FreePort());
  std::map<pid_t, int> rank_of;
  for (int r = 0; r < options.nproc; ++r) {
    std::vector<std::string> env_strings;
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string kv = *e;
      const std::string key = kv.substr(0, kv.find('='));
      if (key == "RANK" || key == "LOCAL_RANK" || key == "WORLD_SIZE" || key == "LOCAL_WORLD_SIZE" ||
          key == "MASTER_ADDR" || key == "MASTER_PORT" || key == "PPLAB_LAUNCHER_PID") {
        continue;
      }
      bool replaced = false;
      for (const std::string& extra : options.env)
        replaced = replaced || extra.compare(0, key.size() + 1, key + "=") == 0;
      if (replaced) continue;
      env_strings.push_back(kv);
    }
    env_strings.push_back("RANK=" + std::to_string(r));
    env_strings.push_back("LOCAL_RANK=" + std::to_string(r));
    env_strings.push_back("WORLD_SIZE=" + std::to_string(options.nproc));
    env_strings.push_back("LOCAL_WORLD_SIZE=" + std::to_string(options.nproc));
    env_strings.push_back("MASTER_ADDR=127.0.0.1");
    env_strings.push_back("MASTER_PORT=" + port);
    env_strings.push_back("PPLAB_LAUNCHER_PID=" + std::to_string(::getpid()));
    env_strings.insert(env_strings.end(), options.env.begin(), options.env.end());
    std::vector<char*> env, argv;
    for (std::string& s : env_strings) env.push_back(s.data());
    env.push_back(nullptr);
    // argv[0] is the executable's real path, so that ps and pkill show the
    // workers as what they are.
    std::error_code ec;
    std::string self = std::filesystem::read_symlink("/proc/self/exe", ec).string();
    if (ec || self.empty()) self = "/proc/self/exe";
    argv.push_back(self.data());
    std::vector<std::string> args = options.args;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = 0;
    const int err = posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, argv.data(), env.data());
    if (err != 0) {
      for (const auto& [p, rank] : rank_of) ::kill(p, SIGKILL);
      throw Error(std::string("launcher: cannot start rank ") + std::to_string(r) + ": " + std::strerror(err));
    }
    rank_of[pid] = r;
  }
  int result = 0;
  bool deadline_set = false;
  std::chrono::steady_clock::time_point deadline;
  while (!rank_of.empty()) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, deadline_set ? WNOHANG : 0);
    if (pid > 0) {
      const int rank = rank_of[pid];
      rank_of.erase(pid);
      if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
        std::fprintf(stderr, "pplab: rank %d %s\n", rank, Describe(status).c_str());
        if (result == 0) result = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
        if (!deadline_set) {
          deadline_set = true;
          deadline = std::chrono::steady_clock::now() + options.grace;
        }
      }
      continue;
    }
    if (pid < 0 && errno != EINTR) break;
    if (deadline_set && std::chrono::steady_clock::now() > deadline) {
      for (const auto& [p, rank] : rank_of) {
        std::fprintf(stderr, "pplab: rank %d did not exit after a peer failed; killing it\n", rank);
        ::kill(p, SIGKILL);
      }
      deadline_set = false;  // now block until they are reaped
      continue;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return result;
}

int LaunchWorkers(int nproc, const std::vector<std::string>& args, double comm_timeout_s,
                  const std::vector<std::string>& env) {
  LaunchOptions launch;
  launch.nproc = nproc;
  launch.args = args;
  launch.env = env;
  launch.grace = std::chrono::milliseconds(static_cast<int64_t>(comm_timeout_s * 1000) + 10000);
  return LaunchLocal(launch);
}

}  // namespace pplab
