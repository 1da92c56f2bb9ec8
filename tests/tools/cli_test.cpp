// Runs the pplab binary as a user would and checks exit codes and messages.
#include <sys/stat.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "schedules/file_io.h"
#include "tests/run_pplab.h"
#include "tests/tools/cli_test_support.h"
#include "traces/chrome_trace.h"

namespace pplab::cli_test {

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
      {"bench --sizes 2x4x5", 2, "--sizes: '2x4x5' is not KxM"},
      // Read whole, never wrapped: 4294967300 ran as K = 4.
      {"bench --sizes 4294967300x8", 2, "--sizes: '4294967300x8' is not KxM"},
      {"bench --sizes 8x4294967312", 2, "--sizes: '8x4294967312' is not KxM"},
      {"bench --sizes 1048577x1", 2, "--sizes: '1048577x1' is not KxM with K in [1, 1048576]"},
      {"bench --sizes +4x8", 2, "--sizes: '+4x8' is not KxM"},
      {"bench -v 0", 105, "--virtual"},
      // Found before the table starts, not after the sizes before them ran.
      {"bench --sizes 4x4,1000x100000", 2, "pplab: error: --sizes: 1000x100000 gives 1f1b 200000000 compute"},
      {"bench -s zb-auto --sizes 4x4", 2, "bench -s zb-auto: its order is searched with a cost model"},
      {"show --trace t.json -s zb-h1", 108, "--schedule excludes --trace"},
      {"show --trace t.json --f-time 5", 108, "--f-time excludes --trace"},
      {"show --steps --trace t.json", 108, "--steps excludes --trace"},
      {"simulate -k 2 -m 4 --device-slots 2", 2,
       "--device-slots: 1 entries, but the ranks use devices 0 to 1 (give one per device id, or --devices"},
      // More than the devices: named as the flag's, not as a cost file's field.
      {"simulate -k 2 -m 4 --devices 0,0 --device-slots 1,1", 2,
       "--device-slots: 2 entries, but the ranks use devices 0 to 0 (give one per device id)"},
      {"simulate --devices-from /nonexistent/t.json", 2, "cannot read /nonexistent/t.json"},
      {"plan --model tiny --ranks 2 --global-batch 8 --memory-per-rank 1GiB --schedules gpipe,1f1b,GPipe", 2,
       "--schedules names gpipe twice (GPipe is gpipe)"},
      {"sweep --schedules 1f1b,1F1B -k 2 -m 4", 2, "--schedules names 1f1b twice (1F1B is 1f1b)"},
      {"sweep --schedules 1f1b -k 2,4,2 -m 4", 2, "--ranks gives 2 twice"},
      {"compare --schedules zb-h1,zb-h1", 2, "--schedules names zb-h1 twice"},
      {"compare --schedules nope,1f1b", 2, "unknown schedule 'nope'"},
      {"simulate --plan " PPLAB_TEST_DATA_DIR "/deadlock.csv", 2, "deadlock.csv: invalid schedule: deadlock"},
      {"frobnicate", 2, "unknown command 'frobnicate'"},
      {"simulate -s 1f1b -v 7", 2, "--virtual must be 1"},
      {"simulate --plan " PPLAB_TEST_DATA_DIR "/pytorch_1f1b_k2_m2.csv -k 4", 108, "--ranks excludes --plan"},
      {"show -k 100000 -m 1 --columns 10000", 2, "too large a picture"},
      {"simulate -k 100000 -m 100000", 2, "more than pplab plans"},
      {"simulate -s v-half -k 100000 -m 1", 2, "needs 100000 x 600002 slots, more than pplab plans"},
      {"simulate --f-time 1e13", 105, "--f-time"},
      {"simulate --comm-bandwidth 1e-300 --message-bytes 1e6", 105, "--comm-bandwidth"},
  };
  for (const Case& c : cases) {
    const PplabRun r = Pplab(c.args);
    INFO(c.args << "\n" << r.out);
    CHECK(r.code == c.code);
    CHECK_THAT(r.out, Catch::Contains(c.says));
  }
  // A bad size late in the list stops bench before its table starts.
  const PplabRun late = Pplab("bench --sizes 4x8,0x1");
  CHECK(late.code == 2);
  CHECK(late.out ==
        "pplab: error: --sizes: '0x1' is not KxM with K in [1, 1048576] and M in [1, 16777216] (e.g. 64x1024)\n");
  const PplabRun huge = Pplab("bench --sizes 4x4,1000x100000");
  CHECK(huge.out.rfind("pplab: error: --sizes: 1000x100000", 0) == 0);  // no row, no header before it
  // The memory limits shape zb-auto alone: another schedule would run past them unsaid.
  const PplabRun limit = Pplab("simulate -s 1f1b -k 4 -m 8 --inflight-limit 3");
  CHECK(limit.code == 2);
  CHECK(
      limit.out ==
      "pplab: error: --inflight-limit shapes zb-auto's search only; 1f1b runs as it is (its peak is in the summary)\n");
  CHECK(Pplab("simulate -s zb-auto -k 4 -m 8 --inflight-limit 3").code == 0);
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
  PplabRun r = Pplab("compare -k 4 -m 6 --csv");
  REQUIRE(r.code == 0);  // all schedules, by default: a family's rule passing over one is no failure
  CHECK_THAT(r.out, Catch::Contains("skipped: interleaved-1f1b: Megatron's rule"));
  CHECK_THAT(r.out, Catch::Contains("\nzb-v,"));
  // Named in --schedules, a skipped one makes the exit 1, after the others' rows.
  r = Pplab("compare -k 4 -m 6 --schedules 1f1b,interleaved-1f1b --json");
  INFO(r.out);
  CHECK(r.code == 1);
  CHECK_THAT(r.out, Catch::Contains("\"schedule\": \"1f1b\""));
  CHECK_THAT(r.out, Catch::Contains("compare: 1 of the 2 schedules named in --schedules skipped (lines above): "
                                    "interleaved-1f1b\n"));
  // sweep: a named schedule with some rows in the grid exits 0; with none, 1.
  r = Pplab("sweep -k 4 -m 6,8 -v 2 --schedules 1f1b,interleaved-1f1b");
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("\ninterleaved-1f1b,4,2,8,8,"));
  r = Pplab("sweep -k 4 -m 6 -v 2 --schedules 1f1b,interleaved-1f1b");
  CHECK(r.code == 1);
  CHECK_THAT(r.out, Catch::Contains("\n1f1b,4,1,4,6,") &&
                        Catch::Contains("sweep: no cell of the grid accepts interleaved-1f1b, named in --schedules"));
}

