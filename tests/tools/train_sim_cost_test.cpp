// train --sim-cost: the plan simulated with a cost file, stacked above the
// measured step, and the summary's prediction against the run; the file is
// checked against the run before any worker starts.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "schedules/file_io.h"
#include "tests/run_pplab.h"
#include "tests/tools/train_cli_test_support.h"
#include "traces/chrome_trace.h"

namespace pplab::train_sim_cost_test {
namespace {

std::string Tmp(const std::string& name) { return std::string(PPLAB_TEST_TMP_DIR) + "/" + name; }

// A profile of the tiny model on 2 ranks at Train's microbatches of 2 x 32,
// in a file of the calling test's own (`name`): ctest runs test cases at
// once, and one that rewrote another's profile between its run and its
// check made the two disagree.
std::string TinyProfile(const std::string& name) {
  const std::string cost = Tmp("sim-cost-profile-" + name + ".json");
  const PplabRun r = Pplab("profile --model tiny -k 2 --microbatch-size 2 --seq-len 32 -o " + cost);
  INFO(r.out);
  REQUIRE(r.code == 0);
  return cost;
}

}  // namespace

TEST_CASE("train --sim-cost predicts the run with the file's costs: simulate's step and peaks, set against it",
          "[train][memory]") {
  const std::string cost = TinyProfile("predicts");
  const std::string sim = Tmp("sim-cost-sim.json"), real = Tmp("sim-cost-real.json");
  PplabRun r = Train("-s zb-h1 -k 2 --steps 5 --measure-memory --json --sim-cost " + cost + " --sim-trace " + sim +
                     " --trace " + real);
  INFO(r.out);
  REQUIRE(r.code == 0);
  const nlohmann::json run = nlohmann::json::parse(r.out.substr(r.out.find('{')));
  REQUIRE(run.contains("prediction"));
  const nlohmann::json& p = run["prediction"];
  CHECK(p["cost_file"] == cost);
  // The prediction is simulate's, with the file's costs on the devices the run used.
  r = Pplab("simulate -s zb-h1 -k 2 -m 4 --cost " + cost + " --devices-from " + real + " --json");
  INFO(r.out);
  REQUIRE(r.code == 0);
  const nlohmann::json simulated = nlohmann::json::parse(r.out);
  CHECK(p["step_ms"].get<double>() == Approx(simulated["makespan"].get<double>()).epsilon(1e-9));
  CHECK(TimelineFromChromeTrace(ReadTextFile(sim), sim).Makespan() == MsToNs(simulated["makespan"].get<double>()));
  REQUIRE(p["peak_activation_bytes"].size() == 2);
  for (int k = 0; k < 2; ++k) {
    CHECK(p["peak_activation_bytes"][k] == simulated["per_rank"][k]["peak_activation_bytes"]);
    // Against the measured peak: the profile's bytes at the run's own
    // configuration (docs/fidelity.md, "Peak activation bytes").
    const double measured = run["measured_peak_activation_bytes"][k].get<double>();
    CHECK(p["peak_activation_errors"][k].get<double>() ==
          Approx(p["peak_activation_bytes"][k].get<double>() / measured - 1).epsilon(1e-12));
    CHECK(std::abs(p["peak_activation_errors"][k].get<double>()) < 0.01);
  }
  // The measured step: the median of the steps after the first two.
  std::vector<double> steps = run["step_times_ms"].get<std::vector<double>>();
  REQUIRE(steps.size() == 5);
  std::sort(steps.begin() + 2, steps.end());
  CHECK(p["measured_step_ms"].get<double>() == steps[3]);
  CHECK(p["step_error"].get<double>() == Approx(p["step_ms"].get<double>() / steps[3] - 1).epsilon(1e-12));
  // Their p10 and p90 (between order statistics: of three, 1/5 and 4/5 of
  // the way along), against the step sampled from the profile's spreads as
  // simulate --samples draws it.
  CHECK(p["measured_p10_ms"].get<double>() == Approx(steps[2] + 0.2 * (steps[3] - steps[2])).epsilon(1e-12));
  CHECK(p["measured_p90_ms"].get<double>() == Approx(steps[3] + 0.8 * (steps[4] - steps[3])).epsilon(1e-12));
  r = Pplab("simulate -s zb-h1 -k 2 -m 4 --cost " + cost + " --devices-from " + real +
            " --samples 200 --seed 1 --json");
  REQUIRE(r.code == 0);
  const nlohmann::json sampled = nlohmann::json::parse(r.out)["samples"];
  REQUIRE(p.contains("sampled"));
  CHECK(p["sampled"]["count"] == 200);
  CHECK(p["sampled"]["seed"] == 1);
  for (const char* q : {"p10", "p50", "p90"}) {
    CHECK(p["sampled"][std::string(q) + "_ms"].get<double>() == Approx(sampled[q].get<double>()).epsilon(1e-9));
  }
  CHECK(p["spreads_overlap"] == (p["sampled"]["p10_ms"].get<double>() <= p["measured_p90_ms"].get<double>() &&
                                 p["measured_p10_ms"].get<double>() <= p["sampled"]["p90_ms"].get<double>()));
  // A cost file without profile meta (stats --cost-out of the run) is the
  // user's to give; the text summary names the prediction.
  const std::string estimated = Tmp("sim-cost-estimated.json");
  REQUIRE(Pplab("stats " + real + " --cost-out " + estimated).code == 0);
  r = Train("-s zb-h1 -k 2 --steps 2 --sim-cost " + estimated);
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("predicted by " + estimated + ": step "));
  // It has no spreads to sample; the profile has.
  CHECK_THAT(r.out, !Catch::Contains("p10..p90"));
  r = Train("-s zb-h1 -k 2 --steps 2 --sim-cost " + cost);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("  p10..p90: predicted ") &&
                        Catch::Contains(" ms (200 draws from the file's spreads, seed 1), measured "));
}

