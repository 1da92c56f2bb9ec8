// pplab simulate: cost one plan and report its timeline figures.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>

#include "schedules/file_io.h"
#include "sim/simulator.h"
#include "tools/commands.h"
#include "tools/plan_options.h"
#include "tools/report.h"
#include "traces/chrome_trace.h"
#include "traces/render_svg.h"

namespace pplab::cli {
namespace {

struct SimulateOptions {
  PlanOptions plan;
  std::string trace_path;
  std::string svg_path;
  bool json = false;
};

int RunSimulate(const SimulateOptions& o) {
  const Schedule schedule = BuildSchedule(o.plan);
  const CostModel costs = BuildCostModel(o.plan, schedule);
  const SimResult result = Simulate(schedule, costs);
  const nlohmann::json summary = SimulationJson(schedule, costs, result);
  if (!o.trace_path.empty()) WriteTextFile(o.trace_path, TimelineToChromeTrace(result.timeline));
  if (!o.svg_path.empty()) {
    SvgOptions svg;
    svg.title = schedule.name + "  K=" + std::to_string(schedule.ranks) + "  S=" + std::to_string(schedule.stages) +
                "  M=" + std::to_string(schedule.microbatches);
    WriteTextFile(o.svg_path, RenderSvg(result.timeline, svg));
  }
  if (o.json) {
    std::printf("%s\n", summary.dump(2).c_str());
  } else {
    std::printf("%s", SimulationText(summary).c_str());
    if (!o.trace_path.empty()) std::printf("trace written to %s\n", o.trace_path.c_str());
    if (!o.svg_path.empty()) std::printf("picture written to %s\n", o.svg_path.c_str());
  }
  return 0;
}

}  // namespace

void SetupSimulate(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<SimulateOptions>();
  CLI::App* sub = app.add_subcommand("simulate", "simulate one schedule and report makespan, bubble, memory");
  AddPlanFlags(*sub, o->plan);
  AddCostFlags(*sub, o->plan);
  AddProfileCheckFlags(*sub, o->plan);
  sub->add_option("--trace", o->trace_path, "write the timeline as a Chrome trace (Perfetto) JSON file");
  sub->add_option("--svg", o->svg_path, "write the timeline picture as SVG");
  sub->add_flag("--json", o->json, "print one JSON object instead of text");
  sub->callback([o, &exit_code] { exit_code = RunSimulate(*o); });
}

}  // namespace pplab::cli