TEST_CASE("cli: a --recompute stage some schedules lack skips those in compare and sweep, naming them", "[cli]") {
  // Stage 5 is in the 8-stage plans of K = 4 (v = 2), not in 1f1b's 4:
  // compare stopped at the first 4-stage schedule.
  PplabRun r = Pplab("compare -k 4 -m 8 --recompute 5 --csv");
  INFO(r.out);
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("skipped: 1f1b: --recompute names stage 5, but the plan has stages 0 to 3\n") &&
                        Catch::Contains("skipped: zb-auto: --recompute names stage 5") &&
                        Catch::Contains("\nzb-v,4,2,8,8,"));
  r = Pplab("sweep -k 2,4 -m 8 --recompute 3 --schedules 1f1b");
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("sweep: 1 plans simulated, 1 skipped") && Catch::Contains("\n1f1b,4,1,4,8,"));
}

TEST_CASE("cli: compare and sweep skip the schedules a --cost file's stages do not cost", "[cli]") {
  // A profile of 2 ranks, one stage each: the interleaved and V schedules
  // have 4 stages at K = 2. compare stopped at the first of them.
  const std::string cost = WriteProfiledCost("compare-misfit-cost.json");
  PplabRun r = Pplab("compare -k 2 -m 4 --csv --cost " + cost);
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("skipped: interleaved-1f1b: --cost " + cost +
                                    " costs 2 stages, this schedule has 4 (K=2 x 2 a rank)"));
  CHECK_THAT(r.out, Catch::Contains("\n1f1b,2,1,2,4,") && Catch::Contains("\nzb-h1,2,1,2,4,"));
  // A schedule named alone still stops the command with the error.
  r = Pplab("compare -k 2 -m 4 --schedules zb-v --cost " + cost);
  CHECK(r.code == 2);
  // sweep counts them among the skipped cells.
  r = Pplab("sweep -k 2,4 -m 4 -v 1 --schedules 1f1b,gpipe --cost " + cost);
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out,
             Catch::Contains("sweep: 2 plans simulated, 2 skipped by schedule rules or the --cost file's stages or "
                             "devices"));
  // A file that puts 2 ranks on devices costs no plan of 1 rank, even one of
  // its 2 stages (interleaved, v = 2): of the 6 cells, 1f1b at K = 2 alone.
  const std::string devices = TempPath("compare-misfit-devices.json");
  WriteTextFile(devices, R"({"format": "pplab.cost", "version": 1, "num_stages": 2, "devices": [0, 0],
                             "default": {"forward_ms": 1, "backward_ms": 2}})");
  r = Pplab("sweep -k 1,2 -m 4 -v 1,2 --schedules 1f1b,interleaved-1f1b --cost " + devices + " -o " +
            TempPath("compare-misfit-devices.csv"));
  INFO(r.out);
  // interleaved-1f1b, named, has no row: exit 1, saying so.
  REQUIRE(r.code == 1);
  CHECK_THAT(r.out, Catch::Contains("sweep: no cell of the grid accepts interleaved-1f1b, named in --schedules"));
  CHECK_THAT(r.out, Catch::Contains("skipped: interleaved-1f1b: --cost " + devices +
                                    " puts 2 ranks on devices, this schedule has 1"));
  CHECK_THAT(r.out, Catch::Contains("sweep: 1 plans simulated, 5 skipped"));
  // A file that fits a schedule's stages but not the schedule: CUDA graphs'
  // slots with zb-h1's split B, a link between ranks a plan lacks. compare
  // and sweep stopped at it.
  const std::string graphs = TempPath("compare-misfit-graphs.json");
  WriteTextFile(graphs, R"({"format": "pplab.cost", "version": 1, "num_stages": 2,
                            "default": {"forward_ms": 1, "backward_ms": 2, "graph_slot_bytes": 1000}})");
  r = Pplab("compare -k 2 -m 4 --schedules 1f1b,zb-h1,gpipe --csv --cost " + graphs);
  INFO(r.out);
  // The rows of the others, and exit 1: a named schedule has none.
  REQUIRE(r.code == 1);
  CHECK_THAT(r.out, Catch::Contains("compare: 1 of the 3 schedules named in --schedules skipped (lines above): zb-h1"));
  CHECK_THAT(r.out, Catch::Contains("skipped: zb-h1: ") && Catch::Contains("splits B into I and W"));
  CHECK_THAT(r.out, Catch::Contains("\n1f1b,2,1,2,4,15.000000,") && Catch::Contains("\ngpipe,2,1,2,4,15.000000,"));
  CHECK(Pplab("compare -k 2 -m 4 --schedules zb-h1 --cost " + graphs).code == 2);  // named alone: the error
  const std::string link = TempPath("compare-misfit-link.json");
  WriteTextFile(link, R"({"format": "pplab.cost", "version": 1, "num_stages": 4,
                          "default": {"forward_ms": 0.5, "backward_ms": 1},
                          "links": [{"from": 2, "to": 3, "latency_ms": 1}]})");
  r = Pplab("sweep -k 2,4 -m 8 -v 2 --schedules 1f1b,interleaved-1f1b --cost " + link + " -o " +
            TempPath("compare-misfit-link.csv"));
  INFO(r.out);
  REQUIRE(r.code == 1);
  CHECK_THAT(r.out, Catch::Contains("skipped: interleaved-1f1b K=2 M=8: ") && Catch::Contains("rank 2 to rank 3"));
  CHECK_THAT(r.out, Catch::Contains("sweep: 1 plans simulated, 3 skipped"));
}