TEST_CASE("train --sim-cost recomputes a profile's stages as the run does, as simulate --recompute does",
          "[train][memory]") {
  // A profile is measured without recomputation: its B and I gain a forward
  // and its stages keep only their inputs. Costed as the file was, a
  // recomputed run's peak was predicted 76 % high.
  const std::string cost = TinyProfile("recompute");
  const std::string real = Tmp("sim-cost-recompute-real.json");
  const PplabRun r =
      Train("-s 1f1b -k 2 --steps 3 --recompute all --measure-memory --json --sim-cost " + cost + " --trace " + real);
  INFO(r.out);
  REQUIRE(r.code == 0);
  const nlohmann::json p = nlohmann::json::parse(r.out.substr(r.out.find('{')))["prediction"];
  const PplabRun sim =
      Pplab("simulate -s 1f1b -k 2 -m 4 --recompute all --cost " + cost + " --devices-from " + real + " --json");
  REQUIRE(sim.code == 0);
  const nlohmann::json simulated = nlohmann::json::parse(sim.out);
  CHECK(p["step_ms"].get<double>() == Approx(simulated["makespan"].get<double>()).epsilon(1e-9));
  for (int k = 0; k < 2; ++k) {
    CHECK(p["peak_activation_bytes"][k] == simulated["per_rank"][k]["peak_activation_bytes"]);
    CHECK(std::abs(p["peak_activation_errors"][k].get<double>()) < 0.05);
  }
}

