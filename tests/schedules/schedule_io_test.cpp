#include "schedules/schedule_io.h"

#include <catch2/catch.hpp>

#include "schedules/error.h"
#include "schedules/file_io.h"
#include "schedules/generators.h"
#include "schedules/lowering.h"
#include "schedules/validate.h"
#include "sim/simulator.h"
#include "tests/generator_rules.h"

namespace pplab::schedule_io_test {

TEST_CASE("schedule JSON round-trips for every generator", "[schedule_io]") {
  for (const GeneratorInfo& g : Generators()) {
    const Schedule s = Lower(GenerateForTest(g, {4, 8, 0}));  // 0: the family's default v
    const std::string text = ScheduleToJson(s);
    const Schedule back = ScheduleFromJson(text, "mem.json");
    INFO(g.name);
    CHECK(back.name == s.name);
    CHECK(back.ranks == s.ranks);
    CHECK(back.stages == s.stages);
    CHECK(back.microbatches == s.microbatches);
    CHECK(back.placement == s.placement);
    CHECK(back.pipeline_starts == s.pipeline_starts);
    CHECK(back.microbatch_pipeline == s.microbatch_pipeline);
    CHECK(back.programs == s.programs);
    CHECK(ScheduleToJson(back) == text);
  }
}

TEST_CASE("a plan's planned train flags are written after the shape and read as the same schedule", "[schedule_io]") {
  const Schedule s = Lower(Generate1F1B(2, 4));
  const std::string text = ScheduleToJson(s, R"({"model": "tiny", "batch_size": 8})");
  CHECK_THAT(text, Catch::Contains("  \"placement\": [0,1],\n  \"planned\": {\"batch_size\":8,\"model\":\"tiny\"},\n"));
  const Schedule back = ScheduleFromJson(text, "p.json");
  CHECK(back.programs == s.programs);
  CHECK(ScheduleToJson(back) == ScheduleToJson(s));  // the schedule carries no flags: train reads them
  std::string bad = text;
  bad.replace(bad.find("{\"batch_size\""), std::string(R"({"batch_size":8,"model":"tiny"})").size(), "[1]");
  CHECK_THROWS_WITH(ScheduleFromJson(bad, "p.json"), "p.json: field 'planned' must be an object of train flags");
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
  // Likewise ranks: a CSV of two actions and 5000 idle rows.
  std::string idle = "0F0,0B0\n";
  for (int r = 0; r < 5000; ++r) idle += ",\n";
  CHECK_THROWS_WITH(ScheduleFromPytorchCsv(idle, "idle.csv", "idle"),
                    Catch::Contains("idle.csv: 5001 ranks, but only 2 actions"));
  CHECK_NOTHROW(ScheduleFromPytorchCsv("0F0,0B0\n,\n", "one_idle.csv", "idle"));  // an idle rank is read
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
                    Catch::Contains("a.csv:2: column 1: 0B0: stage 0 also computes on rank 0 (row 1)"));
  CHECK_THROWS_WITH(ScheduleFromPytorchCsv("0F0,0B0\n2F0,2B0\n", "a.csv", "a"),
                    Catch::Contains("stage 1 has no actions"));
  CHECK_THROWS_WITH(ScheduleFromPytorchCsv("999999999F0\n", "a.csv", "a"),
                    Catch::Contains("implies 1000000000 stages but the file holds 1 actions"));
  CHECK_THROWS_WITH(ScheduleFromPytorchCsv("0F99999999\n", "a.csv", "a"), Catch::Contains("(stage, microbatch) pairs"));
  CHECK_THROWS_WITH(ScheduleFromPytorchCsv("0F0,\x01\x02\n", "a.csv", "a"), Catch::Contains("bad action '\\x01\\x02'"));
  CHECK_THROWS_WITH(ScheduleFromPytorchCsv("\n\n", "a.csv", "a"), Catch::Contains("no rows"));
  CHECK_THROWS_WITH(ScheduleFromPytorchCsv(",,\n", "a.csv", "a"), Catch::Contains("no actions"));
  // A blank line between rows is a slip, not a rank (it made 3 ranks of 2
  // and a bubble of 56 % instead of 33 %); an idle rank is a row of empty cells.
  CHECK_THROWS_WITH(ScheduleFromPytorchCsv("0F0,0F1,0B0,0B1\n\n1F0,1B0,1F1,1B1\n", "a.csv", "a"),
                    Catch::Contains("a.csv:2: a blank line between ranks' rows"));
  CHECK(ScheduleFromPytorchCsv("0F0,0F1,0B0,0B1\n,\n1F0,1B0,1F1,1B1\n", "a.csv", "a").ranks == 3);
  // Lines end in \n, \r\n or a lone \r, as Python's csv module reads them.
  const Schedule lf = ScheduleFromPytorchCsv("0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n", "a.csv", "a");
  for (const char* text : {"0F0,0F1,0B0,0B1\r\n1F0,1B0,1F1,1B1\r\n", "0F0,0F1,0B0,0B1\r1F0,1B0,1F1,1B1\r"}) {
    CHECK(ScheduleFromPytorchCsv(text, "a.csv", "a").programs == lf.programs);
  }
}

