#include "traces/chrome_trace.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "schedules/error.h"
#include "schedules/file_io.h"
#include "schedules/generators.h"
#include "schedules/lowering.h"
#include "sim/simulator.h"

namespace pplab::chrome_trace_test {
namespace {

// The costs tests/data/golden/regenerate.sh passes as flags: --f-time 1
// --b-time 2 --comm-latency 0.1 --activation-bytes 1000 --message-bytes 100,
// for one rank's share of the model (split over v stages).
SimResult SimulateLikeGoldenFlags(const Schedule& s) {
  const int v = s.StagesPerRank();
  StageCost c;
  c.forward = MsToNs(1.0 / v);
  c.backward = MsToNs(2.0 / v);
  c.activation_bytes = 1000 / v;
  c.message_bytes = 100;
  return Simulate(s, CostModel::Uniform(s.stages, c, Link{MsToNs(0.1), 0}));
}

// A one-rank trace with one compute action (0F0 over [0, 1) ms) and then `more`
// events (each starting with a comma); `other` goes into otherData.
std::string OneRankTrace(const std::string& more, const std::string& other = "") {
  return R"({"otherData": {)" + other +
         R"("pplab_trace_version": 1, "ranks": 1}, "traceEvents": [)"
         R"({"ph": "X", "cat": "compute", "pid": 0, "tid": 0, "ts": 0, "dur": 1000, "args": {"action": "0F0"}})" +
         more + "]}";
}

std::string Counter(const std::string& bytes) {
  return R"(, {"ph": "C", "name": "activation bytes", "pid": 0, "ts": 0, "args": {"bytes": )" + bytes + "}}";
}

}  // namespace

TEST_CASE("simulated traces equal the golden files byte for byte", "[trace]") {
  struct Case {
    const char* file;
    Schedule schedule;
  };
  const Case cases[] = {
      {"1f1b_k2_m3.json", Lower(Generate1F1B(2, 3))},
      {"zb-h1_k2_m3.json", Lower(GenerateZeroBubbleH1(2, 3))},
      {"interleaved-1f1b_k2_m2_v2.json", Lower(GenerateInterleaved1F1B(2, 2, 2))},
  };
  for (const Case& c : cases) {
    INFO(c.file << " (regenerate with: bash tests/data/golden/regenerate.sh)");
    const std::string golden = ReadTextFile(std::string(PPLAB_TEST_DATA_DIR "/golden/") + c.file);
    const std::string got = TimelineToChromeTrace(SimulateLikeGoldenFlags(c.schedule).timeline);
    if (got != golden) {
      size_t i = 0;
      while (i < got.size() && i < golden.size() && got[i] == golden[i]) ++i;
      FAIL("first difference at byte " << i << ": got '" << got.substr(i, 80) << "' expected '" << golden.substr(i, 80)
                                       << "'");
    }
  }
}

TEST_CASE("trace round-trips: events, times and memory come back exactly", "[trace]") {
  const Schedule s = Lower(GenerateZeroBubbleH2(3, 6));
  StageCost c;
  c.forward = 1234567;
  c.backward = 2345677;
  c.activation_bytes = 4096;
  c.weight_grad_bytes = 512;
  c.message_bytes = 99;
  Timeline t = Simulate(s, CostModel::Uniform(3, c, Link{1001, 0.5})).timeline;
  t.recompute = "0,2";
  t.data_parallel = 4;
  const Timeline back = TimelineFromChromeTrace(TimelineToChromeTrace(t), "mem");
  CHECK(back.name == "zb-h2");
  CHECK(back.recompute == "0,2");
  CHECK(back.data_parallel == 4);
  CHECK(back.source == "simulated");
  CHECK(back.ranks == 3);
  REQUIRE(back.events.size() == t.events.size());
  for (size_t i = 0; i < t.events.size(); ++i) {
    CHECK(back.events[i].rank == t.events[i].rank);
    CHECK(back.events[i].action == t.events[i].action);
    CHECK(back.events[i].start == t.events[i].start);
    CHECK(back.events[i].end == t.events[i].end);
  }
  REQUIRE(back.memory.size() == t.memory.size());
  for (size_t i = 0; i < t.memory.size(); ++i) {
    CHECK(back.memory[i].time == t.memory[i].time);
    CHECK(back.memory[i].bytes == t.memory[i].bytes);
  }
}

TEST_CASE("trace has named rank processes, flow arrows and a memory counter", "[trace]") {
  const Schedule s = Lower(Generate1F1B(2, 2));
  StageCost c;
  c.forward = 1000;
  c.backward = 2000;
  c.activation_bytes = 10;
  const auto doc = nlohmann::json::parse(TimelineToChromeTrace(Simulate(s, CostModel::Uniform(2, c, {})).timeline));
  int process_names = 0, flow_starts = 0, flow_ends = 0, counters = 0, compute = 0;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") ++process_names;
    if (e["ph"] == "s") ++flow_starts;
    if (e["ph"] == "f") ++flow_ends;
    if (e["ph"] == "C") ++counters;
    if (e["ph"] == "X" && e["cat"] == "compute") {
      ++compute;
      CHECK(e["name"].get<std::string>() ==
            std::string(e["args"]["kind"]) + " s" + e["args"]["stage"].dump() + " mb" + e["args"]["microbatch"].dump());
    }
  }
  CHECK(process_names == 2);
  CHECK(flow_starts == 4);  // 2 activations + 2 gradients
  CHECK(flow_ends == 4);
  CHECK(compute == 8);
  CHECK(counters == 8);  // one sample per F and per B on each rank
}

