// The files a command writes, checked before its work: a command that can
// only fail once it has worked (a long simulation, a search, a training run)
// says so at once, and no output replaces another or a file it reads.
#pragma once

#include <string>
#include <vector>

namespace pplab::cli {

// A file a flag names ("--trace", "-o", or a positional's name), "" for none.
struct FlagPath {
  std::string flag;
  std::string path;
};

// CheckWritable(path) for the output `flag` names: its error starts "FLAG: ".
// "-" is refused: a command that writes standard output for it passes "".
void CheckOutputFile(const std::string& flag, const std::string& path);

// Each output (those with a path) must be writable (CheckOutputFile), and
// none may name the same file (SameFile) as another output or an existing
// input.
// Throws pplab::Error naming both flags and the path.
void CheckOutputFiles(const std::vector<FlagPath>& outputs, const std::vector<FlagPath>& inputs = {});

// The file `--model` names: a config file, a model folder's config.json, or
// "" for a preset (LoadLlamaConfig's rule, models/llama_config.h).
FlagPath ModelInput(const std::string& model);

// The files `flag` (--init-from) names: a .safetensors file, or a model
// folder's .safetensors files and model.safetensors.index.json.
std::vector<FlagPath> WeightInputs(const std::string& flag, const std::string& path);

}  // namespace pplab::cli
