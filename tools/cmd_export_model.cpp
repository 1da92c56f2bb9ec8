// pplab export-model --checkpoint DIR -o FILE: one file of parameters, by
// global name, for single-process use (torch.load's, or safetensors).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "runtime/train/checkpoint.h"
#include "schedules/error.h"
#include "tools/commands.h"
#include "tools/output_files.h"
#include "tools/train_checks.h"

namespace pplab::cli {

void SetupExportModel(CLI::App& app, int& exit_code) {
  struct Options {
    std::string checkpoint, out;
    bool bf16 = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* sub =
      app.add_subcommand("export-model",
                         "write a checkpoint's parameters as one file: torch.load's, or a .safetensors file under "
                         "Hugging Face's names; or a Hugging Face model folder");
  sub->add_option("--checkpoint", o->checkpoint, "a --checkpoint-dir (its latest checkpoint) or one checkpoint")
      ->required();
  sub->add_option("-o,--output", o->out,
                  "file to write: NAME.safetensors for a safetensors file (what train --init-from and Hugging "
                  "Face's loaders read); a folder (DIR/) for the model's folder as Hugging Face keeps one "
                  "(model.safetensors, config.json, tokenizer.model or .json); any other name for torch.load's pickled "
                  "dictionary")
      ->required();
  sub->add_flag("--bf16", o->bf16, "a .safetensors file in BF16 (half the bytes) instead of F32");
  sub->callback([o, &exit_code] {
    // A file is checked first, for the reason; a folder (DIR/) is made by
    // ExportModel, which names what stops it.
    if (o->out.empty()) throw Error("-o: give a file, or a folder (DIR/)");
    // An existing folder given without its slash is a folder too.
    std::error_code ec;
    if (o->out.back() != '/' && !std::filesystem::is_directory(o->out, ec)) CheckOutputFile("-o", o->out);
    const int n = ExportModel(o->checkpoint, o->out, o->bf16);
    std::printf("wrote %d parameters to %s\n", n, o->out.c_str());
    exit_code = 0;
  });
}

}  // namespace pplab::cli