TEST_CASE("bad traces are rejected naming the file and event", "[trace]") {
  CHECK_THROWS_WITH(TimelineFromChromeTrace("{", "t.json"), Catch::Contains("t.json: not valid JSON"));
  // A key given twice, which a lenient parser resolves to its last value unseen.
  CHECK_THROWS_WITH(TimelineFromChromeTrace(R"({"traceEvents": [], "traceEvents": []})", "t.json"),
                    Catch::Contains("t.json: key 'traceEvents' is given twice in one object"));
  CHECK_THROWS_WITH(TimelineFromChromeTrace(R"({"traceEvents": [{"ts": 1e400}]})", "t.json"),
                    Catch::Contains("t.json: not valid JSON"));
  CHECK_THROWS_WITH(TimelineFromChromeTrace("{\"traceEvents\": []}", "t.json"), Catch::Contains("not a pplab trace"));
  const std::string head = R"({"otherData": {"pplab_trace_version": 1, "ranks": 1}, "traceEvents": [)";
  CHECK_THROWS_WITH(TimelineFromChromeTrace(head + R"({"ph": "X", "pid": 3, "ts": 0, "dur": 1}]})", "t.json"),
                    Catch::Contains("t.json: traceEvents[0]: pid 3 is not a rank"));
  // As written, not wrapped to -1.
  CHECK_THROWS_WITH(
      TimelineFromChromeTrace(head + R"({"ph": "X", "pid": 18446744073709551615, "ts": 0, "dur": 1}]})", "t.json"),
      Catch::Contains("t.json: traceEvents[0]: pid 18446744073709551615 is not a rank"));
  CHECK_THROWS_WITH(TimelineFromChromeTrace(
                        head + R"({"ph": "X", "pid": 0, "ts": 0, "dur": 1, "args": {"action": "0Z0"}}]})", "t.json"),
                    Catch::Contains("bad action '0Z0'"));
  CHECK_THROWS_WITH(
      TimelineFromChromeTrace(head + R"({"ph": "X", "pid": 0, "ts": 1e300, "dur": 1, "args": {"action": "0F0"}}]})",
                              "t.json"),
      Catch::Contains("'ts' must be in [0, 1e15]"));
  CHECK_THROWS_WITH(
      TimelineFromChromeTrace(
          R"({"otherData": {"pplab_trace_version": 1, "ranks": 10000000}, "traceEvents": [{"ph": "M"}]})", "t.json"),
      Catch::Contains("otherData.ranks must be an integer in [1, number of events]"));
  CHECK_THROWS_WITH(
      TimelineFromChromeTrace(
          R"({"otherData": {"pplab_trace_version": 1, "ranks": 1, "recompute": true}, "traceEvents": [{"ph": "M"}]})",
          "t.json"),
      Catch::Contains("t.json: otherData.recompute must be a string"));
  for (const char* bad : {"0", "2.5", "\"2\"", "2000000"}) {
    CHECK_THROWS_WITH(
        TimelineFromChromeTrace(R"({"otherData": {"pplab_trace_version": 1, "ranks": 1, "data_parallel": )" +
                                    std::string(bad) + R"(}, "traceEvents": [{"ph": "M"}]})",
                                "t.json"),
        Catch::Contains("t.json: otherData.data_parallel must be an integer in [1, 2^20]"));
  }
  CHECK_THROWS_WITH(
      TimelineFromChromeTrace(R"({"otherData": {"pplab_trace_version": 1, "ranks": 1, "name": 7}, "traceEvents": []})",
                              "t.json"),
      Catch::Equals("t.json: otherData.name must be a string, got 7"));
  // No library code ("[json.exception.parse_error.101]") in what a user reads.
  CHECK_THROWS_WITH(TimelineFromChromeTrace("{", "t.json"), !Catch::Contains("json.exception"));
  // Per-step work by the names a cost model's `step` gives.
  CHECK_THROWS_WITH(
      TimelineFromChromeTrace(
          OneRankTrace(R"(, {"ph": "X", "cat": "step", "pid": 0, "ts": 1, "dur": 1, "args": {"step": "foo"}})"),
          "t.json"),
      Catch::StartsWith(
          "t.json: traceEvents[1]: args.step \"foo\" is not per-step work a trace holds (loss_allreduce, "));
  // Sums of compute time stay within int64 nanoseconds.
  std::string ten = R"({"otherData": {"pplab_trace_version": 1, "ranks": 10}, "traceEvents": [)";
  for (int r = 0; r < 10; ++r) {
    ten += (r ? ", " : "") + std::string(R"({"ph": "X", "pid": )") + std::to_string(r) + R"(, "ts": 0, "dur": 1e15, )" +
           R"("args": {"action": ")" + std::to_string(r) + R"(F0"}})";
  }
  CHECK_THROWS_WITH(TimelineFromChromeTrace(ten + "]}", "t.json"),
                    Catch::Contains("t.json: its compute events add up to") && Catch::Contains("past the 2^62 ns"));
}