TEST_CASE("a PyTorch CSV saved under a .json name is named as one, and a JSON plan under a .csv name",
          "[schedule_io]") {
  const std::string path = std::string(PPLAB_TEST_TMP_DIR) + "/schedule_io_csv_as.json";
  WriteTextFile(path, "0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n");
  CHECK_THROWS_WITH(LoadScheduleFile(path),
                    Catch::Equals(path + ": not JSON: it starts like a PyTorch CSV schedule (an action such as 0F0); "
                                         "name it .csv"));
  const std::string csv = std::string(PPLAB_TEST_TMP_DIR) + "/schedule_io_json_as.csv";
  WriteTextFile(csv, ScheduleToJson(Lower(Generate1F1B(2, 4))));
  CHECK_THROWS_WITH(LoadScheduleFile(csv),
                    Catch::Equals(csv + ": not CSV: it starts like a JSON schedule ('{'); name it .json"));
}

TEST_CASE("loading a missing or empty file is an error naming it", "[schedule_io]") {
  CHECK_THROWS_WITH(LoadScheduleFile("/nonexistent/plan.json"), Catch::Contains("cannot read /nonexistent/plan.json"));
  CHECK_THROWS_WITH(LoadScheduleFile(PPLAB_TEST_DATA_DIR "/empty.csv"), Catch::Contains("empty.csv: file is empty"));
}

}  // namespace pplab::schedule_io_test

