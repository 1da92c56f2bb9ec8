// The SVG picture's memory rows (traces/render_svg.h): each rank's bytes as
// a step curve, its peak, the shared scale of a stack, and the rows left out.
#include <catch2/catch.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "schedules/generators.h"
#include "sim/simulator.h"
#include "tests/traces/render_svg_test_support.h"
#include "tests/traces/render_test_support.h"
#include "traces/render_svg.h"

namespace pplab::render_memory_test {
namespace {

std::string PathD(const std::string& tag) {
  const size_t at = tag.find(" d=\"");
  REQUIRE(at != std::string::npos);
  return tag.substr(at + 4, tag.find('"', at + 4) - at - 4);
}

std::string Px(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

}  // namespace

TEST_CASE("svg memory rows: each rank's bytes as a step curve under the lanes, peak and scale named", "[render]") {
  const std::string svg = RenderSvg(TinyWithMemory(), {"mem", 1200, false});
  CHECK(XmlProblem(svg) == "");
  const std::vector<std::string> rows = Tags(svg, "<rect class=\"memory-lane\"");
  const std::vector<std::string> paths = Tags(svg, "<path class=\"memory\"");
  REQUIRE(rows.size() == 2);
  REQUIRE(paths.size() == 2);
  const std::vector<std::string> lanes = Tags(svg, "<rect class=\"lane\"");
  CHECK(Attr(rows[0], "y") > Attr(lanes[1], "y") + Attr(lanes[1], "height"));
  CHECK(Attr(rows[1], "y") > Attr(rows[0], "y"));
  // Makespan 9 ms over 1200 - 64 - 24 = 1112 px from x = 64; 2 MB fills the
  // row's 16 px, 1 MB half of it.
  const auto x = [](double ms) { return Px(64 + 1112 * ms / 9); };
  for (int r = 0; r < 2; ++r) {
    const double top = Attr(rows[r], "y");
    const double height = Attr(rows[r], "height");
    CHECK(height == 16);
    const std::string full = Px(top), half = Px(top + height / 2), zero = Px(top + height);
    const std::string expected = r == 0
                                     ? "M64.00 " + zero + " H" + x(1) + " V" + half + " H" + x(2) + " V" + full + " H" +
                                           x(6) + " V" + half + " H" + x(9) + " V" + zero + " H1176.00 V" + zero + " Z"
                                     : "M64.00 " + zero + " H" + x(2) + " V" + half + " H" + x(4) + " V" + zero + " H" +
                                           x(5) + " V" + half + " H" + x(7) + " V" + zero + " H1176.00 V" + zero + " Z";
    CHECK(PathD(paths[r]) == expected);
  }
  CHECK(CountOf(svg, ">mem 0</text>") == 1);
  CHECK(CountOf(svg, ">mem 1</text>") == 1);
  CHECK(CountOf(svg, ">peak 2.00 MB at 2.000 ms</text>") == 1);
  CHECK(CountOf(svg, ">peak 1.00 MB at 2.000 ms</text>") == 1);
  CHECK(CountOf(svg, "<title>rank 0 peak 2.00 MB at 2.000 ms</title>") == 1);
  CHECK(CountOf(svg, ">activation bytes, row height = 2.00 MB</text>") == 1);
}

TEST_CASE("svg memory rows are left out without samples or when turned off, the rest unchanged", "[render]") {
  const Timeline without = Tiny1F1B();
  const Timeline with = TinyWithMemory();
  SvgOptions off{"mem", 1200, true};
  off.show_memory = false;
  CHECK(RenderSvg(with, off) == RenderSvg(without, off));
  const std::string plain = RenderSvg(without, {"mem", 1200, true});
  CHECK(plain == RenderSvg(without, off));
  CHECK(CountOf(plain, "memory") == 0);
  // Per rank: the row, the curve and the peak's text.
  CHECK(CountOf(RenderSvg(with, {"mem", 1200, true}), "class=\"memory") == 6);
}

TEST_CASE("svg memory rows share one scale across a stack, clamp to the row and the plot", "[render]") {
  const Timeline simulated = TinyWithMemory();
  Timeline measured = Tiny1F1B();
  measured.source = "measured";
  // A negative sample draws at the baseline, one past the makespan at the
  // plot's right edge; 1 MB is half of the stack's 2 MB scale.
  measured.memory = {{0, MsToNs(1), 1000000}, {0, MsToNs(2), -5}, {0, MsToNs(20), 1000000}};
  Timeline plain = Tiny1F1B();
  plain.source = "other";
  const std::string svg = RenderSvgStack({&simulated, &plain, &measured}, {"stack", 1200, false});
  CHECK(XmlProblem(svg) == "");
  const std::vector<std::string> rows = Tags(svg, "<rect class=\"memory-lane\"");
  const std::vector<std::string> paths = Tags(svg, "<path class=\"memory\"");
  REQUIRE(rows.size() == 4);   // two ranks each for the simulated and measured blocks
  REQUIRE(paths.size() == 3);  // measured rank 1 has no samples
  const double top = Attr(rows[2], "y");
  const std::string half = Px(top + 8), zero = Px(top + 16);
  CHECK(PathD(paths[2]) == "M64.00 " + zero + " H" + Px(64 + 1112 / 9.0) + " V" + half + " H" +
                               Px(64 + 2 * 1112 / 9.0) + " V" + zero + " H1176.00 V" + half + " H1176.00 V" + zero +
                               " Z");
  CHECK(CountOf(svg, ">activation bytes, row height = 2.00 MB</text>") == 1);
}

TEST_CASE("svg memory rows of a simulated run name each rank's simulated peak", "[render]") {
  const Schedule s = Generate1F1B(4, 8);
  StageCost c;
  c.forward = MsToNs(1);
  c.backward = MsToNs(2);
  c.activation_bytes = 3000000;
  const SimResult result = Simulate(s, CostModel::Uniform(s.stages, c, {}));
  const std::string svg = RenderSvg(result.timeline, {"1f1b", 1200, false});
  CHECK(XmlProblem(svg) == "");
  CHECK(Tags(svg, "<path class=\"memory\"").size() == 4);
  for (const RankMetrics& m : result.per_rank) {
    INFO("rank " << m.rank);
    // 1F1B holds K - r stashes at its peak.
    CHECK(m.peak_activation_bytes == 3000000 * (4 - m.rank));
    const std::string peak = "peak " + Px(m.peak_activation_bytes / 1e6) + " MB at ";
    CHECK(svg.find("<title>rank " + std::to_string(m.rank) + " " + peak) != std::string::npos);
  }
  CHECK(CountOf(svg, ">activation bytes, row height = 12.00 MB</text>") == 1);
}

}  // namespace pplab::render_memory_test
