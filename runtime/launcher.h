// Local launcher: starts one worker process per rank on this machine, the
// way torchrun does, and supervises them so that no failure hangs the run.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace pplab {

struct LaunchOptions {
  int nproc = 1;
  std::vector<std::string> args;  // the workers' arguments (argv[1..])
  // After one worker fails, how long the others get to notice and exit by
  // themselves before they are killed.
  std::chrono::milliseconds grace{60000};
};

// Runs `nproc` copies of this executable with RANK, LOCAL_RANK, WORLD_SIZE,
// MASTER_ADDR (127.0.0.1) and MASTER_PORT (a free port, unless MASTER_PORT is
// set) in their environment and waits for all of them. Returns 0 when all
// succeed; otherwise prints which ranks failed and returns non-zero.
int LaunchLocal(const LaunchOptions& options);

// LaunchLocal of `nproc` workers with `args`, whose peers time out after
// `comm_timeout_s` seconds: after a failure the others get that plus 10 s.
int LaunchWorkers(int nproc, const std::vector<std::string>& args, double comm_timeout_s);

// In a worker that LaunchLocal started (PPLAB_LAUNCHER_PID is set): makes
// the kernel kill this process when the launcher dies, so that killing
// `pplab train` never leaves workers behind. Throws pplab::Error if the
// launcher is already gone. Does nothing under torchrun or Slurm.
void DieWithLauncher();

}  // namespace pplab
