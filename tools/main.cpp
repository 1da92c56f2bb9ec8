// pplab: plan, simulate and compare pipeline-parallel training schedules.
// main() only dispatches; it is the one place that catches errors.
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>

#include "schedules/error.h"
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
  pplab::cli::SetupPlan(app, exit_code);
  pplab::cli::SetupTrain(app, exit_code, std::vector<std::string>(argv, argv + argc));
  pplab::cli::SetupExportModel(app, exit_code);
  pplab::cli::SetupGenerate(app, exit_code);
  pplab::cli::SetupProfile(app, exit_code, std::vector<std::string>(argv, argv + argc));
  std::string known;
  bool found = false;
  for (const CLI::App* sub : app.get_subcommands({})) {
    known += (known.empty() ? "" : ", ") + sub->get_name();
    found = found || (argc > 1 && sub->get_name() == argv[1]);
  }
  if (argc > 1 && argv[1][0] != '-' && !found) {
    std::fprintf(stderr, "pplab: error: unknown command '%s' (commands: %s)\n", argv[1], known.c_str());
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const pplab::Error& e) {
    std::fprintf(stderr, "pplab: error: %s\n", e.what());
    return 2;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "pplab: error: out of memory\n");
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pplab: error: %s\n", e.what());
    return 2;
  }
  return exit_code;
}
