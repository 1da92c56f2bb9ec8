// pplab export-model --checkpoint DIR -o FILE: one file of parameters, by
// global name, for single-process use.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>

#include "runtime/train/checkpoint.h"
#include "tools/commands.h"

namespace pplab::cli {

void SetupExportModel(CLI::App& app, int& exit_code) {
  struct Options {
    std::string checkpoint, out;
  };
  auto o = std::make_shared<Options>();
  CLI::App* sub =
      app.add_subcommand("export-model", "write a checkpoint's parameters as one file (torch.load reads it)");
  sub->add_option("--checkpoint", o->checkpoint, "a --checkpoint-dir (its latest checkpoint) or one checkpoint")
      ->required();
  sub->add_option("-o,--output", o->out, "file to write")->required();
  sub->callback([o, &exit_code] {
    const int n = ExportModel(o->checkpoint, o->out);
    std::printf("wrote %d parameters to %s\n", n, o->out.c_str());
    exit_code = 0;
  });
}

}  // namespace pplab::cli