TEST_CASE("cli: a --cost file of data-parallel replicas adds the gradients' all-reduce to a generated schedule",
          "[cli][cost]") {
  // F = 1, B = 2, K = 2, M = 4: rank 0's last B ends at (M + K - 1)(f + b) =
  // 15 ms; its stage's 50 ms all-reduce follows it, the step ends at 65 ms.
  const std::string cost = TempPath("dp-reduce-cost.json");
  WriteTextFile(cost, R"({"format": "pplab.cost", "version": 1, "num_stages": 2, "data_parallel": {"degree": 2},
                          "default": {"forward_ms": 1, "backward_ms": 2, "reduce_grad_ms": 50}})");
  for (const std::string command : {"simulate -s 1f1b", "simulate -s gpipe"}) {
    const PplabRun r = Pplab(command + " -k 2 -m 4 --json --cost " + cost);
    INFO(command << "\n" << r.out);
    REQUIRE(r.code == 0);
    CHECK(nlohmann::json::parse(r.out)["makespan"].get<double>() == Approx(65.0));
  }
  PplabRun r = Pplab("sweep --schedules 1f1b -k 2 -m 4 --cost " + cost + " -o " + TempPath("dp-reduce.csv"));
  REQUIRE(r.code == 0);
  CHECK_THAT(ReadTextFile(TempPath("dp-reduce.csv")), Catch::Contains("\n1f1b,2,1,2,4,65.000000,"));
  // One replica: nothing added.
  WriteTextFile(cost, R"({"format": "pplab.cost", "version": 1, "num_stages": 2,
                          "default": {"forward_ms": 1, "backward_ms": 2, "reduce_grad_ms": 50}})");
  r = Pplab("simulate -s 1f1b -k 2 -m 4 --json --cost " + cost);
  REQUIRE(r.code == 0);
  CHECK(nlohmann::json::parse(r.out)["makespan"].get<double>() == Approx(15.0));
}

TEST_CASE("cli: writing to /dev/null leaves it a device", "[cli]") {
  REQUIRE(Pplab("export -s 1f1b -k 2 -m 2 -o /dev/null").code == 0);
  struct stat st {};
  REQUIRE(::lstat("/dev/null", &st) == 0);
  CHECK(S_ISCHR(st.st_mode));
}

TEST_CASE("cli: compare lists every schedule, sweep writes one row per plan", "[cli]") {
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

}  // namespace pplab::cli_test

namespace pplab::cli_test {

TEST_CASE("cli: diff of a trace with itself shows no drift, a delayed action is the first drift", "[cli][diff]") {
  const std::string sim = TempPath("diff_sim.json"), late = TempPath("diff_late.json");
  REQUIRE(Pplab("simulate -s 1f1b -k 2 -m 4 --trace " + sim).code == 0);
  PplabRun r = Pplab("diff " + sim + " " + sim + " --json");
  REQUIRE(r.code == 0);
  nlohmann::json j = nlohmann::json::parse(r.out);
  CHECK(j["first_drift"].is_null());
  CHECK(j["makespan_ratio"].get<double>() == 1.0);
  CHECK(j["predicted"]["makespan"].get<double>() == Approx(15.0));  // (M+K-1)(f+b)
  CHECK(j["threshold_ms"].get<double>() == Approx(0.75));           // 5% of 15 ms
  CHECK(j["matched_compute_actions"] == 16);
  // Delay rank 0's last compute action (0B3, predicted at 13 ms) by 2 ms.
  Timeline t = TimelineFromChromeTrace(ReadTextFile(sim), sim);
  TimelineEvent* last = nullptr;
  for (TimelineEvent& e : t.events) {
    if (e.rank == 0 && IsCompute(e.action.kind)) last = &e;
  }
  REQUIRE(last != nullptr);
  REQUIRE(FormatAction(last->action) == "0B3");
  last->start += MsToNs(2);
  last->end += MsToNs(2);
  WriteTextFile(late, TimelineToChromeTrace(t));
  r = Pplab("diff " + sim + " " + late + " --json --top 1");
  REQUIRE(r.code == 0);
  j = nlohmann::json::parse(r.out);
  CHECK(j["first_drift"]["rank"] == 0);
  CHECK(j["first_drift"]["action"] == "0B3");
  CHECK(j["first_drift"]["predicted"].get<double>() == Approx(13.0));
  CHECK(j["first_drift"]["delta"].get<double>() == Approx(2.0));
  CHECK(j["makespan_error"].get<double>() == Approx(2.0 / 15.0));
  CHECK(j["top_start_deviations"].size() == 1);
  r = Pplab("diff " + sim + " " + late);
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("first drift (|start delta| > 0.750 ms): rank 0 0B3"));
  // A larger threshold sees none.
  r = Pplab("diff " + sim + " " + late + " --threshold-ms 2.5");
  CHECK_THAT(r.out, Catch::Contains("no drift"));
}

TEST_CASE("cli: diff refuses traces of different schedules", "[cli][diff]") {
  const std::string a = TempPath("diff_a.json"), b = TempPath("diff_b.json");
  REQUIRE(Pplab("simulate -s 1f1b -k 2 -m 4 --trace " + a).code == 0);
  REQUIRE(Pplab("simulate -s zb-h1 -k 2 -m 4 --trace " + b).code == 0);
  const PplabRun r = Pplab("diff " + a + " " + b);
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("do not run the same compute actions"));
  CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 1);
  // The same actions in another order: GPipe's rank 0 runs 0F2 where
  // 1F1B's runs 0B0 (the 3rd action), also two plans.
  const std::string g = TempPath("diff_g.json");
  REQUIRE(Pplab("simulate -s gpipe -k 2 -m 4 --trace " + g).code == 0);
  const PplabRun order = Pplab("diff " + g + " " + a);
  CHECK(order.code == 2);
  CHECK(order.out == "pplab: error: " + g + " and " + a +
                         " run rank 0's compute in different orders (its action 3 is 0F2 in one, 0B0 in the other): "
                         "diff two traces of one plan\n");
}