namespace pplab::schedule_io_test {

TEST_CASE("PyTorch's compute-only GPipe and 1F1B files, with REDUCE_GRAD, import as our programs", "[schedule_io]") {
  for (const auto& [file, generated] :
       {std::pair<std::string, Schedule>{"gpipe_k2_m2_compute_only.csv", GenerateGPipe(2, 2)},
        {"1f1b_k2_m2_compute_only.csv", Generate1F1B(2, 2)}}) {
    INFO(file);
    const Schedule s = LoadScheduleFile(PPLAB_TEST_DATA_DIR "/pytorch/" + file);
    CHECK(s.microbatches == 2);
    CHECK(s.placement == generated.placement);
    // PyTorch puts REDUCE_GRAD right after each stage's last backward, as AddReduceGrad does.
    CHECK(s.programs == AddReduceGrad(generated).programs);
    CHECK(Validate(Lower(s)).ok());
  }
}

TEST_CASE("PyTorch's with-comms form, with UNSHARD, RESHARD and REDUCE_GRAD, validates and simulates",
          "[schedule_io]") {
  const Schedule s = LoadScheduleFile(PPLAB_TEST_DATA_DIR "/pytorch/1f1b_k2_m2_compute_comms.csv");
  REQUIRE(s.HasComm());
  const ValidationReport report = Validate(s);
  INFO(FormatReport(s, report));
  REQUIRE(report.ok());
  StageCost c;
  c.forward = 1000;
  c.backward = 2000;
  c.param_bytes = 1000;
  CostModel costs = CostModel::Uniform(2, c, Link{});
  // D = 4, 100 ns, 1 B/ns: all-reduce 2*3/4*1000 + 100 = 1600 ns, all-gather 3/4*1000 + 100 = 850 ns.
  costs.SetDataParallel({4, Link{100, 1.0}});
  CHECK(costs.CollectiveTime({ActionKind::kReduceGrad, 0, 0}) == 1600);
  CHECK(costs.CollectiveTime({ActionKind::kUnshard, 0, 0}) == 850);
  CHECK(costs.CollectiveTime({ActionKind::kReshard, 0, 0}) == 0);
  const SimResult r = Simulate(s, costs);
  // rank 0: UNSHARD 0-850, F0, F1 to 2850, B0 4850-6850 (after rank 1's B0),
  // B1 7850-9850, REDUCE_GRAD 9850-11450, RESHARD.
  CHECK(r.makespan == 11450);
  CHECK(r.per_rank[0].busy == 6000);
  CHECK(r.per_rank[0].peak_activation_bytes == 750);  // the gathered 3/4 of 1000 parameter bytes
  // The collective is on the critical path: it ends the step.
  REQUIRE_FALSE(r.critical_path.empty());
  CHECK(r.critical_path.back().action == Action{ActionKind::kReduceGrad, 0, 0});
  CHECK(r.critical_comm >= 1600);
  // One data-parallel replica: the collectives cost nothing.
  costs.SetDataParallel({1, Link{100, 1.0}});
  CHECK(Simulate(s, costs).makespan == 9000);
}

TEST_CASE("REDUCE_GRAD costs a ring all-reduce at the end of each stage's gradients", "[schedule_io]") {
  StageCost c;
  c.forward = 1000;
  c.backward = 2000;
  c.param_bytes = 1000;
  CostModel costs = CostModel::Uniform(2, c, Link{});
  costs.SetDataParallel({4, Link{100, 1.0}});
  const Schedule s = Lower(AddReduceGrad(Generate1F1B(2, 2)));
  REQUIRE(Validate(s).ok());
  CHECK(Simulate(s, costs).makespan == 9000 + 1600);
  CHECK(Simulate(Generate1F1B(2, 2), costs).makespan == 9000);
  CHECK_THROWS_WITH(AddReduceGrad(AddReduceGrad(Generate1F1B(2, 2))), Catch::Contains("already holds REDUCE_GRAD"));
  // The cost model's JSON carries the group.
  CHECK(CostModel::FromJson(costs.ToJson(), "c.json").DataParallelGroup().degree == 4);
  // As the trainer inserts them, into the lowered programs: rank 1's
  // REDUCE_GRAD comes before its last SEND_B. It overlaps (the trainer's
  // bucket all-reduce runs while the rank goes on): the send leaves at 7000,
  // rank 0's B1 runs 7000-9000, its own all-reduce 9000-10600. Blocking the
  // rank would have sent at 8600 and ended at 12200.
  const Schedule trained = AddReduceGrad(Lower(Generate1F1B(2, 2)));
  const SimResult r = Simulate(trained, costs);
  CHECK(r.makespan == 10600);
  for (const TimelineEvent& e : r.timeline.events) {
    if (e.rank != 1 || e.action.kind != ActionKind::kReduceGrad) continue;
    CHECK(e.start == 7000);
    CHECK(e.end == 8600);
  }
}

TEST_CASE("export in PyTorch's compute-only form and import give back the same programs", "[schedule_io]") {
  int compared = 0;
  for (const GeneratorInfo& g : Generators()) {
    for (int K : {1, 2, 3, 4}) {
      for (int M : {4, 8}) {
        const int v = g.default_virtual;
        if (!FamilyAccepts(g, K, M, v)) continue;
        const Schedule compute = GenerateForTest(g, {K, M, v});
        const Schedule lowered = Lower(compute);
        if (compute.NumPipelines() > 1) {  // dualpipe: PyTorch's CSV has no pipelines
          CHECK_THROWS_WITH(ScheduleToPytorchComputeCsv(lowered), Catch::Contains("cannot express"));
          continue;
        }
        INFO(g.name << " K=" << K << " M=" << M);
        const Schedule back = ScheduleFromPytorchCsv(ScheduleToPytorchComputeCsv(lowered), "x.csv", g.name);
        // A rank may hold no action of the last stages' only when S > K ... never for these generators.
        CHECK(back.placement == compute.placement);
        CHECK(back.programs == compute.programs);
        const Schedule with_comms = ScheduleFromPytorchCsv(ScheduleToPytorchCsv(lowered), "y.csv", g.name);
        CHECK(with_comms.programs == lowered.programs);
        ++compared;
      }
    }
  }
  CHECK(compared > 20);
}

TEST_CASE("PyTorch CSV exports keep an idle rank and PyTorch's REDUCE_GRAD, and read back the same", "[schedule_io]") {
  // A rank with no action is a row of empty cells, last or between others
  // (a blank line would drop it, or be refused as a slip).
  for (const std::string& text :
       {std::string("0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n,,\n"), std::string("0F0,0F1,0B0,0B1\n,,\n1F0,1B0,1F1,1B1\n")}) {
    const Schedule s = ScheduleFromPytorchCsv(text, "idle.csv", "idle");
    REQUIRE(s.ranks == 3);
    for (const std::string& out : {ScheduleToPytorchCsv(s), ScheduleToPytorchComputeCsv(s)}) {
      INFO(out);
      const Schedule back = ScheduleFromPytorchCsv(out, "back.csv", "idle");
      CHECK(back.ranks == 3);
      CHECK(back.programs == s.programs);
    }
  }
  // PyTorch 2.11's own compute-only 1F1B file: written back as it was read.
  const std::string file = std::string(PPLAB_TEST_DATA_DIR) + "/pytorch/1f1b_k2_m2_compute_only.csv";
  const std::string pytorch = ReadTextFile(file);
  CHECK(ScheduleToPytorchComputeCsv(ScheduleFromPytorchCsv(pytorch, file, "1f1b")) == pytorch);
}

TEST_CASE("bad PyTorch CSV cells get one line with file, row and column", "[schedule_io]") {
  // Unknown kind.
  CHECK_THROWS_WITH(ScheduleFromPytorchCsv("0F0,0B0\n1F0,1FOO0\n", "k.csv", "k"),
                    Catch::Contains("k.csv:2: column 2: bad action '1FOO0': unknown action kind 'FOO'"));
  // Malformed composite.
  CHECK_THROWS_WITH(ScheduleFromPytorchCsv("0F0,(0F1;1B0\n", "k.csv", "k"),
                    Catch::Contains("k.csv:1: column 2: bad action '(0F1;1B0': composite without a closing ')'"));
  CHECK_THROWS_WITH(
      ScheduleFromPytorchCsv("0F0,(1B0;0F1)OVERLAP_F_B\n", "k.csv", "k"),
      Catch::Contains("k.csv:1: column 2: bad action '(1B0;0F1)OVERLAP_F_B': OVERLAP_F_B's parts must be"));
  // A composite whose parts live on different ranks.
  CHECK_THROWS_WITH(
      ScheduleFromPytorchCsv("0F0,0F1,(0F2;1B0)OVERLAP_F_B,0B1,0B2\n1F0,1F1,1B1,1F2,1B2\n", "k.csv", "k"),
      Catch::Contains("k.csv:1: column 3: (0F2;1B0)OVERLAP_F_B runs stage 1, which lives on rank 1 (row 2), on "
                      "rank 0: both parts of an overlapped action must be on one rank"));
  // REDUCE_GRAD for a stage the rank does not own.
  CHECK_THROWS_WITH(ScheduleFromPytorchCsv("0F0,0B0,1REDUCE_GRAD\n1F0,1B0\n", "k.csv", "k"),
                    Catch::Contains("k.csv:1: column 3: 1REDUCE_GRAD on rank 0, which does not own stage 1 (it "
                                    "lives on rank 1, row 2)"));
}

TEST_CASE(
    "an overlapped F&B imports, lowers and simulates as max(F, B) + penalty, F + B + penalty or its measured time",
    "[schedule_io]") {
  // Two stages on one rank: the forward of mb 1 runs with the backward of mb 0.
  const Schedule s = ScheduleFromPytorchCsv("0F0,1F0,1B0,(0F1;0B0)OVERLAP_F_B,1F1,1B1,0B1\n", "o.csv", "o");
  REQUIRE(s.placement == std::vector<RankId>{0, 0});
  REQUIRE(Validate(s).ok());
  CHECK(s.NumComputeActions() == 8);
  StageCost c;
  c.forward = 1000;
  c.backward = 2000;
  c.overlap_penalty = 300;
  c.activation_bytes = 10;
  // 0F0 1F0 1B0 to 4000, overlap 2300 to 6300, 1F1 1B1 0B1 to 11300.
  const SimResult r = Simulate(s, CostModel::Uniform(2, c, {}));
  CHECK(r.makespan == 11300);
  CHECK(r.per_rank[0].busy == 11300);
  // 0F0 and 1F0 held; during the overlap 0F0 and 0F1 (0B0 frees 0F0 at its end).
  CHECK(r.per_rank[0].peak_activation_bytes == 20);
  // Parts run in turn (pplab's executor, as its profiles say): F + B + penalty, 3300, to 12300.
  CostModel in_turn = CostModel::Uniform(2, c, {});
  in_turn.SetPairsInTurn(true);
  CHECK(Simulate(s, in_turn).makespan == 12300);
  // The field round-trips, and the default is at once.
  CHECK(CostModel::FromJson(in_turn.ToJson(), "t").PairsInTurn());
  CHECK_FALSE(CostModel::FromJson(CostModel::Uniform(2, c, {}).ToJson(), "t").PairsInTurn());
  CHECK_THROWS_WITH(CostModel::FromJson(R"({"format": "pplab.cost", "version": 1, "num_stages": 1,
      "default": {"forward_ms": 1, "backward_ms": 2}, "overlapped_pairs": "sometimes"})",
                                        "c.json"),
                    Catch::Equals("c.json: field 'overlapped_pairs' must be \"at_once\" or \"in_turn\", got "
                                  "\"sometimes\""));
  c.forward_backward = 2500;  // a measured pair time, either way
  CHECK(Simulate(s, CostModel::Uniform(2, c, {})).makespan == 11500);
  // Across two ranks, lowering puts both parts' receives before it and sends after it.
  const Schedule two =
      ScheduleFromPytorchCsv("0F0,0F1,0B0,(0F2;0B1)OVERLAP_F_B,0B2\n1F0,1B0,1F1,1B1,1F2,1B2\n", "t.csv", "t");
  const Schedule lowered = Lower(two);
  std::vector<std::string> got;
  for (const Action& a : lowered.programs[0]) got.push_back(FormatAction(a));
  CHECK(got == std::vector<std::string>{"0F0", "0SEND_F0", "0F1", "0SEND_F1", "0RECV_B0", "0B0", "0RECV_B1",
                                        "(0F2;0B1)OVERLAP_F_B", "0SEND_F2", "0RECV_B2", "0B2"});
  const ValidationReport report = Validate(lowered);
  INFO(FormatReport(lowered, report));
  CHECK(report.ok());
}

