#include "schedules/schedule_io.h"

#include <catch2/catch.hpp>

#include "schedules/error.h"
#include "schedules/generators.h"
#include "schedules/lowering.h"
#include "schedules/validate.h"

namespace pplab {

TEST_CASE("schedule JSON round-trips for every generator", "[schedule_io]") {
  for (const GeneratorInfo& g : Generators()) {
    const Schedule s = Lower(Generate(g.name, {4, 8, 0}));  // 0: the family's default v
    const std::string text = ScheduleToJson(s);
    const Schedule back = ScheduleFromJson(text, "mem.json");
    INFO(g.name);
    CHECK(back.name == s.name);
    CHECK(back.ranks == s.ranks);
    CHECK(back.stages == s.stages);
    CHECK(back.microbatches == s.microbatches);
    CHECK(back.placement == s.placement);
    CHECK(back.programs == s.programs);
    CHECK(ScheduleToJson(back) == text);
  }
}

TEST_CASE("schedule JSON errors name the file and the field", "[schedule_io]") {
  const std::string good = ScheduleToJson(Lower(Generate1F1B(2, 2)));
  auto with = [&](const std::string& from, const std::string& to) {
    std::string t = good;
    const size_t at = t.find(from);
    REQUIRE(at != std::string::npos);
    return t.replace(at, from.size(), to);
  };
  CHECK_THROWS_WITH(ScheduleFromJson(good.substr(0, good.size() / 2), "p.json"),
                    Catch::Contains("p.json: not valid JSON"));
  CHECK_THROWS_WITH(ScheduleFromJson("[]", "p.json"), Catch::Contains("JSON object"));
  CHECK_THROWS_WITH(ScheduleFromJson(with("\"version\": 1", "\"version\": 7"), "p.json"),
                    Catch::Contains("unsupported 'version' 7"));
  CHECK_THROWS_WITH(ScheduleFromJson(with("\"ranks\": 2", "\"ranks\": 0"), "p.json"),
                    Catch::Contains("field 'ranks' must be in [1, 1e9]"));
  CHECK_THROWS_WITH(ScheduleFromJson(with("\"ranks\": 2", "\"rankz\": 2"), "p.json"),
                    Catch::Contains("unknown field 'rankz'"));
  CHECK_THROWS_WITH(ScheduleFromJson(with("\"0F0\"", "\"0X0\""), "p.json"),
                    Catch::Contains("p.json: programs[0][0]: bad action '0X0'"));
  CHECK_THROWS_WITH(ScheduleFromJson(with("[0,1]", "[0,4294967296]"), "p.json"),
                    Catch::Contains("placement[1] must be a rank in [0, 2), got 4294967296"));
  CHECK_THROWS_WITH(ScheduleFromJson(with("\"name\": \"1f1b\"", "\"name\": \"a\\u0000b\""), "p.json"),
                    Catch::Contains("'name' must not hold control characters"));
  CHECK_THROWS_WITH(ScheduleFromJson(with("\"format\": \"pplab.schedule\"", "\"format\": 5"), "p.json"),
                    Catch::Contains("p.json: field 'format'"));
  // A tiny file that claims a huge plan is refused before anything is allocated.
  CHECK_THROWS_WITH(ScheduleFromJson(with("\"microbatches\": 2", "\"microbatches\": 100000000"), "p.json"),
                    Catch::Contains("200000000 (stage, microbatch) pairs, but only 16 actions"));
}

TEST_CASE("action-level problems in a JSON file are validation's to report", "[schedule_io]") {
  std::string text = ScheduleToJson(Lower(Generate1F1B(2, 2)));
  text.replace(text.find("\"0F0\""), 5, "\"1F0\"");
  const Schedule s = ScheduleFromJson(text, "p.json");  // loads
  const ValidationReport r = Validate(s);
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.problems.front().message, Catch::Contains("stage 1 is placed on rank 1"));
}

TEST_CASE("PyTorch pipelining CSV imports, with empty cells as idle steps", "[schedule_io]") {
  // 1F1B, K=2, M=2, compute only, as PyTorch writes it: idle steps are empty.
  const std::string csv = "0F0,0F1,,0B0,,0B1\n,1F0,1B0,1F1,1B1\n\n";
  const Schedule s = ScheduleFromPytorchCsv(csv, "x.csv", "x");
  CHECK(s.ranks == 2);
  CHECK(s.stages == 2);
  CHECK(s.microbatches == 2);
  CHECK(s.placement == std::vector<RankId>{0, 1});
  CHECK(s.programs == Generate1F1B(2, 2).programs);
  CHECK(Validate(Lower(s)).ok());
  // Lowered CSV (with comms) round-trips through our CSV writer.
  const Schedule lowered = Lower(Generate("zb-h1", {3, 4, 1}));
  CHECK(ScheduleFromPytorchCsv(ScheduleToPytorchCsv(lowered), "y.csv", "zb-h1").programs == lowered.programs);
}

TEST_CASE("PyTorch CSV errors name the file, line and column", "[schedule_io]") {
  CHECK_THROWS_WITH(ScheduleFromPytorchCsv("0F0,0Q1\n", "a.csv", "a"), Catch::Contains("a.csv:1: column 2"));
  CHECK_THROWS_WITH(ScheduleFromPytorchCsv("0F0\n0B0\n", "a.csv", "a"),
                    Catch::Contains("stage 0 has actions on rank 0 and rank 1"));
  CHECK_THROWS_WITH(ScheduleFromPytorchCsv("0F0,0B0\n2F0,2B0\n", "a.csv", "a"),
                    Catch::Contains("stage 1 has no actions"));
  CHECK_THROWS_WITH(ScheduleFromPytorchCsv("999999999F0\n", "a.csv", "a"),
                    Catch::Contains("implies 1000000000 stages but the file holds 1 actions"));
  CHECK_THROWS_WITH(ScheduleFromPytorchCsv("0F99999999\n", "a.csv", "a"), Catch::Contains("(stage, microbatch) pairs"));
  CHECK_THROWS_WITH(ScheduleFromPytorchCsv("0F0,\x01\x02\n", "a.csv", "a"), Catch::Contains("bad action '\\x01\\x02'"));
  CHECK_THROWS_WITH(ScheduleFromPytorchCsv("\n\n", "a.csv", "a"), Catch::Contains("no rows"));
  CHECK_THROWS_WITH(ScheduleFromPytorchCsv(",,\n", "a.csv", "a"), Catch::Contains("no actions"));
}

TEST_CASE("loading a missing or empty file is an error naming it", "[schedule_io]") {
  CHECK_THROWS_WITH(LoadScheduleFile("/nonexistent/plan.json"), Catch::Contains("cannot read /nonexistent/plan.json"));
  CHECK_THROWS_WITH(LoadScheduleFile(PPLAB_TEST_DATA_DIR "/empty.csv"), Catch::Contains("empty.csv: file is empty"));
}

}  // namespace pplab