TEST_CASE("cli: --recompute costs a plan recomputed, and refuses costs read off a recomputed run", "[cli][recompute]") {
  const std::string trace = TempPath("recomputed-run.json"), cost = TempPath("recomputed-cost.json");
  // Uniform costs: 1F1B's step (M + K - 1)(F + B + F) = 5 x 4 ms.
  PplabRun r = Pplab("simulate -s 1f1b -k 2 -m 4 --recompute all --json --trace " + trace);
  REQUIRE(r.code == 0);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  CHECK(j["makespan"].get<double>() == Approx(20.0));
  CHECK(j["recompute"] == "all");
  // A run that recomputed records it; its costs carry it; costing them
  // recomputed again would count the forward twice.
  Timeline run = TimelineFromChromeTrace(ReadTextFile(trace), trace);
  run.recompute = "all";
  WriteTextFile(trace, TimelineToChromeTrace(run));
  REQUIRE(Pplab("stats " + trace + " --cost-out " + cost).code == 0);
  CHECK(nlohmann::json::parse(ReadTextFile(cost))["meta"]["recomputed"] == "all");
  r = Pplab("simulate -s 1f1b -k 2 -m 4 --cost " + cost + " --recompute 1");
  CHECK(r.code != 0);
  CHECK_THAT(r.out, Catch::Contains("was estimated from a run that recomputed stages \"all\"") &&
                        Catch::Contains("drop --recompute"));
  r = Pplab("simulate -s 1f1b -k 2 -m 4 --cost " + cost + " --json");
  REQUIRE(r.code == 0);
  CHECK(nlohmann::json::parse(r.out)["makespan"].get<double>() == Approx(20.0));
}

TEST_CASE("cli: a profiled --cost refuses flags that disagree with what it was measured with", "[cli][cost]") {
  const std::string cost = WriteProfiledCost("profiled.json");
  const std::string run = "simulate -s 1f1b -k 2 -m 4 --cost " + cost;
  CHECK(Pplab(run + " --model tiny --microbatch-size 2 --seq-len 32 --partition uniform").code == 0);
  CHECK(Pplab(run + " --partition 2,2").code == 0);
  struct Case {
    const char* flags;
    const char* says;
  };
  const Case cases[] = {
      {" --microbatch-size 4", "was measured with --microbatch-size 2, not 4"},
      {" --seq-len 64", "was measured with --seq-len 32, not 64"},
      {" --model small", "was measured with --model tiny, not small"},
      {" --partition 3,1", "was measured with --partition 2,2, not 3,1"},
  };
  for (const Case& c : cases) {
    const PplabRun r = Pplab(run + c.flags);
    INFO(c.flags);
    CHECK(r.code == 2);
    CHECK_THAT(r.out, Catch::Contains("--cost " + cost + " " + c.says));
  }
  PplabRun r = Pplab("compare --schedules 1f1b,zb-h1 -k 2 -m 4 --cost " + cost + " --microbatch-size 4");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("--microbatch-size 2, not 4"));
  r = Pplab("simulate --seq-len 32");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("--seq-len checks a --cost file written by `pplab profile`"));
}

TEST_CASE("cli: compare names each bubble column's convention and hides byte columns no cost gives", "[cli]") {
  PplabRun r = Pplab("compare --schedules 1f1b,zb-h2 -k 4 -m 8");
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("bubble_%(makespan)") && Catch::Contains("bubble_%(span)") &&
                        Catch::Contains("analytic_%(makespan)") && Catch::Contains("analytic_%(span)"));
  CHECK_THAT(r.out, !Catch::Contains("peak_activation_bytes") && !Catch::Contains("p2p_bytes"));
  CHECK_THAT(r.out, Catch::Contains("not shown: peak activation bytes and p2p bytes"));
  // zb-h2's closed form (0, span convention) sits under analytic_%(span); its
  // makespan-convention cell is empty; 1f1b's (makespan convention) the other way.
  const auto cells = [&](const std::string& name) {
    const size_t at = r.out.find("\n" + name + " ");
    REQUIRE(at != std::string::npos);
    std::istringstream line(r.out.substr(at + 1, r.out.find('\n', at + 1) - at - 1));
    std::vector<std::string> out;
    for (std::string cell; line >> cell;) out.push_back(cell);
    return out;
  };
  const std::vector<std::string> zb = cells("zb-h2"), one = cells("1f1b");
  REQUIRE(zb.size() == 11);  // schedule K S M makespan bubble analytic span-bubble analytic inflight messages
  CHECK(zb[6] == "-");
  CHECK(zb[8] == "0.00");
  CHECK(zb[5] != "0.00");    // the makespan-convention bubble is not 0
  CHECK(one[6] == "27.27");  // (K-1)/(M+K-1) = 3/11
  CHECK(one[8] == "-");
  r = Pplab("compare --schedules 1f1b -k 4 -m 8 --activation-bytes 1e6 --message-bytes 1000");
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("peak_activation_bytes") && Catch::Contains("p2p_bytes"));
  CHECK_THAT(r.out, !Catch::Contains("not shown"));
}

TEST_CASE("cli: compare --csv and sweep write the same columns under the same names", "[cli]") {
  const PplabRun compare = Pplab("compare --schedules 1f1b -k 2 -m 4 --csv");
  const PplabRun sweep = Pplab("sweep --schedules 1f1b -k 2 -m 4");
  REQUIRE(compare.code == 0);
  REQUIRE(sweep.code == 0);
  const std::string header = compare.out.substr(0, compare.out.find('\n'));
  CHECK(header ==
        "schedule,ranks,virtual,stages,microbatches,makespan_ms,bubble_fraction,span_bubble_fraction,"
        "analytic_bubble_fraction,analytic_convention,peak_inflight,peak_activation_bytes,p2p_messages,p2p_bytes");
  CHECK_THAT(sweep.out, Catch::Contains(header + "\n"));
  // The same plan gives the same row.
  const std::string row = compare.out.substr(header.size() + 1);
  CHECK_THAT(sweep.out, Catch::Contains(row));
  CHECK_THAT(row, Catch::StartsWith("1f1b,2,1,2,4,15.000000,0.200000,") && Catch::Contains(",0.200000,makespan,"));
}

TEST_CASE("cli: stats prints tables, not JSON", "[cli]") {
  const std::string trace = TempPath("stats.json");
  REQUIRE(Pplab("simulate -s zb-h1 -k 2 -m 4 --trace " + trace).code == 0);
  const PplabRun r = Pplab("stats " + trace);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, !Catch::Contains("{") && !Catch::Contains("\""));
  CHECK_THAT(r.out, Catch::Contains("stage  forward_ms  backward_ms  backward_input_ms  backward_weight_ms"));
  // zb-h1 splits the backward: B has no mean, I and W do (1 ms F, 2 ms B split evenly).
  CHECK_THAT(r.out, Catch::Contains("\n    0      1.0000            -             1.0000              1.0000\n"));
  CHECK_THAT(r.out,
             Catch::Contains("rank  actions  busy_ms  idle_ms  span_ms  gaps_per_action_ms\n   0       12   12.000"));
}

