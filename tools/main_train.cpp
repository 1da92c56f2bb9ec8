// pplab-train: the LibTorch half of pplab (train, generate, export-model,
// profile). `pplab` execs it for those commands with the user's command
// line, and the launcher forks the workers from itself (or re-executes it,
// /proc/self/exe).
#include <dlfcn.h>
#include <signal.h>

#include <CLI/CLI.hpp>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "runtime/train/fork_worker.h"
#include "runtime/train/launcher.h"
#include "tools/cli_main.h"
#include "tools/commands.h"

namespace {

// LibTorch logs a c10d failure that pplab reports in its own line too:
// Debian's 1.13 through glog ("WARNING: Logging before InitGoogleLogging()
// ...", then "E... socket.cpp ... The client socket has timed out"), 2.x
// through c10's own logging, before pplab's line: three for one. Their
// level is raised to FATAL, unless GLOG_minloglevel or TORCH_CPP_LOG_LEVEL
// says otherwise. The flags are looked up by name: a build has some of
// them, glog's (namespaced) or c10's own (global).
void QuietLibTorchLogs() {
  if (std::getenv("GLOG_minloglevel") != nullptr || std::getenv("TORCH_CPP_LOG_LEVEL") != nullptr) return;
  constexpr int32_t kFatal = 3;  // GLOG_FATAL, c10's too
  for (const char* name : {"_ZN3fLI17FLAGS_minloglevelE", "_ZN3fLI22FLAGS_caffe2_log_levelE", "FLAGS_minloglevel",
                           "FLAGS_caffe2_log_level"}) {
    if (void* flag = ::dlsym(RTLD_DEFAULT, name)) *static_cast<int32_t*>(flag) = kFatal;
  }
}

// main()'s work: in a process of its own, or in a worker that the launcher
// forked (runtime/train/fork_worker.h).
int RunProgram(int argc, char** argv) {
  // A worker that `pplab train` launched dies with its launcher. This comes
  // first, before anything that could take time, and is followed by a check
  // that the launcher is still its parent (it may have died before prctl).
  if (!pplab::DieWithLauncher()) {
    std::fprintf(stderr, "pplab: error: the launching pplab (pid %s) is gone; this worker stops\n",
                 std::getenv("PPLAB_LAUNCHER_PID"));
    return 2;
  }
  // A file-size limit reached while writing (a checkpoint, a trace) is a
  // write error with a message, not a silent kill.
  ::signal(SIGXFSZ, SIG_IGN);
  QuietLibTorchLogs();
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

}  // namespace

int main(int argc, char** argv) {
  pplab::NoteProcessStart(RunProgram);  // what a forked worker runs (runtime/train/fork_worker.h)
  return RunProgram(argc, argv);
}
