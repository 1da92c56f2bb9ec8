#include "schedules/json_reader.h"

#include <catch2/catch.hpp>
#include <optional>
#include <sstream>

#include "models/llama_config.h"
#include "schedules/error.h"
#include "schedules/generators.h"
#include "schedules/lowering.h"
#include "schedules/schedule_io.h"
#include "sim/cost_model.h"

namespace pplab::json_reader_test {

TEST_CASE("a key given twice in one object is refused, naming the file and the key", "[json_reader]") {
  CHECK_THROWS_WITH(ParseJsonStrict(R"({"a": 1, "b": 2, "a": 3})", "x.json"),
                    Catch::Equals("x.json: key 'a' is given twice in one object"));
  CHECK_THROWS_WITH(ParseJsonStrict(R"({"outer": {"k": 1, "k": 1}})", "x.json"), Catch::Contains("key 'k'"));
  // The same key in two different objects is fine.
  const nlohmann::json j = ParseJsonStrict(R"([{"k": 1}, {"k": 2}, {"o": {"k": 3}}])", "x.json");
  CHECK(j[1]["k"] == 2);
  CHECK(j[2]["o"]["k"] == 3);
  CHECK_THROWS_WITH(ParseJsonStrict("{\"a\": ", "x.json"), Catch::StartsWith("x.json: not valid JSON"));
}

TEST_CASE("arrays and objects nested more than 200 deep are refused in one line, not a crash", "[json_reader]") {
  const auto nested = [](int depth) {
    return "{\"a\": " + std::string(depth - 1, '[') + std::string(depth - 1, ']') + "}";
  };
  CHECK(ParseJsonStrict(nested(200), "x.json").is_object());
  CHECK_THROWS_WITH(ParseJsonStrict(nested(201), "x.json"),
                    Catch::Equals("x.json: nested deeper than 200 arrays and objects, which no pplab input is"));
  // A config field 100 000 deep: its error message printed the value,
  // whose printing recursed past the stack (a segfault).
  CHECK_THROWS_WITH(
      LlamaConfigFromJson("{\"vocab_size\": " + std::string(100000, '[') + std::string(100000, ']') + "}", "deep.json"),
      Catch::StartsWith("deep.json: nested deeper than 200"));
}

TEST_CASE("a document of more values than the bound is refused as it is read, and values a filter drops do not count",
          "[json_reader]") {
  // 10 values: the outer object, its array, 7 numbers, and "b"'s value.
  const std::string doc = R"({"a": [1, 2, 3, 4, 5, 6, 7], "b": true})";
  CHECK(ParseJsonStrict(doc, "x.json", {}, 10)["b"] == true);
  CHECK_THROWS_WITH(ParseJsonStrict(doc, "x.json", {}, 9),
                    Catch::Equals("x.json: holds more than 9 JSON values, far more than any pplab input"));
  // The array's numbers dropped as they arrive: 3 held at most.
  const JsonValueFilter drop_numbers = [](int depth, const std::string&, nlohmann::json&) { return depth != 2; };
  const nlohmann::json kept = ParseJsonStrict(doc, "x.json", drop_numbers, 4);
  CHECK(kept["a"].empty());
  CHECK(kept["b"] == true);
  // Whole objects dropped, as the trace reader drops its events once read:
  // each counts while it is read, not after.
  const JsonValueFilter drop_events = [](int depth, const std::string&, nlohmann::json& v) {
    return !(depth == 2 && v.is_object());
  };
  std::string events = R"({"traceEvents": [)";
  for (int i = 0; i < 1000; ++i) events += std::string(i ? "," : "") + R"({"ts": 1, "dur": 2, "args": {"m": 3}})";
  events += "]}";
  CHECK(ParseJsonStrict(events, "t.json", drop_events, 8)["traceEvents"].empty());
  CHECK_THROWS_WITH(ParseJsonStrict(events, "t.json", {}, 5000), Catch::Contains("holds more than 5000 JSON values"));
}

TEST_CASE("the first unknown field is the first key, in sorted order, that the reader does not know", "[json_reader]") {
  const nlohmann::json doc = ParseJsonStrict(R"({"a": 1, "zz": 2, "b": 3, "yy": 4})", "x.json");
  CHECK(FirstUnknownField(doc, {"a", "b"}) == std::optional<std::string>("yy"));  // a JSON object's keys sort
  CHECK(FirstUnknownField(doc, {"a", "b", "yy"}) == std::optional<std::string>("zz"));
  CHECK_FALSE(FirstUnknownField(doc, {"yy", "b", "zz", "a"}));
  CHECK_FALSE(FirstUnknownField(nlohmann::json::array({"zz"}), {}));  // not an object: the caller checks the type
  // Every reader words the refusal with the file and where in it.
  CHECK_THROWS_WITH(LlamaConfigFromJson(R"({"hidden_size": 64, "hiden_size": 64})", "m.json"),
                    Catch::Equals("m.json: unknown field 'hiden_size'"));
}

TEST_CASE("a number beyond a double's range is invalid JSON naming the file, in every reader", "[json_reader]") {
  // Found by tests/fuzz (llama_config): nlohmann throws out_of_range, which
  // escaped the config reader as a bare exception.
  CHECK_THROWS_WITH(ParseJsonStrict(R"({"a": 1e400})", "x.json"),
                    Catch::StartsWith("x.json: not valid JSON") && Catch::Contains("number overflow"));
  CHECK_THROWS_AS(LlamaConfigFromJson(R"({"rope_theta": 1e400})", "m.json"), Error);
  CHECK_THROWS_AS(CostModel::FromJson(R"({"format": "pplab.cost", "version": 1e400})", "c.json"), Error);
}

TEST_CASE("every JSON input refuses a duplicated key: schedules, cost models, model configs", "[json_reader]") {
  std::string schedule = ScheduleToJson(Lower(Generate1F1B(2, 2)));
  schedule.replace(schedule.find("\"ranks\": 2"), 10, "\"ranks\": 2, \"ranks\": 3");
  CHECK_THROWS_WITH(ScheduleFromJson(schedule, "p.json"),
                    Catch::Equals("p.json: key 'ranks' is given twice in one object"));
  CHECK_THROWS_WITH(
      CostModel::FromJson(R"({"format": "pplab.cost", "version": 1, "default": {"forward_ms": 1, "forward_ms": 2},
                              "num_stages": 2})",
                          "c.json"),
      Catch::Contains("c.json: key 'forward_ms' is given twice"));
  CHECK_THROWS_WITH(LlamaConfigFromJson(R"({"hidden_size": 64, "hidden_size": 128})", "m.json"),
                    Catch::Contains("m.json: key 'hidden_size' is given twice"));
}

