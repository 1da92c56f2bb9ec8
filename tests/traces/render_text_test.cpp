// The terminal picture of a timeline (traces/render_text.h): rows of
// labelled boxes, bands that wrap under scale lines, and the cell limit.
#include "traces/render_text.h"

#include <catch2/catch.hpp>
#include <cctype>
#include <string>
#include <vector>

#include "schedules/action_kinds.h"
#include "schedules/generators.h"
#include "tests/traces/render_test_support.h"

namespace pplab::render_text_test {
namespace {

// The compute events of `rank` in timeline order.
std::vector<Action> ComputeOf(const Timeline& t, RankId rank) {
  std::vector<Action> out;
  for (const TimelineEvent& e : t.events) {
    if (e.rank == rank && IsCompute(e.action.kind)) out.push_back(e.action);
  }
  return out;
}

// Rank `rank`'s row of a RenderText picture, its bands joined.
std::string RowOf(const std::string& text, RankId rank) {
  const std::string head = "r" + std::to_string(rank) + " ";
  std::string row;
  size_t pos = 0;
  while ((pos = text.find("\n" + head, pos)) != std::string::npos) {
    const size_t open = text.find('|', pos);
    const size_t close = text.find('|', open + 1);
    row += text.substr(open + 1, close - open - 1);
    pos = close;
  }
  return row;
}

// Rank `rank`'s row of a RenderText picture, band by band.
std::vector<std::string> BandsOf(const std::string& text, RankId rank) {
  const std::string head = "\nr" + std::to_string(rank) + " ";
  std::vector<std::string> bands;
  for (size_t pos = text.find(head); pos != std::string::npos; pos = text.find(head, pos + 1)) {
    const size_t open = text.find('|', pos);
    bands.push_back(text.substr(open + 1, text.find('|', open + 1) - open - 1));
  }
  return bands;
}

bool IsDigit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }

}  // namespace

TEST_CASE("text render of 1F1B on 2 ranks matches the hand-drawn rows", "[render]") {
  const Timeline t = Tiny1F1B();
  // 0.5 ms cells: each F spans two cells ("<mb>F"), each B four ("<mb>BBB").
  CHECK(RenderText(t, 18) ==
        "tiny [simulated]: makespan 9.000 ms, bubble 33.3%, 1 cell = 0.500 ms\n"
        "r0 |0F1F....0BBB..1BBB|\n"
        "r1 |..0F0BBB1F1BBB....|\n"
        "legend: F forward, B backward, . idle; a box starts with its microbatch\n");
  // 9 columns would give a 1 ms F one cell, no room for its microbatch and
  // letter: the picture keeps 0.5 ms cells and wraps into bands of 9, each
  // under a scale line.
  CHECK(RenderText(t, 9) ==
        "tiny [simulated]: makespan 9.000 ms, bubble 33.3%, 1 cell = 0.500 ms\n"
        "    0.000 ms to 4.500 ms\n"
        "r0 |0F1F....0|\n"
        "r1 |..0F0BBB1|\n"
        "    4.500 ms to 9.000 ms\n"
        "r0 |BBB..1BBB|\n"
        "r1 |F1BBB....|\n"
        "legend: F forward, B backward, . idle; a box starts with its microbatch\n");
}

TEST_CASE("text render reads times in us where a cell is shorter than 10 us", "[render]") {
  Timeline t = Tiny1F1B();
  // The hand-drawn picture above, 1000 times faster: 0.5 us cells.
  for (TimelineEvent& e : t.events) {
    e.start /= 1000;
    e.end /= 1000;
  }
  CHECK(RenderText(t, 9) ==
        "tiny [simulated]: makespan 9.000 us, bubble 33.3%, 1 cell = 0.500 us\n"
        "    0.000 us to 4.500 us\n"
        "r0 |0F1F....0|\n"
        "r1 |..0F0BBB1|\n"
        "    4.500 us to 9.000 us\n"
        "r0 |BBB..1BBB|\n"
        "r1 |F1BBB....|\n"
        "legend: F forward, B backward, . idle; a box starts with its microbatch\n");
}

TEST_CASE("text render scale lines fit between the bars when the band is wide enough", "[render]") {
  Timeline t = Tiny1F1B();
  for (TimelineEvent& e : t.events) e.end = e.start + (e.end - e.start) / 10;  // 0.1 ms F, 0.2 ms B
  const std::string text = RenderText(t, 40);
  // A 0.1 ms F needs 2 cells: 0.05 ms cells, 144 of them over 7.2 ms, in
  // bands of 40 cells (2 ms).
  CHECK(text.rfind("tiny [simulated]: makespan 7.200 ms, bubble 91.7%, 1 cell = 0.050 ms\n"
                   "   |0.000 ms                        2.000 ms|\n"
                   "r0 |0F..................1F..................|\n",
                   0) == 0);
  CHECK_THAT(text, Catch::Contains("\n   |6.000 ms        7.200 ms|\n"));
}

