// pplab render TRACE... -o OUT.svg: the timeline picture of one trace, or of
// several stacked on one time axis (e.g. simulated above measured).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>

#include "schedules/file_io.h"
#include "tools/commands.h"
#include "traces/chrome_trace.h"
#include "traces/render_svg.h"

namespace pplab::cli {
namespace {

struct RenderOptions {
  std::vector<std::string> traces;
  std::string out_path;
  std::string title;
  int width = 1200;
  bool show_comm = false;
};

int RunRender(const RenderOptions& o) {
  std::vector<Timeline> timelines;
  for (const std::string& path : o.traces) timelines.push_back(TimelineFromChromeTrace(ReadTextFile(path), path));
  SvgOptions svg;
  svg.title = o.title.empty() ? timelines.front().name : o.title;
  svg.width_px = o.width;
  svg.show_comm = o.show_comm;
  std::string text;
  if (timelines.size() == 1) {
    text = RenderSvg(timelines.front(), svg);
  } else {
    std::vector<const Timeline*> stack;
    for (const Timeline& t : timelines) stack.push_back(&t);
    text = RenderSvgStack(stack, svg);
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
  sub->add_option("--width", o->width, "width in pixels")->check(CLI::Range(200, 100000))->capture_default_str();
  sub->add_flag("--comm", o->show_comm, "also draw SEND/RECV");
  sub->callback([o, &exit_code] { exit_code = RunRender(*o); });
}

}  // namespace pplab::cli
