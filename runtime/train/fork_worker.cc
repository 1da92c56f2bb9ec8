#include "runtime/train/fork_worker.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <utility>
#include <vector>

// Linux 5.14; an older kernel refuses it, and the pages are copied as they
// are written instead.
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

namespace pplab {
namespace {

// Noted by main() before any other code runs, as environ is process-wide;
// read by the launcher's one thread.
WorkerMain g_worker_main = nullptr;
int g_start_threads = 0;

// The "Threads:" line of /proc/self/status; 0 when it cannot be read.
int CountThreads() {
  int threads = 0;
  if (FILE* status = std::fopen("/proc/self/status", "r")) {
    char line[256];
    while (std::fgets(line, sizeof line, status) != nullptr) {
      if (std::sscanf(line, "Threads: %d", &threads) == 1) break;
    }
    std::fclose(status);
  }
  return threads;
}

// Copies, now, every page this process still shares copy-on-write with the
// process it was forked from, in one madvise call a run of pages and while
// it has one thread. Left to later, each first write would break the
// sharing with a fault of its own, and once the compute pools' threads run,
// with a TLB flush on every CPU they run on. On the 2-core VM, where a fault
// is dear, that made the forked workers of a tiny 2-rank run cost more (1.9 s
// of system time in all, 0.9 s exec'd) than the start-up they skipped;
// touching the pages one by one here did not help. Batched, the system time
// is what exec'd workers take.
void OwnSharedPages() {
  const long page = ::sysconf(_SC_PAGESIZE);
  std::vector<std::pair<uintptr_t, uintptr_t>> ranges;  // the writable private mappings
  if (FILE* maps = std::fopen("/proc/self/maps", "r")) {
    char line[4096];
    while (std::fgets(line, sizeof line, maps) != nullptr) {
      unsigned long start = 0, end = 0;
      char perms[5] = {};
      if (std::sscanf(line, "%lx-%lx %4s", &start, &end, perms) == 3 && perms[0] == 'r' && perms[1] == 'w' &&
          perms[3] == 'p') {
        ranges.emplace_back(start, end);
      }
    }
    std::fclose(maps);
  }
  const int pagemap = ::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  if (pagemap < 0) return;
  std::vector<uint64_t> entries;
  for (const auto& [start, end] : ranges) {
    const size_t pages = (end - start) / static_cast<size_t>(page);
    entries.assign(pages, 0);
    const off_t at = static_cast<off_t>(start / static_cast<uintptr_t>(page) * sizeof(uint64_t));
    if (::pread(pagemap, entries.data(), pages * sizeof(uint64_t), at) !=
        static_cast<ssize_t>(pages * sizeof(uint64_t))) {
      continue;
    }
    auto shared = [&entries](size_t i) { return ((entries[i] >> 63) & 1) != 0 && ((entries[i] >> 56) & 1) == 0; };
    for (size_t i = 0; i < pages;) {
      if (!shared(i)) {
        ++i;
        continue;
      }
      size_t j = i;
      while (j < pages && shared(j)) ++j;
      // One call a run of pages: the kernel write-faults them in a loop.
      ::madvise(reinterpret_cast<void*>(start + i * static_cast<size_t>(page)), (j - i) * static_cast<size_t>(page),
                MADV_POPULATE_WRITE);
      i = j;
    }
  }
  ::close(pagemap);
}

// In the worker: closes what exec would close, resets what exec would
// reset, and runs main's work for `argv` in `env`.
[[noreturn]] void BecomeWorker(std::vector<std::string> argv, std::vector<std::string> env) {
  std::vector<int> close_on_exec;
  if (DIR* fds = ::opendir("/proc/self/fd")) {
    const int own = ::dirfd(fds);
    while (const dirent* entry = ::readdir(fds)) {
      const int fd = std::atoi(entry->d_name);
      if (entry->d_name[0] == '.' || fd == own) continue;
      const int flags = ::fcntl(fd, F_GETFD);
      if (flags >= 0 && (flags & FD_CLOEXEC) != 0) close_on_exec.push_back(fd);
    }
    ::closedir(fds);
  }
  for (int fd : close_on_exec) ::close(fd);
  for (int sig = 1; sig < NSIG; ++sig) {
    struct sigaction action {};
    if (::sigaction(sig, nullptr, &action) == 0 && action.sa_handler != SIG_DFL && action.sa_handler != SIG_IGN) {
      ::signal(sig, SIG_DFL);
    }
  }
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  // putenv keeps the strings: they live as long as the process.
  static std::vector<std::string> environment;
  environment = std::move(env);
  ::clearenv();
  for (std::string& kv : environment) ::putenv(kv.data());
  OwnSharedPages();
  static std::vector<std::string> args;
  args = std::move(argv);
  std::vector<char*> pointers;
  for (std::string& a : args) pointers.push_back(a.data());
  pointers.push_back(nullptr);
  // Nothing may unwind from here into the launcher's frames, which this
  // process still has below it.
  int code = 2;
  try {
    code = g_worker_main(static_cast<int>(args.size()), pointers.data());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pplab: error: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "pplab: error: a worker failed with an unknown exception\n");
  }
  std::exit(code);
}

}  // namespace

void NoteProcessStart(WorkerMain worker_main) {
  g_worker_main = worker_main;
  g_start_threads = CountThreads();
}

bool CanForkWorker(std::string* why) {
  if (g_worker_main == nullptr) {
    *why = "this program does not fork workers";
    return false;
  }
  if (const char* wanted = std::getenv("PPLAB_FORK_WORKERS"); wanted != nullptr && std::strcmp(wanted, "0") == 0) {
    *why = "PPLAB_FORK_WORKERS=0";
    return false;
  }
  const int threads = CountThreads();
  if (threads == 0 || threads > g_start_threads) {
    *why = "the launcher runs " + std::to_string(threads) + " threads, more than the " +
           std::to_string(g_start_threads) + " it started with";
    return false;
  }
  return true;
}

pid_t ForkWorker(const std::vector<std::string>& argv, const std::vector<std::string>& env, std::string* why) {
  if (!CanForkWorker(why)) return -1;
  std::fflush(nullptr);  // nothing buffered here is written twice
  const pid_t pid = ::fork();
  if (pid == 0) BecomeWorker(argv, env);
  if (pid < 0) *why = std::string("fork: ") + std::strerror(errno);
  return pid;
}

}  // namespace pplab
