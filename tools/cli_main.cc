#include "tools/cli_main.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <new>

#include "schedules/error.h"
#include "schedules/one_line.h"

namespace pplab::cli {
namespace {

std::string& StoredProgramName() {
  static std::string name = "pplab";
  return name;
}

// Every value of the option must parse to a finite number; the range and
// format checks of the option itself run too.
const CLI::Validator kFinite(
    [](std::string& value) -> std::string {
      char* end = nullptr;
      const double x = std::strtod(value.c_str(), &end);
      if (end != value.c_str() && !std::isfinite(x)) return "must be a finite number, got " + value;
      return "";
    },
    "");

// An unsigned option's value must not be negative (CLI11 parses "-1" into
// an unsigned integer as 2^64 - 1), nor past 2^64 - 1.
const CLI::Validator kNotNegative(
    [](std::string& value) -> std::string {
      const size_t first = value.find_first_not_of(" \t");
      if (first != std::string::npos && value[first] == '-') return "must be a non-negative integer, got " + value;
      // CLI11 reads a value past 2^64 - 1 as 2^64 - 1.
      errno = 0;
      std::strtoull(value.c_str(), nullptr, 0);
      if (errno == ERANGE) return "must be at most 2^64 - 1, got " + value;
      return "";
    },
    "");

// CLI11 reads an integer with a leading 0 as octal (-k 010 was 8, 08 was
// out of range) and 0x as hexadecimal. pplab's integers are decimal: the
// leading zeros go before any other check sees the value, and a 0x, 0o or
// 0b prefix is refused.
const CLI::Validator kDecimal(
    [](std::string& value) -> std::string {
      const size_t first = value.find_first_not_of(" \t");
      if (first == std::string::npos) return "must be a whole number in decimal digits, got an empty value";
      const size_t digits = first + (value[first] == '-' || value[first] == '+' ? 1 : 0);
      if (digits + 1 < value.size() && value[digits] == '0' &&
          std::isalpha(static_cast<unsigned char>(value[digits + 1]))) {
        return "must be a decimal integer, got " + value;
      }
      size_t zeros = 0;
      while (digits + zeros + 1 < value.size() && value[digits + zeros] == '0' &&
             std::isdigit(static_cast<unsigned char>(value[digits + zeros + 1]))) {
        ++zeros;
      }
      value.erase(digits, zeros);
      // Blanks after the digits, which CLI11 then read as "not in range".
      value.erase(value.find_last_not_of(" \t") + 1);
      // Anything but digits then: CLI11 said "Value 1e3 not in range 0 to
      // 1048576" of 1e3, 1024.0 or 8x, as if the number were too large.
      if (digits >= value.size() || value.find_first_not_of("0123456789", digits) != std::string::npos) {
        return "must be a whole number in decimal digits, got " + value;
      }
      return "";
    },
    "");

// An input file named by the empty string: `--plan ''` (say, from an unset
// shell variable) was taken as no --plan at all, and the command ran
// another schedule with exit 0.
const CLI::Validator kNonEmptyFile(
    [](std::string& value) -> std::string {
      return value.empty() ? "an empty file name (leave the flag out for none)" : "";
    },
    "");

// The flags that name a file or folder to read, where the empty string
// would otherwise read as the flag left out. (Output flags are not among
// them: `train --out ''` means no outputs.) show's --trace is its input;
// train's is an output.
bool NamesAnInput(const CLI::App& sub, const CLI::Option& opt) {
  static const char* const kInputs[] = {"--plan",      "--cost",       "--devices-from", "--sim-cost",
                                        "--init-from", "--checkpoint", "--tokenizer",    "--data"};
  for (const char* name : kInputs) {
    if (opt.check_name(name)) return true;
  }
  return sub.get_name() == "show" && opt.check_name("--trace");
}

void RefuseEmptyInputs(CLI::App& app) {
  for (CLI::Option* opt : app.get_options()) {
    if (NamesAnInput(app, *opt)) opt->check(kNonEmptyFile);
  }
  for (CLI::App* sub : app.get_subcommands({})) RefuseEmptyInputs(*sub);
}

// A comma list with an empty entry ("1f1b," or "4,,8"): CLI11 drops the
// entry, so the list ran one short with exit 0. "" names the first such
// value of the subcommand's comma-list options, else the error line.
std::string EmptyListEntry(CLI::App& app, int argc, char** argv) {
  if (argc < 2) return "";
  CLI::App* sub = nullptr;
  for (CLI::App* s : app.get_subcommands({})) {
    if (s->get_name() == argv[1]) sub = s;
  }
  if (sub == nullptr) return "";
  const CLI::Option* list = nullptr;  // the comma-list option whose values follow
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    std::string value;
    bool has_value = false;
    if (arg.size() > 1 && arg[0] == '-' && !std::isdigit(static_cast<unsigned char>(arg[1]))) {
      const size_t eq = arg.find('=');
      const std::string name = arg.substr(0, eq);
      const CLI::Option* opt = sub->get_option_no_throw(name);
      list = opt != nullptr && opt->get_delimiter() == ',' ? opt : nullptr;
      if (list == nullptr || eq == std::string::npos) continue;
      value = arg.substr(eq + 1);
      has_value = true;
    } else if (list != nullptr) {
      value = arg;
      has_value = true;
    }
    if (!has_value || value.find(',') == std::string::npos) continue;
    if (value.front() == ',' || value.back() == ',' || value.find(",,") != std::string::npos) {
      return list->get_name() + ": '" + value + "' has an empty entry (a comma too many)";
    }
  }
  return "";
}

}  // namespace

