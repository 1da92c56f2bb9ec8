// pplab: plan, simulate and compare pipeline-parallel training schedules.
// The offline commands run here, without LibTorch; train, generate,
// export-model and profile exec `pplab-train` (tools/main_train.cpp).
#include <signal.h>

#include <CLI/CLI.hpp>

#include "tools/cli_main.h"
#include "tools/commands.h"

int main(int argc, char** argv) {
  // A file-size limit reached while writing (a trace) is a write error with
  // a message, not a silent kill.
  ::signal(SIGXFSZ, SIG_IGN);
  CLI::App app{"pplab: plan, simulate and compare pipeline-parallel training schedules"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "pplab 0.1.0");
  int exit_code = 0;
  pplab::cli::SetupSchedules(app, exit_code);
  pplab::cli::SetupSimulate(app, exit_code);
  pplab::cli::SetupCompare(app, exit_code);
  pplab::cli::SetupSweep(app, exit_code);
  pplab::cli::SetupExport(app, exit_code);
  pplab::cli::SetupValidate(app, exit_code);
  pplab::cli::SetupRender(app, exit_code);
  pplab::cli::SetupShow(app, exit_code);
  pplab::cli::SetupBench(app, exit_code);
  pplab::cli::SetupStats(app, exit_code);
  pplab::cli::SetupDiff(app, exit_code);
  pplab::cli::SetupExplain(app, exit_code);
  pplab::cli::SetupPlan(app, exit_code);
#ifdef PPLAB_WITH_DATA
  pplab::cli::SetupTokenize(app, exit_code);
#endif
  pplab::cli::SetupTrainingCommands(app, std::vector<std::string>(argv, argv + argc));
  return pplab::cli::RunCli(app, argc, argv, exit_code);
}