TEST_CASE("text render shows microbatches of two digits whole", "[render]") {
  Timeline t;
  t.name = "zb";
  t.ranks = 1;
  t.events = {Event(0, ActionKind::kForward, 0, 12, 0, 2), Event(0, ActionKind::kBackwardInput, 0, 12, 2, 4),
              Event(0, ActionKind::kBackwardWeight, 0, 12, 4, 6)};
  CHECK(RenderText(t, 9) ==
        "zb: makespan 6.000 ms, bubble 0.0%, 1 cell = 0.667 ms\n"
        "r0 |12F12I12W|\n"
        "legend: F forward, I input grad, W weight grad, . idle; a box starts with its microbatch\n");
  // Six columns leave two cells a box: it widens to nine and wraps.
  CHECK(RenderText(t, 6) ==
        "zb: makespan 6.000 ms, bubble 0.0%, 1 cell = 0.667 ms\n"
        "    0.000 ms to 4.000 ms\n"
        "r0 |12F12I|\n"
        "    4.000 ms to 6.000 ms\n"
        "r0 |12W|\n"
        "legend: F forward, I input grad, W weight grad, . idle; a box starts with its microbatch\n");
}

TEST_CASE("text render handles no events, idle ranks and columns below 1", "[render]") {
  Timeline empty;
  CHECK(RenderText(empty, 10) == "(unnamed): makespan 0.000 ms, bubble 0.0%, 1 cell = 0.000 ms\n");
  empty.ranks = 2;
  CHECK(RenderText(empty, 4) ==
        "(unnamed): makespan 0.000 ms, bubble 0.0%, 1 cell = 0.000 ms\n"
        "r0 |....|\n"
        "r1 |....|\n"
        "legend: . idle; a box starts with its microbatch\n");
  Timeline t = Tiny1F1B();
  t.ranks = 11;  // ranks 2..10 compute nothing; labels pad to "r10"
  const std::string text = RenderText(t, 0);
  // One column per band: 18 bands of 0.5 ms.
  CHECK(text.rfind("tiny [simulated]: makespan 9.000 ms, bubble 87.9%, 1 cell = 0.500 ms\n"
                   "     0.000 ms to 0.500 ms\nr0  |0|\nr1  |.|\nr2  |.|\n",
                   0) == 0);
  CHECK_THAT(text,
             Catch::EndsWith("r10 |.|\nlegend: F forward, B backward, . idle; a box starts with its microbatch\n"));
  CHECK(RenderText(t, -5) == text);
}

TEST_CASE("text render never drops a digit: M=16, v=2 shows every <stage><kind><microbatch> in order", "[render]") {
  for (const char* name : {"interleaved-1f1b", "zb-v", "looped-bfs"}) {
    const Timeline t = Simulated(Generate(name, {4, 16, 2}));
    const std::string text = RenderText(t, 100);
    INFO(name << "\n" << text);
    CHECK(CountOf(text, "\nr0 ") > 1);  // it had to wrap: several bands
    CHECK(CountOf(text, "|0.000 ms ") == 1);
    CHECK_THAT(text, Catch::EndsWith("a box starts with <stage><kind><microbatch> (e.g. 3F12)\n"));
    for (RankId r = 0; r < 4; ++r) {
      // Every box's label, read back from the row, in order.
      std::string expected, got;
      for (const Action& a : ComputeOf(t, r)) {
        expected += std::to_string(a.stage) + InfoOf(a.kind).letter + std::to_string(a.microbatch) + " ";
      }
      const std::string row = RowOf(text, r);
      for (size_t i = 0; i < row.size();) {
        if (!std::isdigit(static_cast<unsigned char>(row[i]))) {
          ++i;
          continue;
        }
        size_t j = i;
        while (j < row.size() && std::isdigit(static_cast<unsigned char>(row[j]))) ++j;
        const char kind = j < row.size() ? row[j] : '?';
        size_t k = j + 1;
        while (k < row.size() && std::isdigit(static_cast<unsigned char>(row[k]))) ++k;
        got += row.substr(i, j - i) + kind + row.substr(j + 1, k - j - 1) + " ";
        i = k;
      }
      CHECK(got == expected);
    }
  }
}

