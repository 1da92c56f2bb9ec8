// pplab export: write the lowered per-rank programs the executor runs.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>

#include "schedules/error.h"
#include "schedules/file_io.h"
#include "schedules/schedule_io.h"
#include "schedules/validate.h"
#include "tools/commands.h"
#include "tools/output_files.h"
#include "tools/plan_options.h"

namespace pplab::cli {
namespace {

struct ExportOptions {
  PlanOptions plan;
  std::string out_path;
  std::string format = "json";
};

int RunExport(const ExportOptions& o) {
  CheckOutputFiles({{"--output", o.out_path == "-" ? "" : o.out_path}}, {{"--plan", o.plan.plan_file}});
  const Schedule schedule = BuildSchedule(o.plan);
  // A file no reader would take back.
  if (static_cast<int64_t>(schedule.NumActions()) > kMaxFileActions) {
    throw Error("export: '" + schedule.name + "' has " + std::to_string(schedule.NumActions()) +
                " actions, more than a schedule file may hold (" + std::to_string(kMaxFileActions) +
                "): fewer ranks or microbatches");
  }
  const ValidationReport report = Validate(schedule);
  if (!report.ok()) {
    std::fprintf(stderr, "%s", FormatReport(schedule, report).c_str());
    return 1;
  }
  const std::string text = o.format == "csv"           ? ScheduleToPytorchCsv(schedule)
                           : o.format == "csv-compute" ? ScheduleToPytorchComputeCsv(schedule)
                                                       : ScheduleToJson(schedule);
  if (o.out_path.empty() || o.out_path == "-") {
    std::fwrite(text.data(), 1, text.size(), stdout);
  } else {
    WriteTextFile(o.out_path, text);
    // The actions the file holds: PyTorch's compute-only CSV leaves the
    // messages (and UNSHARD/RESHARD) out.
    const size_t written = o.format == "csv-compute" ? schedule.NumComputeActions() : schedule.NumActions();
    std::fprintf(stderr, "wrote %s: %s, %d ranks, %zu %sactions\n", o.out_path.c_str(), schedule.name.c_str(),
                 schedule.ranks, written, o.format == "csv-compute" ? "compute " : "");
  }
  return 0;
}

}  // namespace

void SetupExport(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<ExportOptions>();
  CLI::App* sub = app.add_subcommand("export", "write the lowered per-rank programs (plan.json) the executor runs");
  AddPlanFlags(*sub, o->plan);
  sub->add_option("-o,--output", o->out_path, "output file ('-' or absent: standard output)");
  sub->add_option("--format", o->format,
                  "json (pplab), csv (PyTorch pipelining with comms: _load_csv(f, format=\"compute_comms\")) or "
                  "csv-compute (compute only: _load_csv(f))")
      ->check(CLI::IsMember({"json", "csv", "csv-compute"}))
      ->capture_default_str();
  sub->callback([o, &exit_code] { exit_code = RunExport(*o); });
}

}  // namespace pplab::cli
