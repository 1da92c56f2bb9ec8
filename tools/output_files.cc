#include "tools/output_files.h"

#include <sys/stat.h>

#include <filesystem>

#include "models/llama_config.h"
#include "schedules/error.h"
#include "schedules/file_io.h"

namespace pplab::cli {

void CheckOutputFile(const std::string& flag, const std::string& path) {
  // Other tools read "-" as standard output; a file of that name is rarely
  // what was meant (export and sweep take "-" so, and do not ask this).
  if (path == "-") {
    throw Error(flag + ": '-' is standard output only for export and sweep; give a file (./- for one named '-')");
  }
  try {
    CheckWritable(path);
  } catch (const Error& e) {
    throw Error(flag + ": " + e.what());
  }
}

void CheckOutputFiles(const std::vector<FlagPath>& outputs, const std::vector<FlagPath>& inputs) {
  for (const FlagPath& out : outputs) {
    if (!out.path.empty()) CheckOutputFile(out.flag, out.path);
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (outputs[i].path.empty()) continue;
    for (size_t j = i + 1; j < outputs.size() + inputs.size(); ++j) {
      const bool input = j >= outputs.size();
      const FlagPath& other = input ? inputs[j - outputs.size()] : outputs[j];
      if (other.path.empty() || !SameFile(outputs[i].path, other.path)) continue;
      // An input names a file only where one is (`--model small` is a preset).
      std::error_code ec;
      if (input && !std::filesystem::is_regular_file(other.path, ec)) continue;
      // Named by both paths where they differ (a link, "./x"): the one given
      // to each flag.
      const std::string named = outputs[i].path == other.path
                                    ? " both name " + other.path
                                    : " name one file (" + outputs[i].path + " and " + other.path + ")";
      throw Error(
          outputs[i].flag + " and " + other.flag + named +
          (input ? " (the output would replace a file the command reads)" : " (one would write over the other)"));
    }
  }
}

namespace {

bool IsFolder(const std::string& path) {
  struct stat info {};
  return stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
}

std::string InFolder(const std::string& folder, const std::string& name) {
  return folder + (folder.back() == '/' ? "" : "/") + name;
}

}  // namespace

FlagPath ModelInput(const std::string& model) {
  return {"--model", LlamaConfigPath(model)};  // "" for a preset, which CheckOutputFiles skips
}

std::vector<FlagPath> WeightInputs(const std::string& flag, const std::string& path) {
  if (path.empty() || !IsFolder(path)) return {{flag, path}};
  std::vector<FlagPath> inputs;
  for (const std::string& name : ListDirectory(path)) {
    if (EndsWith(name, ".safetensors") || name == "model.safetensors.index.json") {
      inputs.push_back({flag, InFolder(path, name)});
    }
  }
  return inputs;
}

}  // namespace pplab::cli
