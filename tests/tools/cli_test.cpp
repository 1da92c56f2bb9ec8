// Runs the pplab binary as a user would and checks exit codes and messages.
#include <sys/stat.h>
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "schedules/file_io.h"
#include "tests/run_pplab.h"

namespace pplab {
namespace {

std::string Data(const std::string& name) { return std::string(PPLAB_TEST_DATA_DIR) + "/" + name; }

std::string TempPath(const std::string& name) { return std::string(PPLAB_TEST_TMP_DIR) + "/" + name; }

}  // namespace

TEST_CASE("cli: validate exits 0 valid, 1 invalid, 2 unusable", "[cli]") {
  PplabRun r = Pplab("validate " + Data("pytorch_1f1b_k2_m2.csv"));
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("is valid"));
  r = Pplab("validate " + Data("deadlock.csv"));
  CHECK(r.code == 1);
  CHECK_THAT(r.out, Catch::Contains("deadlock") && Catch::Contains("[0RECV_B0]"));
  r = Pplab("validate /nonexistent/plan.json");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("pplab: error: cannot read /nonexistent/plan.json"));
  const std::string truncated = TempPath("truncated.json");
  WriteTextFile(truncated, "{\"format\": \"pplab.schedule\", \"version\": 1, \"name\": ");
  r = Pplab("validate " + truncated);
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("truncated.json: not valid JSON"));
}

TEST_CASE("cli: simulate --json gives the figures of the formulas", "[cli]") {
  const PplabRun r = Pplab("simulate --schedule 1f1b --ranks 4 --microbatches 8 --f-time 1 --b-time 2 --json");
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["schedule"] == "1f1b");
  CHECK(j["makespan"].get<double>() == Approx(33.0));  // (M+K-1)(f+b)
  CHECK(j["bubble_fraction"].get<double>() == Approx(3.0 / 11.0));
  CHECK(j["analytic_bubble_fraction"].get<double>() == Approx(3.0 / 11.0));
  REQUIRE(j["per_rank"].size() == 4);
  CHECK(j["per_rank"][0]["busy"].get<double>() == Approx(24.0));
  CHECK(j["per_rank"][0]["peak_inflight"] == 4);
  for (const char* key : {"span_bubble_fraction", "stages", "microbatches", "ranks"}) CHECK(j.contains(key));
  for (const char* key : {"rank", "busy", "idle", "start", "end", "peak_inflight", "peak_activation_bytes"}) {
    CHECK(j["per_rank"][3].contains(key));
  }
}

TEST_CASE("cli: bad flags and rules get one clear line and a non-zero exit", "[cli]") {
  struct Case {
    const char* args;
    int code;
    const char* says;
  };
  const Case cases[] = {
      {"simulate --schedule nope", 2, "unknown schedule 'nope'"},
      {"simulate --ranks 0", 105, "--ranks"},
      {"simulate --microbatches -3", 105, "--microbatches"},
      {"simulate --f-time nan", 105, "--f-time"},
      {"simulate --b-time -1", 105, "--b-time"},
      {"simulate --w-time 3 --b-time 2", 2, "--w-time"},
      {"simulate --schedule interleaved-1f1b --ranks 4 --microbatches 6", 2, "M % K == 0"},
      {"simulate --cost /nonexistent/cost.json", 2, "cannot read /nonexistent/cost.json"},
      {"simulate --plan /nonexistent/plan.csv", 2, "cannot read /nonexistent/plan.csv"},
      {"bench --sizes 4by4", 2, "--sizes: '4by4' is not KxM"},
      {"simulate --plan " PPLAB_TEST_DATA_DIR "/deadlock.csv", 2, "deadlock.csv: invalid schedule: deadlock"},
      {"frobnicate", 2, "unknown command 'frobnicate'"},
      {"simulate -s 1f1b -v 7", 2, "--virtual must be 1"},
      {"simulate --plan " PPLAB_TEST_DATA_DIR "/pytorch_1f1b_k2_m2.csv -k 4", 108, "--ranks excludes --plan"},
      {"show -k 100000 -m 1 --columns 10000", 2, "too large a picture"},
      {"simulate -k 100000 -m 100000", 2, "more than pplab plans"},
      {"simulate --f-time 1e13", 105, "--f-time"},
      {"simulate --comm-bandwidth 1e-300 --message-bytes 1e6", 105, "--comm-bandwidth"},
  };
  for (const Case& c : cases) {
    const PplabRun r = Pplab(c.args);
    INFO(c.args << "\n" << r.out);
    CHECK(r.code == c.code);
    CHECK_THAT(r.out, Catch::Contains(c.says));
  }
}

TEST_CASE("cli: an exported plan validates and simulates like the generator", "[cli]") {
  const std::string plan = TempPath("plan.json");
  REQUIRE(Pplab("export --schedule zb-h2 --ranks 3 --microbatches 6 -o " + plan).code == 0);
  CHECK(Pplab("validate " + plan).code == 0);
  const auto direct = nlohmann::json::parse(Pplab("simulate -s zb-h2 -k 3 -m 6 --json").out);
  const auto from_file = nlohmann::json::parse(Pplab("simulate --plan " + plan + " --json").out);
  CHECK(from_file["makespan"] == direct["makespan"]);
  CHECK(from_file["span_bubble_fraction"] == direct["span_bubble_fraction"]);
}

TEST_CASE("cli: compare skips the schedules whose rules the options break", "[cli]") {
  const PplabRun r = Pplab("compare -k 4 -m 6 --csv");
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("skipped: interleaved-1f1b: Megatron's rule"));
  CHECK_THAT(r.out, Catch::Contains("\nzb-v,"));
}

TEST_CASE("cli: writing to /dev/null leaves it a device", "[cli]") {
  REQUIRE(Pplab("export -s 1f1b -k 2 -m 2 -o /dev/null").code == 0);
  struct stat st {};
  REQUIRE(::lstat("/dev/null", &st) == 0);
  CHECK(S_ISCHR(st.st_mode));
}

TEST_CASE("cli: compare lists every schedule; sweep writes one row per plan", "[cli]") {
  PplabRun r = Pplab("compare --ranks 4 --microbatches 8 --csv");
  REQUIRE(r.code == 0);
  for (const char* name : {"gpipe", "1f1b", "interleaved-1f1b", "looped-bfs", "zb-h1", "zb-h2"}) {
    CHECK_THAT(r.out, Catch::Contains(std::string("\n") + name + ","));
  }
  const std::string csv = TempPath("sweep.csv");
  r = Pplab("sweep --schedules 1f1b,interleaved-1f1b --ranks 2,4 --microbatches 4,6 --virtual 1,2 -o " + csv);
  REQUIRE(r.code == 0);
  const std::string text = ReadTextFile(csv);
  // 1f1b: 2 K x 2 M (v=1 only); interleaved: v=2 only, M % K == 0 leaves (2,4),(2,6),(4,4).
  CHECK(std::count(text.begin(), text.end(), '\n') == 1 + 4 + 3);
  CHECK_THAT(r.out, Catch::Contains("7 plans simulated"));
}

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

}  // namespace pplab
