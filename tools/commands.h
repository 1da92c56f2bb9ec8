// The pplab subcommands: each SetupX adds one subcommand to `app`, binds its
// flags and, when it is chosen, runs it and stores its exit code in
// `exit_code`. Library errors (pplab::Error) propagate to main().
#pragma once

#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace pplab::cli {

// The help of --model, which plan, train and profile read alike
// (models/llama_config.h: LoadLlamaConfig).
inline constexpr const char* kModelFlagHelp =
    "preset (tiny, small, default), a pplab model config JSON file, or a Hugging Face config.json (or its "
    "model's folder) of a Llama, Mistral, Qwen2 or Qwen3";

void SetupSchedules(CLI::App& app, int& exit_code);
void SetupSimulate(CLI::App& app, int& exit_code);
void SetupCompare(CLI::App& app, int& exit_code);
void SetupSweep(CLI::App& app, int& exit_code);
void SetupExport(CLI::App& app, int& exit_code);
void SetupValidate(CLI::App& app, int& exit_code);
void SetupRender(CLI::App& app, int& exit_code);
void SetupShow(CLI::App& app, int& exit_code);
void SetupBench(CLI::App& app, int& exit_code);
void SetupStats(CLI::App& app, int& exit_code);
void SetupDiff(CLI::App& app, int& exit_code);
void SetupExplain(CLI::App& app, int& exit_code);
void SetupPlan(CLI::App& app, int& exit_code);
// In builds with SentencePiece (PPLAB_WITH_DATA), which the tokenizer needs.
void SetupTokenize(CLI::App& app, int& exit_code);

// The LibTorch commands, in the `pplab-train` executable.
// `argv` is the whole command line, which the launcher hands to the workers.
void SetupTrain(CLI::App& app, int& exit_code, const std::vector<std::string>& argv);
void SetupExportModel(CLI::App& app, int& exit_code);
void SetupGenerate(CLI::App& app, int& exit_code);
// `argv` is the whole command line, which the launcher hands to the workers.
void SetupProfile(CLI::App& app, int& exit_code, const std::vector<std::string>& argv);

// In `pplab`: train, export-model, generate and profile, each of which execs
// `pplab-train` beside the running executable with the whole command line
// `argv` (a one-line error when it is missing: a build without LibTorch).
void SetupTrainingCommands(CLI::App& app, const std::vector<std::string>& argv);

}  // namespace pplab::cli