TEST_CASE("cli: stats gives the messages' time in each direction, and --cost-out a link for each", "[cli]") {
  // Activations take 1 ms to rank 1, gradients 0.3 ms back.
  const std::string cost = TempPath("stats-links-cost.json"), trace = TempPath("stats-links.json"),
                    back = TempPath("stats-links-back.json");
  WriteTextFile(cost, R"({"format": "pplab.cost", "version": 1,
    "default": {"forward_ms": 1.0, "backward_ms": 2.0},
    "stages": [{}, {}], "link": {"latency_ms": 1.0}, "links": [{"from": 1, "to": 0, "latency_ms": 0.3}]})");
  REQUIRE(Pplab("simulate -s 1f1b -k 2 -m 8 --cost " + cost + " --trace " + trace).code == 0);
  PplabRun r = Pplab("stats " + trace + " --cost-out " + back);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("  by direction (3 or more waited for each): rank 0 -> 1 median 1.0000 ms (") &&
                        Catch::Contains("; rank 1 -> 0 median 0.3000 ms ("));
  const nlohmann::json links = nlohmann::json::parse(ReadTextFile(back))["links"];
  REQUIRE(links.size() == 2);
  CHECK(links[0]["from"] == 0);
  CHECK(links[0]["latency_ms"].get<double>() == Approx(1.0));
  CHECK(links[1]["from"] == 1);
  CHECK(links[1]["latency_ms"].get<double>() == Approx(0.3));
  r = Pplab("stats " + trace + " --json");
  REQUIRE(r.code == 0);
  const nlohmann::json by_link = nlohmann::json::parse(r.out)["waited_message_ms"]["by_link"];
  REQUIRE(by_link.size() == 2);
  CHECK(by_link[1]["to"] == 0);
  CHECK(by_link[1]["median"].get<double>() == Approx(0.3));
  // The run's own costs give its step back.
  const nlohmann::json a = nlohmann::json::parse(Pplab("simulate -s 1f1b -k 2 -m 8 --cost " + cost + " --json").out);
  const nlohmann::json b = nlohmann::json::parse(Pplab("simulate -s 1f1b -k 2 -m 8 --cost " + back + " --json").out);
  CHECK(b["makespan"].get<double>() == Approx(a["makespan"].get<double>()));
  // Each SEND moved 3 ms later, past the receiver's start: stats says so,
  // and the file takes a latency of 0 (15 of the 16 are negative; the last
  // reads 0.0000).
  nlohmann::json late = nlohmann::json::parse(ReadTextFile(trace));
  for (auto& e : late["traceEvents"]) {
    if (e.contains("args") && e["args"].value("action", "").find("SEND") != std::string::npos) {
      e["ts"] = e["ts"].get<double>() + 3000;
    }
  }
  const std::string late_trace = TempPath("stats-links-late.json"), late_cost = TempPath("stats-links-late-cost.json");
  WriteTextFile(late_trace, late.dump());
  r = Pplab("stats " + late_trace + " --cost-out " + late_cost);
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("note: 15 of them started on the message before its SEND started (by up to "
                                    "2.7000 ms): the ranks' clocks disagree, or the trace was edited"));
  CHECK(nlohmann::json::parse(ReadTextFile(late_cost))["link"]["latency_ms"] == 0.0);
}

TEST_CASE("cli: stats gives each rank's peak bytes held where the trace has the activation bytes counter", "[cli]") {
  const std::string trace = TempPath("stats-memory.json");
  // 1F1B on K = 4 holds K - r stashes of 1 MB at rank r's peak.
  REQUIRE(Pplab("simulate -s 1f1b -k 4 -m 8 --activation-bytes 1e6 --trace " + trace).code == 0);
  PplabRun r = Pplab("stats " + trace);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("gaps_per_action_ms  peak_held_MB\n"));
  CHECK_THAT(r.out, Catch::Contains("4.000\n") && Catch::Contains("1.000\n"));
  r = Pplab("stats " + trace + " --json");
  REQUIRE(r.code == 0);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  for (int k = 0; k < 4; ++k) CHECK(j["per_rank"][k]["peak_held_bytes"] == 1000000 * (4 - k));
}

}  // namespace pplab::cli_test

namespace pplab::cli_test {

TEST_CASE("cli: PyTorch's schedule names work with -s and appear in pplab schedules", "[cli]") {
  PplabRun r = Pplab("schedules");
  REQUIRE(r.code == 0);
  for (const char* alias :
       {"GPipe", "1F1B", "Interleaved1F1B", "LoopedBFS", "InterleavedZeroBubble", "ZBVZeroBubble", "DualPipeV"}) {
    CHECK_THAT(r.out, Catch::Contains(std::string("also -s ") + alias + " (PyTorch's name)"));
  }
  r = Pplab("simulate -s dualPipeV -k 2 -m 4");
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("dualpipev"));
}

TEST_CASE("cli: export --format csv-compute writes what PyTorch's _load_csv reads, it validates back", "[cli]") {
  const std::string path = TempPath("dualpipev.csv");
  PplabRun r = Pplab("export -s dualpipev -k 2 -m 4 --format csv-compute -o " + path);
  REQUIRE(r.code == 0);
  CHECK(ReadTextFile(path) == ReadTextFile(Data("pytorch/dualpipev_k2_m4_compute_only.csv")));
  r = Pplab("validate " + path);
  CHECK(r.code == 0);
  for (const char* file : {"pytorch/gpipe_k2_m2_compute_only.csv", "pytorch/1f1b_k2_m2_compute_comms.csv"}) {
    r = Pplab(std::string("validate ") + Data(file));
    INFO(file << "\n" << r.out);
    CHECK(r.code == 0);
  }
}

}  // namespace pplab::cli_test