TEST_CASE("train --sim-cost refuses a file that is not this run's costs, in one line, before any worker", "[train]") {
  const std::string cost = TinyProfile("refuses");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"-s zb-v -k 2 --sim-cost " + cost, "cost model has 2 stages but schedule 'zb-v' has 4"},
      {"-s 1f1b -k 2 -m 8 --sim-cost " + cost,
       "--sim-cost " + cost + " was measured with microbatches of 2 sequences, this run's are of 1"},
      {"-s 1f1b -k 2 --seq-len 16 --sim-cost " + cost,
       "--sim-cost " + cost + " was measured with --seq-len 32, not 16"},
      {"-s 1f1b -k 2 --precision bf16 --sim-cost " + cost,
       "--sim-cost " + cost + " was measured with --precision fp32, not bf16"},
      // One tensor-parallel rank's share: a profile of T = 1 is no T = 2 run's.
      {"-s 1f1b -k 2 --tp 2 --sim-cost " + cost, "--sim-cost " + cost + " was measured with --tp 1, not 2"},
      {"-s 1f1b -k 2 --partition 3,1 --sim-cost " + cost,
       "--sim-cost " + cost + " was measured with the layers 2,2 a stage, this run's are 3,1"},
      {"-s 1f1b -k 2 --sim-trace " + cost + " --sim-cost " + cost,
       "--sim-cost " + cost + " is also --sim-trace (" + cost + ")"},
      {"-s 1f1b -k 2 --sim-cost " + Tmp("no-such-cost.json"), "no-such-cost.json"},
      // The replicas and the ranks the stages ran on: a --dp 2 profile's
      // REDUCE_GRADs predicted a --dp 1 run 84 % high.
      {"-s 1f1b -k 2 --dp 2 -m 2 --sim-cost " + cost, "--sim-cost " + cost + " was measured with --dp 1, not 2"},
      {"-s interleaved-1f1b -k 1 -v 2 --sim-cost " + cost,
       "--sim-cost " + cost + " was measured with 2 pipeline ranks, this run's plan has 1"},
      // The whole shape: another vocabulary's head (a peak 91 % low).
      {"-s 1f1b -k 2 --model " + Tmp("sim-cost-vocab-512.json") + " --sim-cost " + cost,
       "--sim-cost " + cost + " was measured with --model tiny, whose shape differs from --model " +
           Tmp("sim-cost-vocab-512.json") + "'s"}};
  nlohmann::json vocab =
      nlohmann::json::parse(ReadTextFile(std::string(PPLAB_TEST_DATA_DIR) + "/fuzz/llama_config/tiny.json"));
  vocab["vocab_size"] = 512;
  WriteTextFile(Tmp("sim-cost-vocab-512.json"), vocab.dump());
  for (const auto& [args, expected] : cases) {
    INFO(args);
    const PplabRun r = Train(args);
    CHECK(r.code == 2);
    CHECK_THAT(r.out, Catch::Contains(expected));
    CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 1);
  }
}

TEST_CASE("plan --cost-out's train line runs the plan with --sim-cost: the run predicted as plan ranked it",
          "[train][plan]") {
  const std::string cost = TinyProfile("plan");
  const std::string plan_file = Tmp("sim-cost-plan.json"), costs = Tmp("sim-cost-costs.json");
  PplabRun r = Pplab("plan --model tiny --ranks 2 --global-batch 8 --seq-len 32 --memory-per-rank 1GiB --json -o " +
                     plan_file + " --cost-out " + costs + " --cost " + cost);
  INFO(r.out);
  REQUIRE(r.code == 0);
  const nlohmann::json plan = nlohmann::json::parse(r.out);
  const std::string line = plan["train_command"];
  REQUIRE_THAT(line, Catch::EndsWith(" --sim-cost " + costs));
  // The line as printed, after the program's path, with test settings added.
  r = Pplab(line.substr(line.find(" train ") + 1) + " --synthetic --steps 2 --out '' -q --json");
  INFO(r.out);
  REQUIRE(r.code == 0);
  const nlohmann::json run = nlohmann::json::parse(r.out.substr(r.out.find('{')));
  CHECK(run["prediction"]["step_ms"].get<double>() == Approx(plan["picked"]["step_time"].get<double>()).epsilon(1e-9));
}

}  // namespace pplab::train_sim_cost_test