TEST_CASE(
    "a counter's args.bytes that would wrap, or a simulated one below 0, is refused naming the file and the field",
    "[trace]") {
  const std::string simulated = R"("source": "simulated", )";
  CHECK(TimelineFromChromeTrace(OneRankTrace(Counter("0"), simulated), "t.json").memory.at(0).bytes == 0);
  CHECK(TimelineFromChromeTrace(OneRankTrace(Counter("9223372036854775807"), simulated), "t.json").memory.at(0).bytes ==
        9223372036854775807LL);
  // 2^64 - 1 would wrap to -1 and 2^63 to the most negative Bytes; a simulated rank holds no negative bytes.
  for (const char* bad : {"-5", "-1", "18446744073709551615", "9223372036854775808", "1.5"}) {
    INFO(bad);
    CHECK_THROWS_WITH(TimelineFromChromeTrace(OneRankTrace(Counter(bad), simulated), "t.json"),
                      Catch::Equals(std::string("t.json: traceEvents[1]: counter args.bytes must be an integer in [0, "
                                                "2^63 - 1], got ") +
                                    bad));
  }
  // A measured sample counts from the step's start: below 0 when the step freed more than it made.
  const std::string measured = R"("source": "measured", )";
  CHECK(TimelineFromChromeTrace(OneRankTrace(Counter("-20"), measured), "t.json").memory.at(0).bytes == -20);
  for (const char* bad : {"18446744073709551615", "9223372036854775808", "1.5"}) {
    INFO(bad);
    CHECK_THROWS_WITH(TimelineFromChromeTrace(OneRankTrace(Counter(bad), measured), "t.json"),
                      Catch::Equals(std::string("t.json: traceEvents[1]: counter args.bytes must be an integer in "
                                                "[-2^63, 2^63 - 1], got ") +
                                    bad));
  }
}