namespace pplab::cli_test {

TEST_CASE("cli: -s zb-auto searches with the flags' costs and keeps to --memory-limit / --inflight-limit",
          "[cli][zb-auto]") {
  const std::string costs = " -k 4 -m 8 --f-time 1 --b-time 2 --w-time 0.5 --json";
  // Default: zb-h1's memory (4 in flight on rank 0); zb-h1 itself takes 30 ms.
  PplabRun r = Pplab("simulate -s zb-auto" + costs);
  REQUIRE(r.code == 0);
  nlohmann::json j = nlohmann::json::parse(r.out);
  CHECK(j["schedule"] == "zb-auto");
  CHECK(j["makespan"].get<double>() == Approx(28.5));
  CHECK(j["per_rank"][0]["peak_inflight"].get<int>() <= 4);
  r = Pplab("simulate -s zb-h1" + costs);
  REQUIRE(r.code == 0);
  CHECK(nlohmann::json::parse(r.out)["makespan"].get<double>() == Approx(30.0));
  // zb-h2's memory (7 in flight): 28 ms against zb-h2's 28.5.
  r = Pplab("simulate -s zb-auto --inflight-limit 7" + costs);
  REQUIRE(r.code == 0);
  CHECK(nlohmann::json::parse(r.out)["makespan"].get<double>() == Approx(28.0));
  // A byte limit below one microbatch's activations fits nothing.
  r = Pplab("simulate -s zb-auto -k 4 -m 8 --activation-bytes 1000 --memory-limit 999");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("no order fits the memory limit"));
  // compare and show take it like any schedule.
  r = Pplab("compare --schedules zb-h1,zb-auto -k 4 -m 8 --f-time 1 --b-time 2 --w-time 0.5 --csv");
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("\nzb-auto,4,1,4,8,28.500000,"));
  r = Pplab("show -s zb-auto -k 4 -m 16");
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Catch::StartsWith("zb-auto [simulated]: makespan"));
}

TEST_CASE("cli: explain --json splits each rank's idle time, the text form is a table", "[cli][explain]") {
  // GPipe K=2 M=2, F=1, B=2, latency 0.5 ms: rank 0 waits 3.5 ms on stage 1
  // and 0.5 ms on the message; rank 1 has 1.5 ms of warm-up and 2.5 of cool-down.
  const std::string trace = TempPath("explain_gpipe.json");
  REQUIRE(Pplab("simulate -s gpipe -k 2 -m 2 --f-time 1 --b-time 2 --comm-latency 0.5 --trace " + trace).code == 0);
  const PplabRun r = Pplab("explain " + trace + " --json");
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["makespan"].get<double>() == 10.0);
  REQUIRE(j["per_rank"].size() == 2);
  const auto& r0 = j["per_rank"][0];
  CHECK(r0["rank"] == 0);
  CHECK(r0["busy"].get<double>() == 6.0);
  CHECK(r0["idle"].get<double>() == 4.0);
  CHECK(r0["warm_up"].get<double>() == 0.0);
  CHECK(r0["cool_down"].get<double>() == 0.0);
  CHECK(r0["imbalance"].get<double>() == 3.5);
  CHECK(r0["comm"].get<double>() == 0.5);
  CHECK(r0["shared_device"].get<double>() == 0.0);
  CHECK(r0["imbalance_by_stage"] == nlohmann::json::parse(R"([{"stage": 1, "ms": 3.5}])"));
  const auto& r1 = j["per_rank"][1];
  CHECK(r1["warm_up"].get<double>() == 1.5);
  CHECK(r1["cool_down"].get<double>() == 2.5);
  CHECK(r1["idle"].get<double>() == 4.0);
  const PplabRun text = Pplab("explain " + trace);
  REQUIRE(text.code == 0);
  CHECK_THAT(text.out, Catch::Contains("warm_up") && Catch::Contains("s1 3.500") && !Catch::Contains("{"));
  const PplabRun missing = Pplab("explain /nonexistent/trace.json");
  CHECK(missing.code == 2);
  CHECK_THAT(missing.out, Catch::Contains("pplab: error: cannot read /nonexistent/trace.json"));
}

}  // namespace pplab::cli_test

namespace pplab::cli_test {

TEST_CASE("cli: simulate --samples reports p50 and p99 of the step time, the same for a seed", "[cli][samples]") {
  const std::string cost = TempPath("spread_cost.json");
  WriteTextFile(cost, R"({"format": "pplab.cost", "version": 1, "num_stages": 2,
    "default": {"forward_ms": 1, "forward_p10_ms": 0.8, "forward_p90_ms": 1.5,
                "backward_ms": 2, "backward_p10_ms": 1.9, "backward_p90_ms": 2.6}})");
  const std::string cmd = "simulate -s 1f1b -k 2 -m 4 --cost " + cost + " --samples 40 --seed 3 --json";
  const PplabRun a = Pplab(cmd), b = Pplab(cmd);
  REQUIRE(a.code == 0);
  CHECK(a.out == b.out);
  const auto j = nlohmann::json::parse(a.out);
  CHECK(j["samples"]["count"] == 40);
  CHECK(j["samples"]["seed"] == 3);
  CHECK(j["samples"]["p50"].get<double>() <= j["samples"]["p99"].get<double>());
  CHECK(j["samples"]["min"].get<double>() > 0);
  const PplabRun text = Pplab("simulate -s 1f1b -k 2 -m 4 --cost " + cost + " --samples 10");
  CHECK_THAT(text.out, Catch::Contains("sampled step time p50"));
  CHECK_THAT(text.out, !Catch::Contains("every sample is the same"));
  // One sample is alone whatever the spreads: nothing to say of them.
  const PplabRun one = Pplab("simulate -s 1f1b -k 2 -m 4 --cost " + cost + " --samples 1");
  CHECK_THAT(one.out, Catch::Contains("1 samples") && !Catch::Contains("every sample is the same"));
  // Costs without a spread draw the same step every time, and say so.
  const PplabRun flat = Pplab("simulate -s 1f1b -k 2 -m 4 --samples 10");
  CHECK_THAT(flat.out, Catch::Contains("p10..p90 15.000..15.000 ms") &&
                           Catch::Contains("(every sample is the same: no time of these costs has a spread"));
  CHECK(Pplab("simulate -s 1f1b --seed 3").code != 0);  // --seed needs --samples
}

}  // namespace pplab::cli_test