TEST_CASE("text render keeps each label's digits in one band: none runs over a band's edge", "[render]") {
  // 1F1B on 2 ranks, M=12, in bands of 7 to 30 cells: the labels 10 and 11
  // fall on a band's edge at some width ("1" ending one band, "0F" starting
  // the next read as another label). Such a label starts on the next band.
  const Timeline t = Simulated(Generate("1f1b", {2, 12, 0}));
  int wrapped = 0;
  for (int columns = 7; columns <= 30; ++columns) {
    const std::string text = RenderText(t, columns);
    INFO(columns << "\n" << text);
    for (RankId r = 0; r < 2; ++r) {
      const std::vector<std::string> bands = BandsOf(text, r);
      wrapped += bands.size() > 1;
      for (size_t b = 0; b + 1 < bands.size(); ++b) {
        CHECK_FALSE((IsDigit(bands[b].back()) && IsDigit(bands[b + 1].front())));
      }
      // And every box is labelled: each microbatch's F and B in order.
      std::string expected, got;
      for (const Action& a : ComputeOf(t, r)) expected += std::to_string(a.microbatch) + InfoOf(a.kind).letter;
      const std::string row = RowOf(text, r);
      for (size_t i = 0; i < row.size(); ++i) {
        if (IsDigit(row[i]) || (i > 0 && IsDigit(row[i - 1]))) got += row[i];
      }
      CHECK(got == expected);
    }
  }
  CHECK(wrapped > 20);
}

TEST_CASE("text render at its cell limit gives + to a box as wide as its label alone, no letter after it", "[render]") {
  // 1 us cells at the 65536-cell limit. F12 and F13 take 2 cells each:
  // their labels would fill them and run together ("1213"); each needs a
  // letter after it. B0's "0" has its B.
  Timeline t;
  t.name = "cap";
  t.ranks = 1;
  const TimeNs us = 1000;
  t.events = {TimelineEvent{0, {ActionKind::kForward, 0, 0}, 0, 65530 * us},
              TimelineEvent{0, {ActionKind::kForward, 0, 12}, 65530 * us, 65532 * us},
              TimelineEvent{0, {ActionKind::kForward, 0, 13}, 65532 * us, 65534 * us},
              TimelineEvent{0, {ActionKind::kBackward, 0, 0}, 65534 * us, 65536 * us}};
  const std::string text = RenderText(t, 100);
  CHECK_THAT(text, Catch::Contains("1 cell = 1.000 us"));
  CHECK_THAT(RowOf(text, 0), Catch::StartsWith("0FFF") && Catch::EndsWith("FF+F+F0B"));
  CHECK_THAT(text, Catch::Contains("+ a label too long for its box"));
}

TEST_CASE("text render counts an action of no duration among those too short to show", "[render]") {
  // An I of 0 ms (W takes all of B): no cell, no label; it vanished unsaid.
  Timeline t = Tiny1F1B();
  t.events.push_back(TimelineEvent{1, {ActionKind::kBackwardInput, 1, 1}, MsToNs(7), MsToNs(7)});
  const std::string text = RenderText(t, 18);
  CHECK_THAT(text, Catch::Contains("; 1 action(s) too short to show (use pplab render)"));
  CHECK(RowOf(text, 1) == RowOf(RenderText(Tiny1F1B(), 18), 1));
}

TEST_CASE("text render's legend names F&B overlapped by its letter X", "[render]") {
  const std::string text = RenderText(Simulated(Generate("dualpipev", {2, 4, 0})), 200);
  CHECK_THAT(text, Catch::Contains(" X F&B overlapped,"));
  CHECK_THAT(text, Catch::Contains("legend: F forward, "));
}

TEST_CASE("text render with one stage per rank shows each microbatch number whole (M=16)", "[render]") {
  const Timeline t = Simulated(Generate("zb-h1", {4, 16, 0}));
  const std::string text = RenderText(t, 100);
  INFO(text);
  for (RankId r = 0; r < 4; ++r) {
    std::string expected, got;
    for (const Action& a : ComputeOf(t, r)) expected += std::to_string(a.microbatch) + InfoOf(a.kind).letter;
    const std::string row = RowOf(text, r);
    for (size_t i = 0; i < row.size(); ++i) {
      const bool digit = std::isdigit(static_cast<unsigned char>(row[i]));
      if (digit || (i > 0 && std::isdigit(static_cast<unsigned char>(row[i - 1])))) got += row[i];
    }
    CHECK(got == expected);
  }
}