TEST_CASE("a trace without a compute action is refused in one line naming the file", "[trace]") {
  const std::string head = R"({"otherData": {"pplab_trace_version": 1, "ranks": 1}, "traceEvents": [)";
  const std::string no_compute = "t.json: the trace has no compute action (F, B, I, W or OVERLAP_F_B)";
  for (const std::string& events : {
           std::string(R"({"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "rank 0"}})"),
           std::string(R"({"ph": "X", "pid": 0, "ts": 0, "dur": 1, "args": {"action": "0SEND_F0"}})"),
           std::string(R"({"ph": "X", "cat": "step", "pid": 0, "ts": 0, "dur": 1, "args": {"step": "optimizer"}})"),
           std::string(R"({"ph": "C", "name": "activation bytes", "pid": 0, "ts": 0, "args": {"bytes": 1}})"),
       }) {
    INFO(events);
    CHECK_THROWS_WITH(TimelineFromChromeTrace(head + events + "]}", "t.json"), Catch::Equals(no_compute));
  }
  CHECK(TimelineFromChromeTrace(OneRankTrace(""), "t.json").events.size() == 1);
}

TEST_CASE("a stage id no compute action of the trace could have is refused naming the file and the action", "[trace]") {
  // Two compute parts, so stages 0 and 1 at most.
  const std::string f1 = R"(, {"ph": "X", "pid": 0, "ts": 1000, "dur": 1000, "args": {"action": "1F0"}})";
  CHECK(TimelineFromChromeTrace(OneRankTrace(f1), "t.json").events.size() == 2);
  const std::string far = R"(, {"ph": "X", "pid": 0, "ts": 1000, "dur": 1000, "args": {"action": "100000000F0"}})";
  CHECK_THROWS_WITH(TimelineFromChromeTrace(OneRankTrace(far), "t.json"),
                    Catch::Equals("t.json: traceEvents[1]: action 100000000F0 is on stage 100000000, but the trace "
                                  "computes 2 F, B, I and W (each part of an OVERLAP_F_B counted) and every stage "
                                  "computes at least once, so its stages are below 2"));
  const std::string send = R"(, {"ph": "X", "pid": 0, "ts": 1000, "dur": 0, "args": {"action": "1SEND_F0"}})";
  CHECK_THROWS_WITH(TimelineFromChromeTrace(OneRankTrace(send), "t.json"),
                    Catch::StartsWith("t.json: traceEvents[1]: action 1SEND_F0 is on stage 1, but the trace computes 1 "
                                      "F, B, I and W"));
  // An overlap's backward part counts too: 3 parts, stage 7 is beyond them.
  const std::string overlap =
      R"(, {"ph": "X", "pid": 0, "ts": 1000, "dur": 1000, "args": {"action": "(1F0;7B0)OVERLAP_F_B"}})";
  CHECK_THROWS_WITH(TimelineFromChromeTrace(OneRankTrace(overlap), "t.json"),
                    Catch::StartsWith("t.json: traceEvents[1]: action (1F0;7B0)OVERLAP_F_B is on stage 7, but the "
                                      "trace computes 3 F, B, I and W"));
}

TEST_CASE("the golden traces, interleaved ones included, load through the reader", "[trace]") {
  for (const char* file : {"1f1b_k2_m3.json", "zb-h1_k2_m3.json", "interleaved-1f1b_k2_m2_v2.json"}) {
    INFO(file);
    const std::string path = std::string(PPLAB_TEST_DATA_DIR "/golden/") + file;
    const Timeline t = TimelineFromChromeTrace(ReadTextFile(path), path);
    CHECK(t.ranks == 2);
    CHECK(!t.events.empty());
  }
}

