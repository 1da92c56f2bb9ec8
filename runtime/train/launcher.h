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
};

// Runs `nproc` copies of this executable with RANK, LOCAL_RANK, WORLD_SIZE,
// LOCAL_WORLD_SIZE, MASTER_ADDR (127.0.0.1) and MASTER_PORT (a free port,
// unless MASTER_PORT is set) in their environment and waits for all of them. Returns 0 when all
// succeed; otherwise prints which ranks failed and returns non-zero.
int LaunchLocal(const LaunchOptions& options);

// LaunchLocal of `nproc` workers with `args`, whose peers time out after
// `comm_timeout_s` seconds: after a failure the others get that plus 10 s.
int LaunchWorkers(int nproc, const std::vector<std::string>& args, double comm_timeout_s,
                  const std::vector<std::string>& env = {});

// True when this process is one worker of a launch (RANK and WORLD_SIZE
// set, by LaunchLocal, torchrun or Slurm).
bool IsWorker();

// Runs `body(rank, world)` with RANK and WORLD_SIZE from the environment.
// On an error it prints "pplab: error: rank R: ..." and leaves at once
// (_Exit(2)): a process group with a dead peer may block in its destructors,
// and a worker must never hang.
int RunAsWorker(const std::function<int(RankId rank, int world)>& body);

// In a worker that LaunchLocal started (PPLAB_LAUNCHER_PID is set): makes
// the kernel kill this process when the launcher dies, so that killing
// `pplab train` never leaves workers behind. Throws pplab::Error if the
// launcher is already gone. Does nothing under torchrun or Slurm.
void DieWithLauncher();

}  // namespace pplab