void RefuseBadNumbers(CLI::App& app) {
  for (CLI::Option* opt : app.get_options()) {
    const std::string type = opt->get_type_name();
    if (type.compare(0, 3, "INT") == 0 || type.compare(0, 4, "UINT") == 0) opt->transform(kDecimal);
    if (type.compare(0, 5, "FLOAT") == 0) opt->check(kFinite);
    if (type.compare(0, 4, "UINT") == 0) opt->check(kNotNegative);
  }
  for (CLI::App* sub : app.get_subcommands({})) RefuseBadNumbers(*sub);
}

const std::string& ProgramName() { return StoredProgramName(); }

std::string ShellWord(const std::string& word) {
  const bool plain = !word.empty() && std::all_of(word.begin(), word.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || std::strchr("_-./:,+=@%", c) != nullptr;
  });
  if (plain) return word;
  std::string out = "'";
  for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

int RunCli(CLI::App& app, int argc, char** argv, const int& exit_code) {
  // pplab-train and its workers learn the name from pplab (cmd_forward_train.cpp).
  if (const char* name = std::getenv(kProgramNameEnv); name != nullptr && *name != '\0') {
    StoredProgramName() = name;
  } else if (argc > 0 && argv[0] != nullptr && argv[0][0] != '\0') {
    StoredProgramName() = argv[0];
  }
  RefuseBadNumbers(app);
  RefuseEmptyInputs(app);
  // A flag CLI11 refuses gets the one line every other error gets, not
  // CLI11's two (the error, then "Run with --help for more information.").
  // It keeps CLI11's exit code (105 for a value out of range, say).
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    std::string what = e.what();
    std::replace(what.begin(), what.end(), '\n', ' ');
    return "pplab: error: " + what + "\n";
  });
  std::string known;
  bool found = false;
  for (const CLI::App* sub : app.get_subcommands({})) {
    known += (known.empty() ? "" : ", ") + sub->get_name();
    found = found || (argc > 1 && sub->get_name() == argv[1]);
  }
  if (argc > 1 && argv[1][0] != '-' && !found) {
    std::fprintf(stderr, "pplab: error: unknown command '%s' (commands: %s)\n", argv[1], known.c_str());
    return 2;
  }
  if (const std::string empty = EmptyListEntry(app, argc, argv); !empty.empty()) {
    std::fprintf(stderr, "pplab: error: %s\n", ControlEscaped(empty).c_str());
    return 105;  // CLI11's code for a value a check refuses
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const pplab::Error& e) {
    std::fprintf(stderr, "pplab: error: %s\n", ControlEscaped(e.what()).c_str());
    return 2;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "pplab: error: out of memory\n");
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pplab: error: %s\n", OneLineError(e.what()).c_str());
    return 2;
  }
  // What the command printed must have reached its reader: a full disk, or
  // a printf short of memory, is an error, not a shorter output.
  std::cout.flush();
  errno = 0;
  const bool flushed = std::fflush(stdout) == 0;
  if (!flushed || std::ferror(stdout) || !std::cout.good()) {
    const int err = errno;
    std::fprintf(stderr, "pplab: error: cannot write standard output%s%s\n", err != 0 ? ": " : "",
                 err != 0 ? std::strerror(err) : "");
    return exit_code != 0 ? exit_code : 2;
  }
  return exit_code;
}

}  // namespace pplab::cli
