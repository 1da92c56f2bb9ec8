// pplab validate FILE: exit 0 when the schedule is valid, 1 when it is not
// (with the report), 2 when the file cannot be used.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>

#include "schedules/lowering.h"
#include "schedules/schedule_io.h"
#include "schedules/validate.h"
#include "tools/commands.h"

namespace pplab::cli {
namespace {

int RunValidate(const std::string& path) {
  Schedule schedule = LoadScheduleFile(path);
  bool lowered_here = false;
  const ValidationReport report = ValidateFromFile(schedule, &lowered_here);
  if (lowered_here) std::printf("(compute-only input: checked after inserting SEND/RECV)\n");
  std::printf("%s", FormatReport(schedule, report).c_str());
  return report.ok() ? 0 : 1;
}

}  // namespace

void SetupValidate(CLI::App& app, int& exit_code) {
  auto path = std::make_shared<std::string>();
  CLI::App* sub = app.add_subcommand(
      "validate", "check a schedule file (JSON or PyTorch CSV): completeness, send/recv matching, deadlock");
  sub->add_option("file", *path, "schedule file")->required();
  sub->callback([path, &exit_code] { exit_code = RunValidate(*path); });
}

}  // namespace pplab::cli
