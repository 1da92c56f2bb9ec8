// What the two executables' main() share: `pplab` (the offline commands, no
// LibTorch) and `pplab-train` (train, generate, export-model, profile).
#pragma once

#include <string>

namespace CLI {
class App;
}

namespace pplab::cli {

// Adds a check to every floating-point option of `app` and its subcommands
// (CLI11 type FLOAT, scalars and lists alike) that refuses NaN and
// infinities; CLI11 then names the flag ("--lr: ... must be a finite
// number"). CLI11 reads "nan" and "inf" as numbers and a range check lets
// NaN through, so every command needs this; main() applies it once.
void RefuseNonFiniteNumbers(CLI::App& app);

// Parses and runs the chosen subcommand: refuses an unknown command with the
// list of known ones, catches every error and prints it as one line
// ("pplab: error: ..."), and returns the exit code (the subcommand's
// `exit_code`, 2 for an error, CLI11's code for a flag it rejects). The one
// try/catch of both executables.
int RunCli(CLI::App& app, int argc, char** argv, const int& exit_code);

// The name the user ran pplab by (argv[0] as given, e.g. "build/pplab"),
// for the commands pplab prints for the user to run next: pplab is usually
// not on PATH. "pplab" until RunCli() has seen argv. pplab hands it to
// pplab-train, and so to train's workers, in $PPLAB_PROGRAM.
const std::string& ProgramName();
constexpr const char* kProgramNameEnv = "PPLAB_PROGRAM";

}  // namespace pplab::cli
