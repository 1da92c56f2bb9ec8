// pplab show: a compact picture in the terminal, of a simulated plan or of a
// trace file; --steps prints the rank x step program grid instead.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>

#include "schedules/error.h"
#include "schedules/file_io.h"
#include "schedules/validate.h"
#include "sim/simulator.h"
#include "tools/cli_main.h"
#include "tools/commands.h"
#include "tools/plan_options.h"
#include "traces/chrome_trace.h"
#include "traces/render_text.h"

namespace pplab::cli {
namespace {

struct ShowOptions {
  PlanOptions plan;
  std::string trace_path;
  int columns = 100;
  bool steps = false;
  bool no_memory = false;
};

// The picture is ranks x columns characters; past this it is no longer a
// terminal picture and would only exhaust memory.
constexpr long long kMaxCells = 1LL << 26;

// Checked before a plan is simulated, so that a picture too large is refused
// at once, not after simulating a hundred thousand ranks.
// `rows_per_rank`: 2 where a memory row is drawn under each rank's.
void CheckPictureSize(int ranks, int columns, int rows_per_rank = 1) {
  if (static_cast<long long>(ranks) * rows_per_rank * columns > kMaxCells) {
    throw Error("show: " + std::to_string(ranks) + " ranks" + (rows_per_rank > 1 ? " (and their memory rows)" : "") +
                " x --columns " + std::to_string(columns) + " is too large a picture for a terminal; use `" +
                ProgramName() + " render` for an SVG" + (rows_per_rank > 1 ? ", or --no-memory" : ""));
  }
}

void PrintTimeline(const Timeline& timeline, int columns, bool memory) {
  // RenderText draws a memory row under each rank where the timeline has
  // memory: the picture was twice the cells checked (134 M characters).
  CheckPictureSize(timeline.ranks, columns, memory && !timeline.memory.empty() ? 2 : 1);
  const std::string text = RenderText(timeline, columns, memory);
  std::fwrite(text.data(), 1, text.size(), stdout);
}

int RunShow(const ShowOptions& o) {
  if (!o.trace_path.empty()) {
    PrintTimeline(TimelineFromChromeTrace(ReadTextFile(o.trace_path), o.trace_path), o.columns, !o.no_memory);
    return 0;
  }
  CheckAutoLimits(o.plan);
  // A generated plan has --ranks ranks: refuse a picture too large before
  // generating it, as a plan from a file is refused before it is simulated.
  if (!o.steps && o.plan.plan_file.empty()) CheckPictureSize(o.plan.ranks, o.columns);
  const Schedule schedule = BuildSchedule(o.plan);
  if (o.steps) {
    size_t longest = 0;
    for (const Program& p : schedule.programs) longest = std::max(longest, p.size());
    if (static_cast<long long>(schedule.ranks) * static_cast<long long>(longest) > kMaxCells) {
      throw Error("show --steps: " + std::to_string(schedule.ranks) + " ranks x " + std::to_string(longest) +
                  " steps is too large a grid for a terminal; `" + ProgramName() +
                  " export` writes the programs to a file");
    }
    std::printf("%s", FormatStepGrid(schedule, 0, static_cast<int>(longest)).c_str());
    return 0;
  }
  CheckPictureSize(schedule.ranks, o.columns);
  PrintTimeline(Simulate(schedule, BuildCostModel(o.plan, schedule)).timeline, o.columns, !o.no_memory);
  return 0;
}

}  // namespace

void SetupShow(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<ShowOptions>();
  CLI::App* sub = app.add_subcommand("show", "print a plan's timeline (or its program grid) in the terminal");
  AddPlanFlags(*sub, o->plan);
  AddCostFlags(*sub, o->plan);
  sub->add_flag("--steps", o->steps, "print the rank x step grid of the lowered programs");
  // A trace is drawn as it is: a plan or cost flag beside it would be
  // dropped without a word, so CLI11 refuses the pair.
  CLI::Option* trace = sub->add_option("--trace", o->trace_path, "show this trace file instead of simulating");
  for (CLI::Option* other : sub->get_options()) {
    if (other != trace && other != sub->get_help_ptr()) trace->excludes(other);
  }
  sub->add_option("--columns", o->columns, "width of the picture in characters")
      ->check(CLI::Range(10, 10000))
      ->capture_default_str();
  sub->add_flag("--no-memory", o->no_memory,
                "leave out the memory rows (drawn where the costs or the trace have activation bytes)");
  sub->callback([o, &exit_code] { exit_code = RunShow(*o); });
}

}  // namespace pplab::cli