TEST_CASE("validation checks per-stage actions and composites", "[validate]") {
  auto problems = [](const std::string& csv) {
    const Schedule s = ScheduleFromPytorchCsv(csv, "v.csv", "v");
    return FormatReport(s, Validate(s));
  };
  CHECK_THAT(problems("0F0,0F1,0REDUCE_GRAD,0B0,0B1\n"),
             Catch::Contains("REDUCE_GRAD for stage 0 at rank 0 step 2 (0REDUCE_GRAD) comes before rank 0 step 3"));
  CHECK_THAT(problems("0F0,0B0,0REDUCE_GRAD,0REDUCE_GRAD\n"), Catch::Contains("duplicate REDUCE_GRAD for stage 0"));
  CHECK_THAT(problems("0F0,0UNSHARD,0B0,0RESHARD\n"),
             Catch::Contains("compute on stage 0 at rank 0 step 0 (0F0) while its parameters are sharded"));
  CHECK_THAT(problems("0UNSHARD,0F0,0B0\n"), Catch::Contains("is never followed by its RESHARD"));
  CHECK_THAT(problems("0F0,0B0,0RESHARD\n"), Catch::Contains("RESHARD of stage 0 at rank 0 step 2 (0RESHARD) without"));
  CHECK_THAT(problems("0F0,(0F1;0B0)OVERLAP_F_B,0B0,0B1\n"), Catch::Contains("duplicate action 0B0"));
  // A composite that needs its own output is a cycle.
  CHECK_THAT(problems("(0F0;0B0)OVERLAP_F_B\n"), Catch::Contains("deadlock"));
}

}  // namespace pplab::schedule_io_test