namespace pplab::cli_test {

TEST_CASE("cli: simulate --devices shares a device, explain books the wait as shared_device", "[cli][devices]") {
  // GPipe K=2 M=2, F=1, B=2 on one device: makespan 12, rank 1 waits [6,8)
  // for rank 0's B0 (tests/sim/simulator_test.cpp works it out by hand).
  const std::string trace = TempPath("shared.json");
  const PplabRun r = Pplab("simulate -s gpipe -k 2 -m 2 --devices 0,0 --json --trace " + trace);
  REQUIRE(r.code == 0);
  CHECK(nlohmann::json::parse(r.out)["makespan"].get<double>() == 12.0);
  const PplabRun x = Pplab("explain --json " + trace);
  REQUIRE(x.code == 0);
  CHECK(nlohmann::json::parse(x.out)["per_rank"][1]["shared_device"].get<double>() == 2.0);
  const PplabRun bad = Pplab("simulate -s gpipe -k 2 -m 2 --devices 0,0,1");
  CHECK(bad.code == 2);
  CHECK_THAT(bad.out, Catch::Contains("--devices: 3 devices for 2 ranks"));
}

}  // namespace pplab::cli_test

namespace pplab::cli_test {

namespace {

// A measured trace of `schedule` on 2 ranks sharing device 0 of `slots` slots.
Timeline TwoRanksOnOneDevice(const std::string& schedule, int slots, std::vector<TimelineEvent> events) {
  Timeline run;
  run.name = schedule;
  run.source = "measured";
  run.ranks = 2;
  run.devices = {0, 0};
  run.device_slots = {slots};
  run.events = std::move(events);
  return run;
}

}  // namespace

TEST_CASE("cli: simulate --devices-from takes the devices and slots a trace recorded, explain prints them",
          "[cli][devices]") {
  // A run's trace on one CPU host of 2 slots (what train writes for 2 ranks of 1 thread on 2 cores).
  const Timeline run = TwoRanksOnOneDevice("gpipe", 2, {{0, ParseAction("0F0"), 0, 1000}});
  const std::string trace = TempPath("run_devices.json");
  WriteTextFile(trace, TimelineToChromeTrace(run));
  const std::string sim = TempPath("sim_devices.json");
  const PplabRun r = Pplab("simulate -s gpipe -k 2 -m 2 --devices-from " + trace + " --json --trace " + sim);
  REQUIRE(r.code == 0);
  CHECK(nlohmann::json::parse(r.out)["makespan"].get<double>() == 9.0);  // 2 slots: no serialisation
  CHECK(TimelineFromChromeTrace(ReadTextFile(sim), sim).device_slots == std::vector<int>{2});
  const PplabRun one = Pplab("simulate -s gpipe -k 2 -m 2 --devices-from " + trace + " --device-slots 1 --json");
  REQUIRE(one.code == 0);
  CHECK(nlohmann::json::parse(one.out)["makespan"].get<double>() == 12.0);
  const PplabRun x = Pplab("explain --json " + sim);
  REQUIRE(x.code == 0);
  CHECK(nlohmann::json::parse(x.out)["devices"] == nlohmann::json::parse("[0, 0]"));
  CHECK(nlohmann::json::parse(x.out)["device_slots"] == nlohmann::json::parse("[2]"));
  CHECK_THAT(Pplab("explain " + sim).out, Catch::Contains("devices by rank 0,0, slots by device id 2"));
  const PplabRun wrong = Pplab("simulate -s gpipe -k 4 -m 4 --devices-from " + trace);
  CHECK(wrong.code == 2);
  CHECK_THAT(wrong.out, Catch::Contains("the trace has 2 ranks, the plan 4"));
}

TEST_CASE("cli: stats and explain say how ranks sharing a device used it", "[cli][devices]") {
  // Two ranks of a run on one GPU (1 slot): rank 0 computes [0,10] ms, rank
  // 1 [4,12] ms, time-sliced while both run.
  const Timeline run = TwoRanksOnOneDevice(
      "1f1b", 1, {{0, ParseAction("0F0"), 0, 10 * kNsPerMs}, {1, ParseAction("1F0"), 4 * kNsPerMs, 12 * kNsPerMs}});
  const std::string trace = TempPath("stats_shared.json");
  WriteTextFile(trace, TimelineToChromeTrace(run));
  PplabRun r = Pplab("stats " + trace);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("device 0 (ranks 0,1, 1 slot): some rank computing 12.000 ms (100.0 % of the "
                                    "makespan), more ranks than slots at once 6.000 ms; their compute 18.000 ms, "
                                    "1.50x the time the device was busy\n"));
  r = Pplab("stats --json " + trace);
  REQUIRE(r.code == 0);
  CHECK(nlohmann::json::parse(r.out)["shared_devices"] ==
        nlohmann::json::parse(R"([{"device": 0, "ranks": [0, 1], "slots": 1, "busy": 12.0, "over_slots": 6.0,
                                   "compute": 18.0}])"));
  // explain prints the same line under its table, and the same JSON.
  r = Pplab("explain " + trace);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Catch::EndsWith("more ranks than slots at once 6.000 ms; their compute 18.000 ms, 1.50x the "
                                    "time the device was busy\n"));
  r = Pplab("explain --json " + trace);
  REQUIRE(r.code == 0);
  CHECK(nlohmann::json::parse(r.out)["shared_devices"][0]["over_slots"] == 6.0);
  // The simulator runs a shared device's actions one at a time.
  const std::string sim = TempPath("stats_shared_sim.json");
  REQUIRE(Pplab("simulate -s 1f1b -k 2 -m 4 --devices 0,0 --trace " + sim).code == 0);
  r = Pplab("stats --json " + sim);
  REQUIRE(r.code == 0);
  const nlohmann::json d = nlohmann::json::parse(r.out)["shared_devices"].at(0);
  CHECK(d["over_slots"] == 0.0);
  CHECK(d["busy"] == d["compute"]);
  // Ranks on devices of their own: no such line.
  REQUIRE(Pplab("simulate -s 1f1b -k 2 -m 4 --trace " + sim).code == 0);
  r = Pplab("stats --json " + sim);
  CHECK(!nlohmann::json::parse(r.out).contains("shared_devices"));
}

