// The SVG picture of one timeline or a stack of them (traces/render_svg.h):
// boxes, lanes, axis, legend, labels and shades, sends, the idle split, and
// a well-formed document in every case.
#include "traces/render_svg.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "schedules/action_kinds.h"
#include "schedules/generators.h"
#include "sim/simulator.h"
#include "tests/traces/render_svg_test_support.h"
#include "tests/traces/render_test_support.h"
#include "traces/render_text.h"

namespace pplab::render_svg_test {
namespace {

std::string FirstTag(const std::string& svg, const std::string& prefix, size_t from = 0) {
  const size_t at = svg.find(prefix, from);
  return at == std::string::npos ? std::string() : svg.substr(at, svg.find('>', at) - at);
}

std::string FillOf(const std::string& tag) {
  const size_t at = tag.find(" fill=\"");
  return at == std::string::npos ? std::string() : tag.substr(at + 7, 7);
}

}  // namespace

TEST_CASE("svg draws exactly one box per compute event, classed by kind", "[render]") {
  Timeline t = Tiny1F1B();
  t.events.push_back(Event(0, ActionKind::kSendF, 0, 0, 1, 1));
  t.events.push_back(Event(1, ActionKind::kRecvF, 1, 0, 0, 1));
  for (bool show_comm : {false, true}) {
    INFO("show_comm " << show_comm);
    const std::string svg = RenderSvg(t, {"1f1b", 1200, show_comm});
    CHECK(XmlProblem(svg) == "");
    CHECK(CountOf(svg, "<rect class=\"F\"") == 4);
    CHECK(CountOf(svg, "<rect class=\"B\"") == 4);
    CHECK(CountOf(svg, "<rect class=\"I\"") == 0);
    CHECK(CountOf(svg, "<rect class=\"W\"") == 0);
    CHECK(CountOf(svg, "class=\"SEND_F\"") == (show_comm ? 1u : 0u));
    CHECK(CountOf(svg, "class=\"RECV_F\"") == (show_comm ? 1u : 0u));
  }
}

TEST_CASE("svg boxes sit at start/end scaled onto the lane width, in their rank's lane", "[render]") {
  const Timeline t = Tiny1F1B();
  const TimeNs makespan = t.Makespan();
  for (int width : {1200, 640, 300}) {
    const std::string svg = RenderSvg(t, {"", width, false});
    const std::vector<std::string> lanes = Tags(svg, "<rect class=\"lane\"");
    REQUIRE(lanes.size() == 2);
    // The plot keeps the width asked for; the picture widens to its widest
    // line of text, the idle split's (116 characters of 6 px from x = 64:
    // 760 px), which a narrower one cut.
    CHECK(Attr(Tags(svg, "<svg")[0], "width") == std::max(width, 760));
    CHECK(Attr(lanes[0], "width") == width - 64 - 24);
    std::vector<std::string> boxes;
    for (const std::string& tag : Tags(svg, "<rect class=\"")) {
      if (tag.rfind("<rect class=\"F\"", 0) == 0 || tag.rfind("<rect class=\"B\"", 0) == 0) boxes.push_back(tag);
    }
    REQUIRE(boxes.size() == t.events.size());
    for (size_t i = 0; i < boxes.size(); ++i) {
      const TimelineEvent& e = t.events[i];
      const std::string& lane = lanes[e.rank];
      const double px_per_ns = Attr(lane, "width") / static_cast<double>(makespan);
      INFO("width " << width << " box " << boxes[i] << " for " << EventName(e.action));
      CHECK(Attr(boxes[i], "x") == Approx(Attr(lane, "x") + e.start * px_per_ns).margin(0.006));
      CHECK(Attr(boxes[i], "width") == Approx((e.end - e.start) * px_per_ns).margin(0.011));
      CHECK(Attr(boxes[i], "y") == Attr(lane, "y"));
    }
  }
}

TEST_CASE("svg title shows the options title, makespan and bubble", "[render]") {
  const std::string svg = RenderSvg(Tiny1F1B(), {"1f1b  K=2  M=2", 1200, false});
  CHECK(CountOf(svg, ">1f1b  K=2  M=2</text>") == 1);
  CHECK(CountOf(svg, ">makespan 9.000 ms, bubble 33.3%</text>") == 1);
}

TEST_CASE("svg text keeps UTF-8 and escapes markup, and control bytes and broken UTF-8 become U+FFFD", "[render]") {
  const std::string replacement = "\xEF\xBF\xBD";
  const std::string title = std::string("a<b & \xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80") + "\x01" + "\xFF" + "\xC3" + "x" +
                            "\xED\xA0\x80" + "\tz";
  const std::string svg = RenderSvg(Tiny1F1B(), {title, 1200, false});
  // é, € and an emoji pass; \x01, a stray \xFF, a cut \xC3 and a surrogate's three bytes each become one U+FFFD.
  CHECK(CountOf(svg, ">a&lt;b &amp; \xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80" + replacement + replacement + replacement +
                         "x" + replacement + replacement + replacement + "\tz</text>") == 1);
  CHECK(std::none_of(svg.begin(), svg.end(),
                     [](char c) { return (c >= 0 && c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f; }));
}

TEST_CASE("svg text replaces U+FFFE and U+FFFF, which XML does not allow, and keeps U+FFFD and U+FFEF", "[render]") {
  const std::string title =
      "a\xEF\xBF\xBE"
      "b\xEF\xBF\xBF"
      "c\xEF\xBF\xBD"
      "d\xEF\xBF\xAF"
      "e";
  const std::string svg = RenderSvg(Tiny1F1B(), {title, 1200, false});
  CHECK(CountOf(svg,
                ">a\xEF\xBF\xBD"
                "b\xEF\xBF\xBD"
                "c\xEF\xBF\xBD"
                "d\xEF\xBF\xAF"
                "e</text>") == 1);
  CHECK(CountOf(svg, "\xEF\xBF\xBE") == 0);
  CHECK(CountOf(svg, "\xEF\xBF\xBF") == 0);
}

TEST_CASE("svg tooltips name the event and its times, narrow boxes go unlabelled", "[render]") {
  Timeline t = Tiny1F1B();
  t.events.push_back(Event(1, ActionKind::kBackwardWeight, 1, 7, 8, 8.001));
  const std::string svg = RenderSvg(t, {"", 1200, false});
  CHECK(CountOf(svg, "<g><title>F s0 mb1 1.000-2.000 ms</title>") == 1);
  CHECK(CountOf(svg, "<g><title>B s1 mb0 2.000-4.000 ms</title>") == 1);
  // Every 1F1B box is >= 1 ms of 9 ms, far wider than 10 px; the W box is ~0.1 px.
  int labelled = 0;
  for (size_t g = svg.find("<g><title>"); g != std::string::npos; g = svg.find("<g><title>", g + 1)) {
    const std::string group = svg.substr(g, svg.find("</g>", g) - g);
    const bool has_label = group.find("<text") != std::string::npos;
    INFO(group);
    CHECK(has_label == (group.find("W s1 mb7") == std::string::npos));
    labelled += has_label;
  }
  CHECK(labelled == 8);
}

TEST_CASE("svg legend lists the kinds present and the axis ticks are in ms", "[render]") {
  const std::string svg = RenderSvg(Tiny1F1B(), {"", 1200, false});
  CHECK(CountOf(svg, ">F forward</text>") == 1);
  CHECK(CountOf(svg, ">B backward</text>") == 1);
  CHECK(CountOf(svg, ">I input grad</text>") == 0);
  CHECK(CountOf(svg, ">W weight grad</text>") == 0);
  // 9 ms at <= 6 intervals of 1/2/5 x 10^k: a 2 ms step.
  for (const char* tick : {">0 ms</text>", ">2 ms</text>", ">4 ms</text>", ">6 ms</text>", ">8 ms</text>"}) {
    INFO(tick);
    CHECK(CountOf(svg, tick) == 1);
  }
  CHECK(CountOf(svg, ">10 ms</text>") == 0);
}

TEST_CASE("svg escapes XML special characters in every text", "[render]") {
  Timeline t = Tiny1F1B();
  t.name = "a<b>";
  t.source = "me & 'you'";
  const std::string svg = RenderSvgStack({&t}, {"x <&> \"y\"", 800, false});
  CHECK(XmlProblem(svg) == "");
  CHECK(CountOf(svg, ">x &lt;&amp;&gt; &quot;y&quot;</text>") == 1);
  CHECK(CountOf(svg, ">me &amp; &apos;you&apos;: a&lt;b&gt;  (makespan 9.000 ms, bubble 33.3%)</text>") == 1);
}

TEST_CASE("svg of an empty timeline or a zero makespan is a well-formed document without NaN", "[render]") {
  Timeline empty;
  Timeline no_ranks_events;
  no_ranks_events.ranks = 3;
  Timeline instant;
  instant.ranks = 1;
  instant.events = {Event(0, ActionKind::kForward, 0, 0, 0, 0)};
  for (const Timeline* t : {&empty, &no_ranks_events, &instant}) {
    for (bool show_comm : {false, true}) {
      const std::string svg = RenderSvg(*t, {"", 1200, show_comm});
      INFO(svg);
      CHECK(svg.rfind("<svg", 0) == 0);
      CHECK(svg.size() >= 7);
      CHECK(svg.substr(svg.size() - 7) == "</svg>\n");
      CHECK(XmlProblem(svg) == "");
      CHECK(svg.find("nan") == std::string::npos);
      CHECK(svg.find("inf") == std::string::npos);
      CHECK(CountOf(svg, ">makespan 0.000 ms, bubble 0.0%</text>") == 1);
      CHECK(CountOf(svg, "<rect class=\"lane\"") == static_cast<size_t>(t->ranks));
      CHECK(CountOf(svg, "<rect class=\"F\"") == t->events.size());
    }
  }
  const std::string svg = RenderSvg(instant, {"", 1200, false});
  const std::string box = Tags(svg, "<rect class=\"F\"")[0];
  CHECK(Attr(box, "x") == Attr(Tags(svg, "<rect class=\"lane\"")[0], "x"));
  CHECK(Attr(box, "width") == 0);
  CHECK(XmlProblem(RenderSvgStack({}, {})) == "");
  CHECK(XmlProblem(RenderSvgStack({nullptr}, {})) == "");
}

TEST_CASE("svg sends run from the sender's lane to the receiver's lane", "[render]") {
  Timeline t = Tiny1F1B();
  t.events.push_back(Event(0, ActionKind::kSendF, 0, 0, 1, 1.5));
  t.events.push_back(Event(1, ActionKind::kRecvF, 1, 0, 0, 1.5));
  t.events.push_back(Event(1, ActionKind::kSendB, 1, 0, 4, 4));
  t.events.push_back(Event(0, ActionKind::kRecvB, 0, 0, 2, 4));
  const std::string svg = RenderSvg(t, {"", 1200, true});
  const std::vector<std::string> lanes = Tags(svg, "<rect class=\"lane\"");
  REQUIRE(lanes.size() == 2);
  const double top0 = Attr(lanes[0], "y");
  const double bottom0 = top0 + Attr(lanes[0], "height");
  const double top1 = Attr(lanes[1], "y");
  const std::string send_f = Tags(svg, "<line class=\"SEND_F\"").at(0);
  CHECK(Attr(send_f, "y1") == bottom0);
  CHECK(Attr(send_f, "y2") == top1);
  CHECK(Attr(send_f, "x2") > Attr(send_f, "x1"));
  const std::string send_b = Tags(svg, "<line class=\"SEND_B\"").at(0);
  CHECK(Attr(send_b, "y1") == top1);
  CHECK(Attr(send_b, "y2") == bottom0);
  CHECK(CountOf(svg, ">SEND transfer</text>") == 1);
}

TEST_CASE("svg stack shares one time axis and labels each block", "[render]") {
  const Timeline simulated = Tiny1F1B();
  Timeline measured = Tiny1F1B();
  measured.source = "measured";
  for (TimelineEvent& e : measured.events) {  // twice as slow
    e.start *= 2;
    e.end *= 2;
  }
  const std::string svg = RenderSvgStack({&simulated, &measured}, {"sim vs real", 1200, false});
  CHECK(XmlProblem(svg) == "");
  const size_t sim_label = svg.find(">simulated: tiny  (makespan 9.000 ms, bubble 33.3%)</text>");
  const size_t real_label = svg.find(">measured: tiny  (makespan 18.000 ms, bubble 33.3%)</text>");
  REQUIRE(sim_label != std::string::npos);
  REQUIRE(real_label != std::string::npos);
  CHECK(sim_label < real_label);
  CHECK(CountOf(svg, "<rect class=\"F\"") == 8);
  CHECK(CountOf(svg, "<line class=\"axis\"") == 1);
  // The simulated block ends halfway along the shared axis.
  const std::vector<std::string> lanes = Tags(svg, "<rect class=\"lane\"");
  REQUIRE(lanes.size() == 4);
  const std::string last_sim_box = Tags(svg, "<rect class=\"B\"").at(1);  // B s0 mb1, ends at 9 ms
  CHECK(Attr(last_sim_box, "x") + Attr(last_sim_box, "width") ==
        Approx(Attr(lanes[0], "x") + Attr(lanes[0], "width") / 2).margin(0.011));
  CHECK(Attr(lanes[2], "y") > Attr(lanes[1], "y"));
}

TEST_CASE("svg stack labels each panel as given and draws equal durations with equal widths", "[render]") {
  const Timeline predicted = Tiny1F1B();
  Timeline measured = Tiny1F1B();
  measured.source = "measured";
  measured.events[3].end += MsToNs(2);  // B s0 mb1 runs 2 ms longer: makespan 11 ms
  const std::string svg = RenderSvgStack({&predicted, &measured}, {"", 1200, false}, {"predicted", "measured run"});
  CHECK(XmlProblem(svg) == "");
  const size_t first = svg.find(">predicted: tiny  (makespan 9.000 ms");
  const size_t second = svg.find(">measured run: tiny  (makespan 11.000 ms");
  REQUIRE(first != std::string::npos);
  REQUIRE(second != std::string::npos);
  CHECK(first < second);
  // F s0 mb0 lasts 1 ms in both panels: same x and width, 1/11 of the plot.
  const std::vector<std::string> f = Tags(svg, "<rect class=\"F\"");
  REQUIRE(f.size() == 8);
  const double plot = Attr(Tags(svg, "<rect class=\"lane\"").at(0), "width");
  CHECK(Attr(f[0], "width") == Approx(plot / 11).margin(0.011));
  CHECK(Attr(f[4], "width") == Approx(Attr(f[0], "width")));
  CHECK(Attr(f[4], "x") == Approx(Attr(f[0], "x")));
  // An empty label falls back to the timeline's source.
  const std::string fallback = RenderSvgStack({&predicted, &measured}, {"", 1200, false}, {"", "real"});
  CHECK(fallback.find(">simulated: tiny  (makespan") != std::string::npos);
  CHECK(fallback.find(">real: tiny  (makespan") != std::string::npos);
}

TEST_CASE("svg output is deterministic", "[render]") {
  const Timeline t = Tiny1F1B();
  CHECK(RenderSvg(t, {"a", 900, true}) == RenderSvg(t, {"a", 900, true}));
  CHECK(RenderSvgStack({&t, &t}, {"a", 900, true}) == RenderSvgStack({&t, &t}, {"a", 900, true}));
}

TEST_CASE("svg: an overlapped F&B is one split box, in the legend", "[render]") {
  StageCost c;
  c.forward = 1000;
  c.backward = 2000;
  const Schedule s = GenerateDualPipeV(2, 4);
  const Timeline t = Simulate(s, CostModel::Uniform(4, c, {})).timeline;
  int overlapped = 0;
  for (const Program& p : s.programs) {
    for (const Action& a : p) overlapped += a.kind == ActionKind::kOverlapFB;
  }
  REQUIRE(overlapped == 6);
  const std::string svg = RenderSvg(t, {});
  auto count = [&](const std::string& needle) {
    int n = 0;
    for (size_t at = svg.find(needle); at != std::string::npos; at = svg.find(needle, at + 1)) ++n;
    return n;
  };
  CHECK(count("<rect class=\"OVERLAP_F_B\"") == overlapped);
  CHECK(count("<rect class=\"OVERLAP_F_B-F\"") == overlapped);
  CHECK(count("<rect class=\"OVERLAP_F_B-B\"") == overlapped);
  // The upper half takes F's fill, the lower half B's, each shaded for its
  // stage: rank 0's first overlap is F of stage 0 (its 1st stage, F's own
  // colour) with B of stage 3 (its 2nd stage, B's colour 60 % towards white).
  auto first_rect = [&](const std::string& cls) {
    const size_t at = svg.find("<rect class=\"" + cls + "\"");
    return at == std::string::npos ? std::string() : svg.substr(at, svg.find('>', at) - at);
  };
  CHECK_THAT(first_rect("OVERLAP_F_B-F"), Catch::Contains("fill=\"#0072B2\""));
  CHECK_THAT(first_rect("OVERLAP_F_B-B"), Catch::Contains("fill=\"#99D8C7\""));
  CHECK_THAT(svg, Catch::Contains("fill=\"#56B4E9\"") && Catch::Contains("F&amp;B overlapped"));
  // The terminal picture shows it as X.
  CHECK_THAT(RenderText(t, 60), Catch::Contains("X"));
}

TEST_CASE("svg gives each of a rank's stages its own shade of the kind's colour, with a legend row each", "[render]") {
  for (const char* name : {"interleaved-1f1b", "looped-bfs", "zb-v", "dualpipev", "interleaved-zb"}) {
    const Schedule s = Generate(name, {4, 16, 2});
    const Timeline t = Simulated(s);
    const std::string svg = RenderSvg(t, {});
    INFO(name);
    CHECK(XmlProblem(svg) == "");
    // Every box's fill depends only on its kind and its stage's place on its
    // rank, and the two places of a kind differ.
    std::map<std::pair<std::string, int>, std::set<std::string>> fills;
    size_t at = 0;
    for (const TimelineEvent& e : t.events) {
      if (!IsCompute(e.action.kind)) continue;
      const std::string cls = KindName(e.action.kind);
      at = svg.find("<rect class=\"" + cls + "\"", at);
      REQUIRE(at != std::string::npos);
      const std::vector<StageId> mine = s.StagesOf(e.rank);
      const int local = static_cast<int>(std::find(mine.begin(), mine.end(), e.action.stage) - mine.begin());
      fills[{cls, local}].insert(FillOf(FirstTag(svg, "<rect", at)));
      ++at;
    }
    std::map<std::string, std::set<std::string>> per_kind;
    for (const auto& [key, set] : fills) {
      CHECK(set.size() == 1);
      per_kind[key.first].insert(set.begin(), set.end());
    }
    for (const auto& [kind, set] : per_kind) {
      INFO(kind);
      CHECK(set.size() == 2);
    }
    CHECK_THAT(svg, Catch::Contains(">1st stage of a rank:</text>") && Catch::Contains(">2nd stage of a rank:</text>"));
    CHECK(CountOf(svg, "<rect class=\"swatch-1\"") == CountOf(svg, "<rect class=\"swatch-0\""));
    CHECK(FillOf(FirstTag(svg, "<rect class=\"swatch-0\"")) != FillOf(FirstTag(svg, "<rect class=\"swatch-1\"")));
  }
  // One stage per rank: one fill per kind, the kind's own, and no stage rows.
  const std::string svg = RenderSvg(Simulated(Generate("zb-h1", {4, 16, 0})), {});
  CHECK(FillOf(FirstTag(svg, "<rect class=\"F\"")) == InfoOf(ActionKind::kForward).fill);
  CHECK(CountOf(svg, "stage of a rank") == 0);
  CHECK(CountOf(svg, "<rect class=\"swatch\"") == 3);
}

TEST_CASE("svg: below the legend, one idle-split line per rank, the parts of pplab explain", "[render][explain]") {
  // Tiny1F1B has no messages: rank 0 waits [2,4) and [6,7) with no cause in
  // the timeline (other); rank 1 starts at 1 and ends at 7 of 9.
  const std::string svg = RenderSvg(Tiny1F1B(), {"tiny", 1200, false});
  CHECK(XmlProblem(svg) == "");
  CHECK(CountOf(svg, "class=\"idle-split\"") == 3);
  CHECK_THAT(svg, Catch::Contains("rank 0 idle 3.000: warm-up 0.000, cool-down 0.000, imbalance 0.000, comm 0.000, "
                                  "shared device 0.000, other 3.000</text>"));
  CHECK_THAT(svg, Catch::Contains("rank 1 idle 3.000: warm-up 1.000, cool-down 2.000, imbalance 0.000, comm 0.000, "
                                  "shared device 0.000</text>"));
  // A simulated GPipe with latency names the stage rank 0 waited for.
  StageCost c;
  c.forward = kNsPerMs;
  c.backward = 2 * kNsPerMs;
  const SimResult sim = Simulate(GenerateGPipe(2, 2), CostModel::Uniform(2, c, Link{kNsPerMs / 2, 0}));
  CHECK_THAT(RenderSvg(sim.timeline, {"g", 1200, false}),
             Catch::Contains("rank 0 idle 4.000: warm-up 0.000, cool-down 0.000, imbalance 3.500 (s1 3.500), comm "
                             "0.500, shared device 0.000</text>"));
}

}  // namespace pplab::render_svg_test