namespace pplab::schedule_io_test {

TEST_CASE("schedule JSON carries dualpipe's pipelines and checks them", "[schedule_io][dualpipe]") {
  const Schedule s = Lower(GenerateDualPipe(2, 4));
  const std::string text = ScheduleToJson(s);
  CHECK_THAT(text, Catch::Contains("\"pipeline_starts\": [2],\n  \"microbatch_pipeline\": [0,0,1,1],\n"));
  CHECK(ScheduleFromJson(text, "dp.json").microbatch_pipeline == std::vector<int>{0, 0, 1, 1});
  // One pipeline writes neither field.
  CHECK_THAT(ScheduleToJson(Lower(GenerateDualPipeV(2, 4))), !Catch::Contains("pipeline"));
  auto with = [&](const std::string& from, const std::string& to) {
    std::string t = text;
    t.replace(t.find(from), from.size(), to);
    return t;
  };
  CHECK_THROWS_WITH(
      ScheduleFromJson(with("\"microbatch_pipeline\": [0,0,1,1],\n", ""), "dp.json"),
      Catch::Contains("dp.json: schedule 'dualpipe': pipeline_starts and microbatch_pipeline go together"));
  CHECK_THROWS_WITH(ScheduleFromJson(with("[0,0,1,1]", "[0,0,1,2]"), "dp.json"),
                    Catch::Contains("microbatch_pipeline[3] = 2 is not a pipeline in [0, 2)"));
  CHECK_THROWS_WITH(ScheduleFromJson(with("[0,0,1,1]", "[0,1]"), "dp.json"),
                    Catch::Contains("microbatch_pipeline has 2 entries but microbatches = 4"));
  CHECK_THROWS_WITH(ScheduleFromJson(with("\"pipeline_starts\": [2]", "\"pipeline_starts\": [4]"), "dp.json"),
                    Catch::Contains("pipeline_starts must ascend within [1, 3], got 4"));
  CHECK_THROWS_WITH(ScheduleFromJson(with("\"pipeline_starts\": [2]", "\"pipeline_starts\": \"2\""), "dp.json"),
                    Catch::Contains("field 'pipeline_starts' must be an array of integers"));
  // Too large is named as a range, not as "non-negative" (it was).
  CHECK_THROWS_WITH(
      ScheduleFromJson(with("\"pipeline_starts\": [2]", "\"pipeline_starts\": [1099511627776]"), "dp.json"),
      Catch::Equals("dp.json: pipeline_starts[0] must be an integer from 0 to 2^30, got 1099511627776"));
}

}  // namespace pplab::schedule_io_test
