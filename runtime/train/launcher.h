// Local launcher: starts one worker process per rank on this machine, the
// way torchrun does, and supervises them so that no failure hangs the run.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "schedules/units.h"

namespace pplab {

struct LaunchOptions {
  int nproc = 1;
  std::vector<std::string> args;  // the workers' arguments (argv[1..])
  std::vector<std::string> env;   // extra "KEY=value" entries of the workers' environment
  // After one worker fails, how long the others get to notice and exit by
  // themselves before they are killed.
  std::chrono::milliseconds grace{60000};
  // Fork the workers from this process where that is safe (runtime/train/
  // fork_worker.h); else, or when it fails, exec them.
  bool fork_workers = false;
};

// Runs `nproc` copies of this executable with RANK, LOCAL_RANK, WORLD_SIZE,
// LOCAL_WORLD_SIZE, MASTER_ADDR (127.0.0.1), MASTER_PORT (a free port, unless MASTER_PORT is
// set: then it must be free, else pplab::Error says so) and PPLAB_RUN_ID (a
// fresh random id the workers check when they join) in their environment and
// waits for all of them. Returns 0 when all succeed. Otherwise it prints the
// first failure (the failing rank's error line, or how it died) and
// summarises the ranks that stopped after it in one line ("ranks 1-7
// stopped after rank 0 failed"; runtime/train/worker_failures.h), and
// returns non-zero.
//
// SIGINT and SIGTERM (also while the workers are starting) make it print one
// line, kill and reap every worker, and return 130 or 143: no worker outlives it.
int LaunchLocal(const LaunchOptions& options);

// A fresh run id: 16 random hex digits.
std::string NewRunId();

// This worker's error line goes to the launcher (which reports it once)
// when PPLAB_ERROR_FD is set, else to stderr.
void ReportWorkerError(int rank, const std::string& message);

// LaunchLocal of `nproc` workers with `args`, whose peers time out after
// `comm_timeout_s` seconds: after a failure the others get that plus 10 s.
// `fork_workers` as in LaunchOptions.
int LaunchWorkers(int nproc, const std::vector<std::string>& args, double comm_timeout_s,
                  const std::vector<std::string>& env = {}, bool fork_workers = false);

// True when this process is one worker of a launch (RANK and WORLD_SIZE
// set, by LaunchLocal, torchrun or Slurm).
bool IsWorker();

// Runs `body(rank, world)` with RANK and WORLD_SIZE from the environment.
// On an error it prints "pplab: error: rank R: ..." and leaves at once
// (_Exit(2)): a process group with a dead peer may block in its destructors,
// and a worker must never hang. `on_failure`, where given, runs between the
// two (it must not block).
int RunAsWorker(const std::function<int(RankId rank, int world)>& body,
                const std::function<void()>& on_failure = nullptr);

// In a worker that LaunchLocal started (PPLAB_LAUNCHER_PID is set): makes
// the kernel kill this process when the launcher dies, so that killing
// `pplab train` never leaves workers behind, then checks that the launcher
// is still its parent. Returns false if the launcher is already gone (the
// caller leaves at once). Does nothing under torchrun or Slurm. main() calls
// it before anything else; it uses only async-signal-safe calls.
bool DieWithLauncher();

// Binds a TCP socket on all interfaces (where the TCPStore will listen) at
// `port` (0: any), and lets it go; returns the port, or -1 with errno set.
int BindPort(int port);

}  // namespace pplab
