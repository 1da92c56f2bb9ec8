// The LibTorch subcommands in a build without LibTorch: each says so instead
// of vanishing.
#include <CLI/CLI.hpp>

#include "schedules/error.h"
#include "tools/commands.h"

namespace pplab::cli {
namespace {

void Unavailable(CLI::App& app, int& exit_code, const std::string& name, const std::string& what) {
  CLI::App* sub = app.add_subcommand(name, what + " (needs a build with LibTorch)");
  sub->allow_extras();
  sub->callback([&exit_code] {
    exit_code = 2;
    throw Error("this pplab was built without LibTorch: install libtorch-dev (tools/setup.sh does) and rebuild");
  });
}

}  // namespace

void SetupTrain(CLI::App& app, int& exit_code, const std::vector<std::string>&) {
  Unavailable(app, exit_code, "train", "train with a pipeline plan");
}

void SetupExportModel(CLI::App& app, int& exit_code) {
  Unavailable(app, exit_code, "export-model", "write a checkpoint as one file");
}

void SetupGenerate(CLI::App& app, int& exit_code) {
  Unavailable(app, exit_code, "generate", "sample text from a checkpoint");
}

void SetupProfile(CLI::App& app, int& exit_code, const std::vector<std::string>&) {
  Unavailable(app, exit_code, "profile", "measure stage and link costs");
}

}  // namespace pplab::cli
