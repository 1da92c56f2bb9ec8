// train, generate, export-model and profile in `pplab`: they need LibTorch,
// which the offline commands must not load (0.5 s and 160 MB at start-up),
// so they live in `pplab-train` beside `pplab`, and `pplab` execs it with
// the same arguments (git-style). Same process id, so the launcher, its
// workers and signals behave as if pplab had run the command itself.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>

#include "schedules/error.h"
#include "tools/cli_main.h"
#include "tools/commands.h"

namespace pplab::cli {
namespace {

constexpr const char* kTrainExecutable = "pplab-train";

[[noreturn]] void ExecTrainExecutable(const std::string& command, std::vector<std::string> argv) {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) throw Error("pplab " + command + ": cannot find pplab's own path (/proc/self/exe): " + ec.message());
  const std::string path = (self.parent_path() / kTrainExecutable).string();
  std::vector<char*> args;
  for (std::string& a : argv) args.push_back(a.data());  // argv[0] stays what the user typed
  args.push_back(nullptr);
  if (!argv.empty()) ::setenv(kProgramNameEnv, argv[0].c_str(), 1);  // what the workers print
  ::execv(path.c_str(), args.data());
  const int err = errno;
  if (err == ENOENT) {
    throw Error("pplab " + command + " runs " + path +
                ", which is missing: this pplab was built without LibTorch (install libtorch-dev, e.g. with "
                "tools/setup.sh, and rebuild)");
  }
  throw Error("pplab " + command + ": cannot run " + path + ": " + std::strerror(err));
}

void Forward(CLI::App& app, const std::vector<std::string>& argv, const std::string& name, const std::string& what) {
  CLI::App* sub = app.add_subcommand(name, what);
  // Everything after the command name, --help included, is pplab-train's to parse.
  sub->set_help_flag();
  sub->allow_extras();
  sub->prefix_command();
  sub->callback([argv, name] { ExecTrainExecutable(name, argv); });
}

}  // namespace

void SetupTrainingCommands(CLI::App& app, const std::vector<std::string>& argv) {
  Forward(app, argv, "train", "train a Llama model with a pipeline plan, one process per rank");
  Forward(app, argv, "export-model",
          "write a checkpoint's parameters as one file (torch.load's or .safetensors), or a Hugging Face model folder");
  Forward(app, argv, "generate", "sample text from a checkpoint or a published model's weights (one process, CPU)");
  Forward(app, argv, "profile", "measure stage and link costs on this machine; write a cost model");
}

}  // namespace pplab::cli