TEST_CASE("text render marks a label it cannot widen for with +, and says so", "[render]") {
  Timeline t;
  t.name = "tiny-w";
  t.ranks = 1;
  // A 10 us I and a 1 ns W in a 1 s step would need 3e9 cells; the picture
  // stops at 65536 (15.26 us each): the I gets one cell, too few for "13",
  // and the W none.
  t.events = {Event(0, ActionKind::kForward, 0, 3, 0, 1000),
              TimelineEvent{0, {ActionKind::kBackwardInput, 0, 13}, MsToNs(1000), MsToNs(1000.01)},
              TimelineEvent{0, {ActionKind::kBackwardWeight, 0, 3}, MsToNs(1000.01), MsToNs(1000.01) + 1}};
  const std::string text = RenderText(t, 100);
  CHECK(CountOf(text, "\nr0 |") == kMaxTextCells / 100 + 1);
  CHECK_THAT(text, Catch::EndsWith("FFF+|\nlegend: F forward, I input grad, W weight grad, . idle; a box starts "
                                   "with its microbatch; + a label too long for its box; 1 action(s) too short to "
                                   "show (use pplab render)\n"));
  CHECK_THAT(text, Catch::StartsWith("tiny-w: makespan 1000.010 ms"));
}

TEST_CASE("text render: under each band a memory row per rank, each cell the most bytes held in ninths", "[render]") {
  // 0.5 ms cells. Rank 0 holds 1 MB from 1 ms, 2 MB from 2 ms, 1 MB from 6
  // ms, 0 at 9 ms (the makespan: the last cell); rank 1 1 MB over [2, 4)
  // and [5, 7) ms. 2 MB is 9, 1 MB 4.5 ninths, rounded up to 5; a cell
  // shows the most held in it (cell 12, where rank 0 drops to 1 MB, is 9).
  const std::string rows =
      "r0 |0F1F....0BBB..1BBB|\n"
      "r1 |..0F0BBB1F1BBB....|\n"
      "m0 |..5599999999955555|\n"
      "m1 |....55555.55555...|\n";
  const std::string scale =
      "memory: m<r> rows hold each cell's most bytes held by rank r, in ninths of the largest "
      "rounded up, 9 = 2.000 MB, . none\n";
  const std::string legend = "legend: F forward, B backward, . idle; a box starts with its microbatch\n";
  const std::string head = "tiny [simulated]: makespan 9.000 ms, bubble 33.3%, 1 cell = 0.500 ms\n";
  CHECK(RenderText(TinyWithMemory(), 18) == head + rows + legend + scale);
  // Wrapped into bands of 9 cells: the memory rows follow each band's ranks.
  CHECK(RenderText(TinyWithMemory(), 9) ==
        head + "    0.000 ms to 4.500 ms\n" + "r0 |0F1F....0|\nr1 |..0F0BBB1|\nm0 |..5599999|\nm1 |....55555|\n" +
            "    4.500 ms to 9.000 ms\n" + "r0 |BBB..1BBB|\nr1 |F1BBB....|\nm0 |999955555|\nm1 |.55555...|\n" + legend +
            scale);
  // Turned off, or without samples: the picture of old.
  CHECK(RenderText(TinyWithMemory(), 18, false) == RenderText(Tiny1F1B(), 18));
  CHECK(RenderText(Tiny1F1B(), 18).find("m0") == std::string::npos);
}

TEST_CASE("text render memory rows: any bytes show at least 1, none or negative '.', late samples in the last cell",
          "[render]") {
  Timeline t = Tiny1F1B();
  // Rank 0: 9 MB from 0.5 ms to 1 ms, then -5 bytes; rank 1: 1 byte from
  // 2 ms, then 9 MB well past the makespan.
  t.memory = {{0, MsToNs(0.5), 9000000}, {0, MsToNs(1), -5}, {1, MsToNs(2), 1}, {1, MsToNs(50), 9000000}};
  const std::string text = RenderText(t, 18);
  CHECK_THAT(text, Catch::Contains("m0 |.99...............|\n"));
  CHECK_THAT(text, Catch::Contains("m1 |....11111111111119|\n"));
  CHECK_THAT(text, Catch::Contains("9 = 9.000 MB"));
}

}  // namespace pplab::render_text_test

namespace pplab::render_text_test {

TEST_CASE("text render of a timeline at a late clock draws the same rows (128-bit cell arithmetic)", "[render]") {
  const Timeline t = Tiny1F1B();
  Timeline late = t;  // 9 ms becomes 9e16 ns: start x 200 cells passes int64
  for (TimelineEvent& e : late.events) {
    e.start *= 10'000'000'000LL;
    e.end *= 10'000'000'000LL;
  }
  const std::string rows = RenderText(t, 200);
  const std::string late_rows = RenderText(late, 200);
  for (RankId r = 0; r < 2; ++r) {
    INFO(late_rows);
    CHECK(RowOf(late_rows, r) == RowOf(rows, r));
  }
}

}  // namespace pplab::render_text_test
