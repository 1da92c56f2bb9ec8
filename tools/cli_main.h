// What the two executables' main() share: `pplab` (the offline commands, no
// LibTorch) and `pplab-train` (train, generate, export-model, profile).
#pragma once

#include <string>

namespace CLI {
class App;
}

namespace pplab::cli {

// Adds checks to every numeric option of `app` and its subcommands (scalars
// and lists alike): a floating-point one (CLI11 type FLOAT) refuses NaN and
// infinities, an unsigned one (UINT) a negative value; CLI11 then names the
// flag ("--lr: ... must be a finite number"). CLI11 reads "nan" and "inf" as
// numbers, a range check lets NaN through, and "-1" parses into an unsigned
// integer as 2^64 - 1, so every command needs this; RunCli applies it once.
void RefuseBadNumbers(CLI::App& app);

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

// `word` as one word of a POSIX shell command line: as it is when it holds
// only characters no shell reads specially (letters, digits and _ - . / :
// , + = @ %), else in single quotes ('it'\''s'). For the commands pplab
// prints to be pasted: a path with a space broke plan's train line.
std::string ShellWord(const std::string& word);
constexpr const char* kProgramNameEnv = "PPLAB_PROGRAM";

}  // namespace pplab::cli
