// pplab render TRACE... -o OUT.svg: the timeline picture of one trace, or of
// several stacked on one time axis (e.g. simulated above measured), each
// panel labelled with its file name or a --labels entry.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>

#include "schedules/error.h"
#include "schedules/file_io.h"
#include "tools/commands.h"
#include "tools/output_files.h"
#include "traces/chrome_trace.h"
#include "traces/render_svg.h"

namespace pplab::cli {
namespace {

struct RenderOptions {
  std::vector<std::string> traces;
  std::string out_path;
  std::string title;
  std::vector<std::string> labels;  // one per trace; default: file name (source)
  int width = 1200;
  bool show_comm = false;
  bool no_memory = false;
};

// "runs/sim.json" -> "sim.json (simulated)".
std::string DefaultLabel(const std::string& path, const Timeline& t) {
  const size_t slash = path.find_last_of('/');
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  return t.source.empty() ? base : base + " (" + t.source + ")";
}

int RunRender(const RenderOptions& o) {
  if (!o.labels.empty() && o.labels.size() != o.traces.size()) {
    throw Error("--labels: " + std::to_string(o.labels.size()) + " labels for " + std::to_string(o.traces.size()) +
                " traces (give one per trace)");
  }
  std::vector<Timeline> timelines;
  std::vector<FlagPath> inputs;
  for (const std::string& path : o.traces) inputs.push_back({"a trace", path});
  if (o.out_path.empty()) throw Error("--output: an empty name; give the SVG file to write");
  CheckOutputFiles({{"--output", o.out_path}}, inputs);
  for (const std::string& path : o.traces) timelines.push_back(TimelineFromChromeTrace(ReadTextFile(path), path));
  SvgOptions svg;
  svg.title = o.title.empty() ? timelines.front().name : o.title;
  svg.width_px = o.width;
  svg.show_comm = o.show_comm;
  svg.show_memory = !o.no_memory;
  std::string text;
  if (timelines.size() == 1 && o.labels.empty()) {
    text = RenderSvg(timelines.front(), svg);
  } else {
    std::vector<const Timeline*> stack;
    std::vector<std::string> labels = o.labels;
    for (size_t i = 0; i < timelines.size(); ++i) {
      stack.push_back(&timelines[i]);
      if (o.labels.empty()) labels.push_back(DefaultLabel(o.traces[i], timelines[i]));
    }
    text = RenderSvgStack(stack, svg, labels);
  }
  WriteTextFile(o.out_path, text);
  std::printf("picture written to %s\n", o.out_path.c_str());
  return 0;
}

}  // namespace

void SetupRender(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<RenderOptions>();
  CLI::App* sub = app.add_subcommand("render", "draw trace files (from simulate --trace or train) as an SVG timeline");
  sub->add_option("traces", o->traces, "one trace, or several to stack on one time axis")->required();
  sub->add_option("-o,--output", o->out_path, "SVG file to write")->required();
  sub->add_option("--title", o->title, "title (default: the schedule name)");
  sub->add_option("--labels", o->labels, "comma-separated panel labels, one per trace (default: file names)")
      ->delimiter(',');
  sub->add_option("--width", o->width,
                  "width in pixels of the timeline (the picture widens where a line of its text needs more)")
      ->check(CLI::Range(200, 100000))
      ->capture_default_str();
  sub->add_flag("--comm", o->show_comm, "also draw SEND/RECV");
  sub->add_flag("--no-memory", o->no_memory, "leave out the memory rows (drawn where a trace has activation bytes)");
  sub->callback([o, &exit_code] { exit_code = RunRender(*o); });
}

}  // namespace pplab::cli
