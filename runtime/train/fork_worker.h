// Forked workers: the local launcher forks each CPU worker from itself
// instead of exec'ing the program again, when that is safe.
//
// Why: a process that loads Debian's LibTorch spends about 0.7 s before
// main() (the dynamic loader binding some 290 libraries, and LibTorch
// registering its operators), measured on the 2-core VM. A forked worker
// inherits all of that done.
//
// When it is safe: a forked child has only the thread that forked, so a
// lock or a pool that another thread held is broken in it. LibTorch's
// OpenMP pool is one (a child that enters a parallel region waits forever),
// and a CUDA context is another. So the launcher forks only while it has no
// more threads than it had at the start of main() (the libraries' own, such
// as OpenBLAS's server, which a fork handler of OpenBLAS stops and restarts),
// and only for a CPU run. The worker is then the process a one-rank run is:
// the launcher after its checks, running RunWorker.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace pplab {

// What a forked worker runs: main()'s work for `argv`. Its return value is
// the worker's exit code.
using WorkerMain = int (*)(int argc, char** argv);

// main() calls this first: it notes the threads the process has now, and
// what a forked worker runs.
void NoteProcessStart(WorkerMain worker_main);

// Whether this process can fork a worker now (not with PPLAB_FORK_WORKERS=0
// in its environment); if not, why.
bool CanForkWorker(std::string* why);

// Forks a worker running `argv` (argv[0] first) in exactly the environment
// `env` ("KEY=value" entries). Like an exec'd worker, it keeps this
// process's file descriptors but those marked close-on-exec, and has the
// default action for every signal this process catches, and none blocked.
// Returns its pid, or -1 with the reason in `why` (the caller then execs
// the worker).
pid_t ForkWorker(const std::vector<std::string>& argv, const std::vector<std::string>& env, std::string* why);

}  // namespace pplab
