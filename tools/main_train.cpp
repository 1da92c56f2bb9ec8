// pplab-train: the LibTorch half of pplab (train, generate, export-model,
// profile). `pplab` execs it for those commands with the user's command
// line, and the launcher re-executes it (/proc/self/exe) for the workers.
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>

#include "tools/cli_main.h"
#include "tools/commands.h"

int main(int argc, char** argv) {
  // A worker that `pplab train` launched dies with its launcher. This comes
  // first, before anything that could take time, and is followed by a check
  // that the launcher is still its parent (it may have died before prctl).
  if (const char* launcher = std::getenv("PPLAB_LAUNCHER_PID")) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != static_cast<pid_t>(std::atol(launcher))) {
      std::fprintf(stderr, "pplab: error: the launching pplab (pid %s) is gone; this worker stops\n", launcher);
      return 2;
    }
  }
  // A file-size limit reached while writing (a checkpoint, a trace) is a
  // write error with a message, not a silent kill.
  ::signal(SIGXFSZ, SIG_IGN);
  CLI::App app{"pplab: train, sample from and profile Llama models with pipeline plans"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "pplab 0.1.0");
  int exit_code = 0;
  const std::vector<std::string> args(argv, argv + argc);
  pplab::cli::SetupTrain(app, exit_code, args);
  pplab::cli::SetupExportModel(app, exit_code);
  pplab::cli::SetupGenerate(app, exit_code);
  pplab::cli::SetupProfile(app, exit_code, args);
  return pplab::cli::RunCli(app, argc, argv, exit_code);
}