TEST_CASE("cli: --overlapped-pairs costs DualPipe's F&B pairs at once or in turn, over the flags or a --cost file",
          "[cli][cost]") {
  // dualpipe, K=4, M=8, F=1, B=2 a stage (the flags' defaults, and the
  // file's below): each rank runs 8 F and 8 B,
  // 24 ms of work in turn; three of its F&B pairs run at once, each
  // max(F, B) = 2 where in turn it is F + B = 3, so 21 ms at once.
  const auto busy = [](const std::string& flags) {
    const PplabRun r = Pplab("simulate -s dualpipe -k 4 -m 8 --json " + flags);
    REQUIRE(r.code == 0);
    const nlohmann::json j = nlohmann::json::parse(r.out);
    std::vector<double> out;
    for (const auto& rank : j["per_rank"]) out.push_back(rank["busy"].get<double>());
    return out;
  };
  CHECK(busy("") == std::vector<double>(4, 21.0));
  CHECK(busy("--overlapped-pairs at_once") == std::vector<double>(4, 21.0));
  CHECK(busy("--overlapped-pairs in_turn") == std::vector<double>(4, 24.0));
  // A file's word holds unless the flag says otherwise.
  const std::string cost = TempPath("overlapped-pairs-in-turn.json");
  nlohmann::json file = {{"format", "pplab.cost"}, {"version", 1}, {"overlapped_pairs", "in_turn"}};
  for (int s = 0; s < 8; ++s) file["stages"].push_back({{"forward_ms", 1}, {"backward_ms", 2}});
  WriteTextFile(cost, file.dump());
  CHECK(busy("--cost " + cost) == std::vector<double>(4, 24.0));
  CHECK(busy("--cost " + cost + " --overlapped-pairs at_once") == std::vector<double>(4, 21.0));
  const PplabRun bad = Pplab("simulate -s dualpipe -k 4 -m 8 --overlapped-pairs both");
  CHECK(bad.code != 0);
  CHECK_THAT(bad.out, Catch::Contains("--overlapped-pairs"));
  // A cost flag beside the file that gives every cost is refused, not
  // dropped unseen.
  for (const std::string verb : {"simulate -s dualpipe", "compare", "sweep -o -", "show -s dualpipe"}) {
    const PplabRun both = Pplab(verb + " -k 4 -m 8 --cost " + cost + " --comm-latency 5");
    INFO(verb << "\n" << both.out);
    CHECK(both.code != 0);
    CHECK(both.out == "pplab: error: --comm-latency excludes --cost\n");
  }
  // zb-auto's limits where no zb-auto is compared would be dropped unseen.
  for (const std::string verb : {"compare --schedules 1f1b,zb-h1", "sweep --schedules 1f1b -o -"}) {
    const PplabRun limited = Pplab(verb + " -k 4 -m 8 --inflight-limit 2");
    INFO(verb << "\n" << limited.out);
    CHECK(limited.code == 2);
    CHECK(limited.out ==
          "pplab: error: --inflight-limit shapes zb-auto's search only, and --schedules has no zb-auto\n");
  }
}

}  // namespace pplab::cli_test

namespace pplab::cli_test {

TEST_CASE("cli: integer flags are decimal: leading zeros are dropped, 0x is refused", "[cli]") {
  // CLI11 alone read 010 as octal 8, refused 08, and read 0x10 as 16.
  const auto ranks = [](const std::string& flags) {
    const PplabRun r = Pplab("simulate -s 1f1b --json " + flags);
    REQUIRE(r.code == 0);
    const nlohmann::json j = nlohmann::json::parse(r.out);
    return std::make_pair(j["ranks"].get<int>(), j["microbatches"].get<int>());
  };
  CHECK(ranks("-k 010 -m 08") == std::make_pair(10, 8));
  CHECK(ranks("-k 2 -m 0016") == std::make_pair(2, 16));
  const PplabRun sweep = Pplab("sweep -k 010,02 -m 08 --schedules 1f1b -o -");
  REQUIRE(sweep.code == 0);
  CHECK_THAT(sweep.out, Catch::Contains("\n1f1b,10,1,10,8,") && Catch::Contains("\n1f1b,2,1,2,8,"));
  for (const std::string flag : {"-k 0x10", "-m 0b11", "--samples 0x2"}) {
    const PplabRun r = Pplab("simulate -s 1f1b " + flag);
    INFO(flag << "\n" << r.out);
    CHECK(r.code != 0);
    CHECK_THAT(r.out, Catch::Contains("must be a decimal integer, got 0"));
  }
  // Not a whole number: said so (CLI11 said "not in range", as if too large).
  for (const auto& [flag, value] :
       std::vector<std::pair<std::string, std::string>>{{"-k", "8x"}, {"-m", "1e3"}, {"--samples", "2.0"}}) {
    const PplabRun r = Pplab("simulate -s 1f1b " + flag + " " + value);
    INFO(flag << " " << value << "\n" << r.out);
    CHECK(r.code != 0);
    CHECK_THAT(r.out, Catch::Contains("must be a whole number in decimal digits, got " + value));
  }
  // Blanks after the digits are dropped; an empty value is named.
  CHECK(ranks("-k '2 ' -m 4") == std::make_pair(2, 4));
  const PplabRun empty = Pplab("simulate -s 1f1b -k ''");
  CHECK(empty.code != 0);
  CHECK_THAT(empty.out, Catch::Contains("-k: must be a whole number in decimal digits, got an empty value") ||
                            Catch::Contains("--ranks: must be a whole number in decimal digits, got an empty value"));
  const PplabRun list = Pplab("sweep -k 2,4x -m 8 --schedules 1f1b -o -");
  CHECK(list.code != 0);
  CHECK_THAT(list.out, Catch::Contains("must be a whole number in decimal digits, got 4x"));
}

}  // namespace pplab::cli_test

namespace pplab::cli_test {

TEST_CASE("cli: stats gives an overlapped F&B's mean per stage where the trace has one", "[cli]") {
  // dualpipev, F = 0.5 and B = 1 ms a stage, the pairs at once: max(F, B).
  const std::string trace = TempPath("stats_overlap.json");
  REQUIRE(Pplab("simulate -s dualpipev -k 2 -m 4 --trace " + trace).code == 0);
  const PplabRun r = Pplab("stats --json " + trace);
  REQUIRE(r.code == 0);
  const nlohmann::json stages = nlohmann::json::parse(r.out)["stages"];
  REQUIRE(stages.size() == 4);
  CHECK(stages[1]["forward_backward_ms"] == 1.0);
  // A trace without one has no such column.
  REQUIRE(Pplab("simulate -s 1f1b -k 2 -m 4 --trace " + trace).code == 0);
  CHECK_FALSE(nlohmann::json::parse(Pplab("stats --json " + trace).out)["stages"][0].contains("forward_backward_ms"));
}

}  // namespace pplab::cli_test
