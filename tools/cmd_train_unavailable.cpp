// pplab train in a build without LibTorch: says so instead of vanishing.
#include <CLI/CLI.hpp>

#include "schedules/error.h"
#include "tools/commands.h"

namespace pplab::cli {

void SetupTrain(CLI::App& app, int& exit_code, const std::vector<std::string>&) {
  CLI::App* sub = app.add_subcommand("train", "train with a pipeline plan (needs a build with LibTorch)");
  sub->allow_extras();
  sub->callback([&exit_code] {
    exit_code = 2;
    throw Error("this pplab was built without LibTorch: install libtorch-dev (tools/setup.sh does) and rebuild");
  });
}

void SetupExportModel(CLI::App& app, int& exit_code) {
  CLI::App* sub = app.add_subcommand("export-model", "write a checkpoint as one file (needs a build with LibTorch)");
  sub->allow_extras();
  sub->callback([&exit_code] {
    exit_code = 2;
    throw Error("this pplab was built without LibTorch: install libtorch-dev (tools/setup.sh does) and rebuild");
  });
}

void SetupProfile(CLI::App& app, int& exit_code, const std::vector<std::string>&) {
  CLI::App* sub = app.add_subcommand("profile", "measure stage and link costs (needs a build with LibTorch)");
  sub->allow_extras();
  sub->callback([&exit_code] {
    exit_code = 2;
    throw Error("this pplab was built without LibTorch: install libtorch-dev (tools/setup.sh does) and rebuild");
  });
}

}  // namespace pplab::cli
