// pplab schedules: the generators, one line each.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "schedules/generators.h"
#include "tools/commands.h"

namespace pplab::cli {

void SetupSchedules(CLI::App& app, int& exit_code) {
  CLI::App* sub = app.add_subcommand("schedules", "list the schedule generators");
  sub->callback([&exit_code] {
    for (const GeneratorInfo& g : Generators()) {
      std::printf("%-17s %s\n", g.name.c_str(), g.summary.c_str());
      if (!g.pytorch_name.empty()) std::printf("%-17s also -s %s (PyTorch's name)\n", "", g.pytorch_name.c_str());
    }
    exit_code = 0;
  });
}

}  // namespace pplab::cli