TEST_CASE("an integer field beyond 2^63 is reported with its real value", "[json_reader]") {
  std::string schedule = ScheduleToJson(Lower(Generate1F1B(2, 2)));
  schedule.replace(schedule.find("\"stages\": 2"), 11, "\"stages\": 9223372036854775808");
  CHECK_THROWS_WITH(ScheduleFromJson(schedule, "p.json"),
                    Catch::Contains("field 'stages' must be in [1, 1e9], got 9223372036854775808"));
  schedule = ScheduleToJson(Lower(Generate1F1B(2, 2)));
  schedule.replace(schedule.find("\"ranks\": 2"), 10, "\"ranks\": 18446744073709551615");
  CHECK_THROWS_WITH(ScheduleFromJson(schedule, "p.json"), Catch::Contains("got 18446744073709551615"));
}

TEST_CASE("the filter sees each value with its depth and top-level key, and can drop it", "[json_reader]") {
  std::vector<std::string> seen;
  const JsonValueFilter drop_rows = [&](int depth, const std::string& top, nlohmann::json& v) {
    seen.push_back(std::to_string(depth) + top + v.dump());
    return !(top == "rows" && depth == 2);
  };
  std::istringstream in(R"({"n": 1, "rows": [[1, 2], [3]]})");
  const nlohmann::json j = ParseJsonStrict(in, "s.json", drop_rows);
  CHECK(j == nlohmann::json::parse(R"({"n": 1, "rows": []})"));
  CHECK(seen == std::vector<std::string>{"1n1", "3rows1", "3rows2", "2rows[1,2]", "3rows3", "2rows[3]", "1rows[]",
                                         "0{\"n\":1,\"rows\":[]}"});
}

TEST_CASE("the strict reader builds what nlohmann's parser builds, and drops a value by its key in an object",
          "[json_reader]") {
  const std::string text =
      R"({"a": [1, -2, 3.5, "x", true, null, {}, []], "b": {"c": {"d": [{"e": 18446744073709551615}]}}, "f": "\u00e9"})";
  CHECK(ParseJsonStrict(text, "x.json") == nlohmann::json::parse(text));
  CHECK(ParseJsonStrict("[]", "x.json") == nlohmann::json::array());
  CHECK(ParseJsonStrict("7", "x.json") == 7);
  // Dropped inside an object: the member goes, its siblings stay.
  const JsonValueFilter drop_c = [](int, const std::string&, nlohmann::json& v) {
    return !(v.is_object() && v.contains("d"));
  };
  CHECK(ParseJsonStrict(text, "x.json", drop_c)["b"] == nlohmann::json::object());
  CHECK(ParseJsonStrict(text, "x.json", drop_c)["a"].size() == 8);
  // Trailing text after the document is not JSON.
  CHECK_THROWS_WITH(ParseJsonStrict("{} x", "x.json"), Catch::StartsWith("x.json: not valid JSON"));
}

TEST_CASE("a schedule read from a stream equals the one read from its text, errors included", "[json_reader]") {
  for (const char* name : {"1f1b", "zb-h1", "interleaved-1f1b"}) {
    const Schedule s = Lower(Generate(name, {4, 8, 0}));
    const std::string text = ScheduleToJson(s);
    const Schedule back = ScheduleFromJson(text, "p.json");
    CHECK(back.programs == s.programs);
    CHECK(back.placement == s.placement);
    CHECK(ScheduleToJson(back) == text);
  }
  std::string text = ScheduleToJson(Lower(Generate1F1B(2, 2)));
  text.replace(text.find("\"0F1\""), 5, "7");
  CHECK_THROWS_WITH(ScheduleFromJson(text, "p.json"),
                    Catch::Contains("p.json: programs[0][") && Catch::Contains("must be an action string"));
  text = ScheduleToJson(Lower(Generate1F1B(2, 2)));
  text.replace(text.find("\"programs\": ["), 13, "\"programs\": [5, ");
  CHECK_THROWS_WITH(ScheduleFromJson(text, "p.json"), Catch::Contains("p.json: programs[0] must be an array"));
}

}  // namespace pplab::json_reader_test
