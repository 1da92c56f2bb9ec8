// pplab render and simulate --svg run as a user would: a trace read back,
// panels labelled, and each rank's memory row where the costs have bytes.
#include <catch2/catch.hpp>
#include <string>

#include "schedules/file_io.h"
#include "tests/run_pplab.h"
#include "tests/tools/cli_test_support.h"
#include "tests/traces/render_test_support.h"

namespace pplab::render_cli_test {

TEST_CASE("cli: simulate writes a trace that render and show read back", "[cli]") {
  const std::string trace = TempPath("t.json"), svg = TempPath("t.svg");
  REQUIRE(Pplab("simulate -s interleaved-1f1b -k 2 -m 4 --trace " + trace).code == 0);
  const PplabRun r = Pplab("render " + trace + " " + trace + " -o " + svg);
  REQUIRE(r.code == 0);
  const std::string picture = ReadTextFile(svg);
  CHECK(picture.rfind("<svg", 0) == 0);
  const PplabRun shown = Pplab("show --trace " + trace + " --columns 40");
  CHECK(shown.code == 0);
  CHECK_THAT(shown.out, Catch::Contains("interleaved-1f1b"));
}

TEST_CASE("cli: render labels the stacked panels with file names or --labels", "[cli][render]") {
  const std::string a = TempPath("lab_sim.json"), svg = TempPath("lab.svg");
  REQUIRE(Pplab("simulate -s 1f1b -k 2 -m 4 --trace " + a).code == 0);
  REQUIRE(Pplab("render " + a + " " + a + " -o " + svg + " --labels predicted,measured").code == 0);
  std::string picture = ReadTextFile(svg);
  CHECK_THAT(picture, Catch::Contains(">predicted: 1f1b  (makespan 15.000 ms") &&
                          Catch::Contains(">measured: 1f1b  (makespan 15.000 ms"));
  REQUIRE(Pplab("render " + a + " " + a + " -o " + svg).code == 0);
  picture = ReadTextFile(svg);
  CHECK_THAT(picture, Catch::Contains(">lab_sim.json (simulated): 1f1b"));
  const PplabRun r = Pplab("render " + a + " " + a + " -o " + svg + " --labels one");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("--labels: 1 labels for 2 traces"));
}

TEST_CASE("cli: simulate --svg draws each rank's memory row where the costs have bytes, render --no-memory none",
          "[cli][render]") {
  const std::string trace = TempPath("mem.json"), svg = TempPath("mem.svg"), bare = TempPath("mem-bare.svg");
  // 1F1B on K = 4 holds K - r stashes of 1 MB at rank r's peak.
  REQUIRE(Pplab("simulate -s 1f1b -k 4 -m 8 --activation-bytes 1e6 --trace " + trace + " --svg " + svg).code == 0);
  const std::string picture = ReadTextFile(svg);
  CHECK(CountOf(picture, "<path class=\"memory\"") == 4);
  for (int r = 0; r < 4; ++r) {
    CHECK_THAT(picture,
               Catch::Contains("<title>rank " + std::to_string(r) + " peak " + std::to_string(4 - r) + ".00 MB"));
  }
  CHECK_THAT(picture, Catch::Contains(">activation bytes, row height = 4.00 MB</text>"));
  REQUIRE(Pplab("render " + trace + " -o " + bare + " --no-memory").code == 0);
  CHECK(CountOf(ReadTextFile(bare), "memory") == 0);
  REQUIRE(Pplab("render " + trace + " -o " + bare).code == 0);
  CHECK(CountOf(ReadTextFile(bare), "<path class=\"memory\"") == 4);
}

TEST_CASE("cli: show adds a memory row per rank where the costs have bytes, --no-memory none", "[cli][render]") {
  // 1F1B, K = 2, M = 3, F 1 ms and B 2 ms, 1 MB a stash: rank 0 holds two
  // (9) until its second B ends at 9 ms, rank 1 one (ninths of 2 MB: 5).
  PplabRun r = Pplab("show -s 1f1b -k 2 -m 3 --activation-bytes 1e6 --columns 40");
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("\nm0 |5559999999999999999999999999999555555555|\n"));
  CHECK_THAT(r.out, Catch::Contains("\nm1 |...5555555555555555555555555555555......|\n"));
  CHECK_THAT(r.out, Catch::Contains("9 = 2.000 MB, . none\n"));
  r = Pplab("show -s 1f1b -k 2 -m 3 --activation-bytes 1e6 --columns 40 --no-memory");
  REQUIRE(r.code == 0);
  CHECK(r.out == Pplab("show -s 1f1b -k 2 -m 3 --columns 40").out);
  CHECK(r.out.find("\nm0 ") == std::string::npos);
}

}  // namespace pplab::render_cli_test