TEST_CASE("two compute actions of one rank that share time are refused naming the file, the rank and both events",
          "[trace]") {
  auto event = [](const char* action, int pid, const char* ts, const char* dur, const char* cat = "compute") {
    return std::string(R"(, {"ph": "X", "cat": ")") + cat + R"(", "pid": )" + std::to_string(pid) + R"(, "ts": )" + ts +
           R"(, "dur": )" + dur + R"(, "args": {"action": ")" + action + R"("}})";
  };
  // 0F0 is [0, 1000) us on rank 0.
  CHECK_THROWS_WITH(TimelineFromChromeTrace(OneRankTrace(event("0F1", 0, "999.999", "1000")), "t.json"),
                    Catch::Equals("t.json: rank 0 runs 0F1 (traceEvents[1]) from 999.999 us, before 0F0 "
                                  "(traceEvents[0]) ends at 1000.000 us; a rank runs one compute action at a time"));
  // One inside the other, listed first.
  CHECK_THROWS_WITH(
      TimelineFromChromeTrace(OneRankTrace(event("0B0", 0, "2000", "500") + event("0F1", 0, "1500", "2000")), "t.json"),
      Catch::Equals("t.json: rank 0 runs 0B0 (traceEvents[1]) from 2000.000 us, before 0F1 (traceEvents[2]) ends at "
                    "3500.000 us; a rank runs one compute action at a time"));
  // A copy of an event, with or without length.
  CHECK_THROWS_WITH(TimelineFromChromeTrace(OneRankTrace(event("0F0", 0, "0", "1000")), "t.json"),
                    Catch::Equals("t.json: rank 0 runs 0F0 twice over the same time, traceEvents[0] and traceEvents[1] "
                                  "(from 0.000 us to 1000.000 us); a rank runs each compute action once"));
  CHECK_THROWS_WITH(TimelineFromChromeTrace(OneRankTrace(event("0W0", 0, "1000", "0") + event("0B0", 0, "1000", "0") +
                                                         event("0W0", 0, "1000", "0")),
                                            "t.json"),
                    Catch::Contains("rank 0 runs 0W0 twice over the same time, traceEvents[1] and traceEvents[3]"));
}

TEST_CASE("an action run twice in a step, or recomputed stages that are not the trace's, are refused by name",
          "[trace]") {
  auto event = [](const char* action, const char* ts) {
    return std::string(R"(, {"ph": "X", "cat": "compute", "pid": 0, "ts": )") + ts +
           R"(, "dur": 1000, "args": {"action": ")" + action + R"("}})";
  };
  // 0F0 is [0, 1000) us; another 0F0 later, and a forward inside an overlap.
  CHECK_THROWS_WITH(TimelineFromChromeTrace(OneRankTrace(event("0B0", "1000") + event("0F0", "2000")), "t.json"),
                    Catch::Equals("t.json: traceEvents[2]: action 0F0, which traceEvents[0] ran already; a step runs "
                                  "each action once"));
  CHECK_THROWS_WITH(TimelineFromChromeTrace(OneRankTrace(event("(0F0;0B1)OVERLAP_F_B", "1000")), "t.json"),
                    Catch::Contains("action (0F0;0B1)OVERLAP_F_B runs 0F0, which traceEvents[0] ran already"));
  // A message's send or receive, and a rank's per-step work, once too: a
  // RECV copied with a later end was read as the arrival, a copied step
  // event 5 s on moved the step's end there.
  const std::string recv =
      R"(, {"ph": "X", "cat": "comm", "pid": 0, "ts": 0, "dur": 10, "args": {"action": "0RECV_B0"}})";
  CHECK_THROWS_WITH(TimelineFromChromeTrace(OneRankTrace(event("0B0", "1000") + recv + recv), "t.json"),
                    Catch::Equals("t.json: traceEvents[3]: action 0RECV_B0, which traceEvents[2] ran already; a step "
                                  "runs each action once"));
  // UNSHARD and RESHARD of a stage may alternate within a step (validate
  // allows it): read.
  const std::string unshard =
      R"(, {"ph": "X", "cat": "comm", "pid": 0, "ts": 0, "dur": 1, "args": {"action": "0UNSHARD"}})";
  CHECK(TimelineFromChromeTrace(OneRankTrace(event("0B0", "1000") + unshard + unshard), "t.json").events.size() == 4);
  const std::string step = R"(, {"ph": "X", "cat": "step", "pid": 0, "ts": 2000, "dur": 5, "args": {"step": "clip"}})";
  CHECK(TimelineFromChromeTrace(OneRankTrace(event("0B0", "1000") + step), "t.json").step_events.size() == 1);
  CHECK_THROWS_WITH(TimelineFromChromeTrace(OneRankTrace(event("0B0", "1000") + step + step), "t.json"),
                    Catch::Equals("t.json: traceEvents[3]: rank 0's args.step \"clip\", which traceEvents[2] ran "
                                  "already; a step runs each once"));
  const std::string two = event("0B0", "1000") + event("1F0", "2000") + event("1B0", "3000");
  CHECK(TimelineFromChromeTrace(OneRankTrace(two, R"("recompute": "0,1", )"), "t.json").recompute == "0,1");
  CHECK(TimelineFromChromeTrace(OneRankTrace(two, R"("recompute": "all", )"), "t.json").recompute == "all");
  for (const char* bad : {"7,banana", "2", "0,0", "0,", ",1", "", "-1", "1 "}) {
    INFO(bad);
    const std::string other = std::string(R"("recompute": ")") + bad + R"(", )";
    if (std::string(bad).empty()) {
      CHECK(TimelineFromChromeTrace(OneRankTrace(two, other), "t.json").recompute.empty());  // none
      continue;
    }
    CHECK_THROWS_WITH(TimelineFromChromeTrace(OneRankTrace(two, other), "t.json"),
                      Catch::Equals(std::string("t.json: otherData.recompute must be \"all\" or distinct stage ids "
                                                "below 2 like \"0,2\", got \"") +
                                    bad + "\""));
  }
}

TEST_CASE(
    "compute back to back, zero-length compute, comm, collectives and step work overlapping compute, and ranks "
    "computing at once all load",
    "[trace]") {
  const std::string two_ranks = R"({"otherData": {"pplab_trace_version": 1, "ranks": 2, "source": "measured", )"
                                R"("devices": [0, 0]}, "traceEvents": [)";
  auto event = [](const char* action, int pid, const char* ts, const char* dur, const char* cat) {
    return std::string(R"({"ph": "X", "cat": ")") + cat + R"(", "pid": )" + std::to_string(pid) + R"(, "ts": )" + ts +
           R"(, "dur": )" + dur + R"(, "args": {"action": ")" + action + R"("}})";
  };
  const std::string events[] = {
      event("0F0", 0, "0", "1000", "compute"),
      event("0F1", 0, "1000", "1000", "compute"),  // back to back
      event("0W0", 0, "2000", "0", "compute"),     // zero-length, where the one before ends
      event("0W1", 0, "2000", "0", "compute"),     // another at the same instant
      event("0SEND_F0", 0, "1000", "500", "comm"),
      event("0REDUCE_GRAD", 0, "1500", "2000", "comm"),
      event("1RECV_F0", 1, "0", "1100", "comm"),  // measured: posted at the step's start
      event("1F0", 1, "500", "1000", "compute"),  // the same device as rank 0's F0, at once
      R"({"ph": "X", "cat": "step", "pid": 0, "ts": 1200, "dur": 100, "args": {"step": "optimizer"}})",
  };
  std::string text = two_ranks;
  for (const std::string& e : events) text += (&e == &events[0] ? "" : ",") + e;
  const Timeline t = TimelineFromChromeTrace(text + "]}", "t.json");
  CHECK(t.events.size() == 8);
  CHECK(t.step_events.size() == 1);
}

}  // namespace pplab::chrome_trace_test

namespace pplab::chrome_trace_test {

TEST_CASE("a trace whose events all start late is read from its first event, step work and memory moved alike",
          "[trace]") {
  const std::string shifted =
      R"({"otherData": {"pplab_trace_version": 1, "ranks": 1}, "traceEvents": [)"
      R"({"ph": "X", "cat": "comm", "pid": 0, "ts": 5000, "dur": 100, "args": {"action": "0RECV_B0"}}, )"
      R"({"ph": "X", "cat": "compute", "pid": 0, "ts": 5500, "dur": 1000, "args": {"action": "0F0"}}, )"
      R"({"ph": "C", "name": "activation bytes", "pid": 0, "ts": 6500, "args": {"bytes": 7}}, )"
      R"({"ph": "X", "cat": "step", "pid": 0, "ts": 6500, "dur": 200, "args": {"step": "optimizer"}}]})";
  const Timeline t = TimelineFromChromeTrace(shifted, "t.json");
  REQUIRE(t.events.size() == 2);
  CHECK(t.events[0].start == 0);  // the earliest event of any kind is time 0
  CHECK(t.events[1].start == MsToNs(0.5));
  CHECK(t.events[1].end == MsToNs(1.5));
  CHECK(t.memory.at(0).time == MsToNs(1.5));
  CHECK(t.step_events.at(0).start == MsToNs(1.5));
  CHECK(t.Makespan() == MsToNs(1.7));
  // One that starts at 0 is read as written.
  CHECK(TimelineFromChromeTrace(OneRankTrace(""), "t.json").events.at(0).end == MsToNs(1));
}

}  // namespace pplab::chrome_trace_test
