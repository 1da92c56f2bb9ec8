// Runs `pplab plan --cost` as a user would: plans fitted to profiles (of a slice
// of the layers, at two microbatch sizes), their links and devices, their spreads.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "models/llama_config.h"
#include "models/partition.h"
#include "schedules/file_io.h"
#include "tests/run_pplab.h"
#include "tests/tools/cli_test_support.h"
#include "tools/plan_costs.h"

namespace pplab::plan_cli_profiles_test {

namespace {

// The profile of WriteProfiledCost with `from` replaced by `to`, as NAME.
std::string ProfiledCostWith(const std::string& name, const std::string& from, const std::string& to) {
  std::string text = ReadTextFile(WriteProfiledCost(name));
  const size_t at = text.find(from);
  REQUIRE(at != std::string::npos);
  WriteTextFile(TempPath(name), text.replace(at, from.size(), to));
  return TempPath(name);
}

// Each candidate row of a plan --json, as JSON text.
std::vector<std::string> PlanRows(const PplabRun& r) {
  INFO(r.out);
  REQUIRE(r.code == 0);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  std::vector<std::string> rows;
  for (const auto& c : j["candidates"]) rows.push_back(c.dump());
  return rows;
}

}  // namespace

TEST_CASE("cli: plan says when its eager profiles' GPU waited for the host's launches", "[cli][plan]") {
  const std::string plan = "plan --model tiny --ranks 2 --global-batch 8 --memory-per-rank 1GiB --json --cost ";
  const std::string says = "their GPU waited for the host to launch its kernels";
  const std::string ranks = R"("ranks": 2)";
  const std::string bound =
      ProfiledCostWith("launch-bound.json", ranks, ranks + R"(, "extra": {"launch_bound_per_rank": [false, true]})");
  PplabRun r = Pplab(plan + bound + " -o " + TempPath("launch-bound-plan.json"));
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK_THAT(nlohmann::json::parse(r.out)["costs_from"].get<std::string>(), Catch::Contains(says));
  // Not where no rank was bound, nor where the host clock gave no lag.
  for (const std::string ranks_bound : {"[false, false]", "[null, null]"}) {
    const std::string file = ProfiledCostWith("launch-free.json", ranks,
                                              ranks + R"(, "extra": {"launch_bound_per_rank": )" + ranks_bound + "}");
    r = Pplab(plan + file + " -o " + TempPath("launch-free-plan.json"));
    REQUIRE(r.code == 0);
    CHECK_THAT(nlohmann::json::parse(r.out)["costs_from"].get<std::string>(), !Catch::Contains(says));
  }
}

TEST_CASE("cli: plan gives each rank its own device and one link, also for the candidate its profile measured",
          "[cli][plan]") {
  const std::string link = R"("link": {"latency_ms": 0.01, "bandwidth_gbps": 1},)";
  const std::string plan =
      "plan --model tiny --ranks 2 --global-batch 8 --memory-per-rank 1GiB --schedules 1f1b "
      "--top 20 --json -o " +
      TempPath("links.json") + " --cost ";
  const std::string own = WriteProfiledCost("own-devices.json");
  // Two ranks profiled on one device (in turns): the same plan as on two.
  const std::string shared =
      ProfiledCostWith("shared-device.json", link, link + R"( "devices": [0, 0], "device_slots": [1],)");
  const std::vector<std::string> base = PlanRows(Pplab(plan + own));
  CHECK(PlanRows(Pplab(plan + shared)) == base);
  bool verbatim = false;  // the profile's own candidate is among them
  for (const std::string& row : base) verbatim = verbatim || nlohmann::json::parse(row)["measured_costs"] == true;
  CHECK(verbatim);
  // --link-bandwidth and --link-latency replace the profile's link, for
  // every candidate: free links by flag equal free links in the file.
  const std::string free_file =
      ProfiledCostWith("free-link.json", link, R"("link": {"latency_ms": 0, "bandwidth_gbps": 0},)");
  const std::vector<std::string> free_rows = PlanRows(Pplab(plan + free_file));
  CHECK(free_rows != base);
  CHECK(PlanRows(Pplab(plan + own + " --link-bandwidth 0 --link-latency 0")) == free_rows);
  CHECK(PlanRows(Pplab(plan + own + " --link-bandwidth 1 --link-latency 0.01")) == base);
  PplabRun r = Pplab(plan + own + " --link-latency 0");
  REQUIRE(r.code == 0);
  CHECK(nlohmann::json::parse(r.out)["link"] ==
        nlohmann::json::parse(R"({"latency_ms": 0.0, "bandwidth_gbps": 1.0, "from": "flags"})"));
  r = Pplab(plan + own);
  CHECK(nlohmann::json::parse(r.out)["link"]["from"] == "profile");
  r = Pplab("plan --model tiny --ranks 2 --global-batch 8 --memory-per-rank 1GiB --json -o " + TempPath("links.json"));
  CHECK(nlohmann::json::parse(r.out)["link"] ==
        nlohmann::json::parse(R"({"latency_ms": 0.0, "bandwidth_gbps": 0.0, "from": "free"})"));
}

namespace {

// A profile of `layers` layers of the tiny model on 2 ranks (partition of
// the layers in halves), microbatch mb x 32, whose every figure is the
// planner's formula: F, I and W take 1 ns a forward FLOP and B 2 ns (the
// analytic pattern), plus `fixed_ms` a fixed unit (StageFixedUnits; twice
// that in B), bytes are the shape estimates.
std::string FormulaProfile(const std::string& name, int layers, int mb = 2, double fixed_ms = 0,
                           const std::string& partition = "") {
  LlamaConfig c = LoadLlamaConfig("tiny");
  c.num_hidden_layers = layers;
  const std::string halves =
      !partition.empty() ? partition : std::to_string(layers / 2) + "," + std::to_string(layers - layers / 2);
  const Partition p = MakePartition(c, 2, halves);
  nlohmann::json stages = nlohmann::json::array();
  for (int s = 0; s < 2; ++s) {
    const double ms = cli::StageForwardFlops(c, p, s, mb, 32) / 1e6 + fixed_ms * cli::StageFixedUnits(p, s);
    stages.push_back({{"forward_ms", ms},
                      {"backward_ms", 2 * ms},
                      {"backward_input_ms", ms},
                      {"backward_weight_ms", ms},
                      {"activation_bytes", std::llround(cli::StageActivationBytes(c, p, s, mb, 32, Precision::kFp32))},
                      {"weight_grad_bytes", std::llround(cli::StageWeightGradBytes(c, p, s, mb, 32, Precision::kFp32))},
                      {"message_bytes", std::llround(cli::MessageBytes(c, mb, 32, Precision::kFp32))}});
  }
  const nlohmann::json doc = {{"format", "pplab.cost"},
                              {"version", 1},
                              {"stages", stages},
                              {"link", {{"latency_ms", 0.01}, {"bandwidth_gbps", 1}}},
                              {"meta",
                               {{"source", "pplab profile"},
                                {"model", "tiny"},
                                {"config", nlohmann::json::parse(c.ToJson())},
                                {"partition", halves},
                                {"microbatch_size", mb},
                                {"seq_len", 32},
                                {"device", "cpu"},
                                {"threads_per_rank", 1},
                                {"ranks", 2}}}};
  WriteTextFile(TempPath(name), doc.dump());
  return TempPath(name);
}

}  // namespace

TEST_CASE("cli: plan --cost-out writes a candidate's costs: simulate gives its step time and its peak memory again",
          "[cli][plan]") {
  const std::string profile = WriteProfiledCost("cost-out-profile.json");
  const std::string plan_file = TempPath("cost-out-plan.json"), costs = TempPath("cost-out-costs.json");
  const std::string plan = "plan --model tiny --ranks 2 --global-batch 8 --memory-per-rank 1GiB --top 200 --json -o " +
                           plan_file + " --cost-out " + costs + " --cost " + profile;
  PplabRun r = Pplab(plan);
  INFO(r.out);
  REQUIRE(r.code == 0);
  const nlohmann::json ranking = nlohmann::json::parse(r.out);
  CHECK(ranking["cost_file"] == costs);
  // Rows of each kind: the profile's own candidate (its costs as measured),
  // fitted ones, recomputed ones, two stages a rank.
  std::set<std::string> kinds;
  int checked = 0;
  for (size_t i = 0; i < ranking["candidates"].size(); ++i) {
    const nlohmann::json& row = ranking["candidates"][i];
    const std::string kind = row["measured_costs"].dump() + row["recompute"].dump() + row["virtual_stages"].dump();
    if (!kinds.insert(kind).second) continue;
    INFO(row.dump());
    r = Pplab(plan + " --pick " + std::to_string(i + 1));
    REQUIRE(r.code == 0);
    CHECK(nlohmann::json::parse(r.out)["picked"] == row);
    r = Pplab("simulate --plan " + plan_file + " --cost " + costs + " --json");
    INFO(r.out);
    REQUIRE(r.code == 0);
    const nlohmann::json sim = nlohmann::json::parse(r.out);
    CHECK(sim["makespan"].get<double>() == Approx(row["step_time"].get<double>()).epsilon(1e-9));
    // Each rank's peak is its model state plus the simulated activations;
    // the peak rank's model state is in the row.
    const int peak_rank = row["peak_memory_parts"]["rank"];
    const nlohmann::json& ranks = row["rank_peak_memory_bytes"];
    REQUIRE(ranks.size() == 2);
    CHECK(ranks[peak_rank] == row["peak_memory_bytes"]);
    CHECK(std::max(ranks[0].get<long long>(), ranks[1].get<long long>()) == row["peak_memory_bytes"]);
    CHECK(sim["per_rank"][peak_rank]["peak_activation_bytes"].get<long long>() +
              row["peak_memory_parts"]["model_state"].get<long long>() ==
          row["peak_memory_bytes"].get<long long>());
    ++checked;
  }
  CHECK(checked >= 4);
  CHECK(kinds.count("true\"none\"1") == 1);  // the profile's own
  CHECK(kinds.count("false\"all\"2") == 1);  // fitted, recomputed, v = 2
}

TEST_CASE("cli: plan --shard-optimizer scales a profile's optimizer spread with its median in --cost-out",
          "[cli][plan]") {
  // The p10 and p90 stayed as measured while the median went to 1/D plus
  // the gather: the file written was refused by simulate and train.
  const std::string profile = ProfiledCostWith("shard-spread.json", R"("link":)",
                                               R"("step": {"optimizer_ms": 0.05, "optimizer_p10_ms": 0.045,
                                                  "optimizer_p90_ms": 0.06}, "link":)");
  const std::string plan_file = TempPath("shard-spread-plan.json"), costs = TempPath("shard-spread-costs.json");
  const std::string plan =
      "plan --model tiny --ranks 2 --dp 2 --shard-optimizer --global-batch 8 --memory-per-rank "
      "1GiB --schedules 1f1b --top 100 --json -o " +
      plan_file + " --cost-out " + costs + " --cost " + profile;
  PplabRun r = Pplab(plan);
  INFO(r.out);
  REQUIRE(r.code == 0);
  const nlohmann::json rows = nlohmann::json::parse(r.out)["candidates"];
  size_t own = rows.size();
  for (size_t i = 0; i < rows.size() && own == rows.size(); ++i) {
    if (rows[i]["measured_costs"] == true) own = i;
  }
  REQUIRE(own < rows.size());
  r = Pplab(plan + " --pick " + std::to_string(own + 1));
  REQUIRE(r.code == 0);
  const nlohmann::json step = nlohmann::json::parse(ReadTextFile(costs))["step"];
  INFO(step.dump());
  CHECK(step["optimizer_p10_ms"].get<double>() <= step["optimizer_ms"].get<double>());
  CHECK(step["optimizer_ms"].get<double>() <= step["optimizer_p90_ms"].get<double>());
  r = Pplab("simulate --plan " + plan_file + " --cost " + costs + " --json");
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK(nlohmann::json::parse(r.out)["makespan"].get<double>() ==
        Approx(rows[own]["step_time"].get<double>()).epsilon(1e-9));
}

TEST_CASE("cli: plan fits the whole model to a profile of a slice of its layers (profile --layers)", "[cli][plan]") {
  const std::string plan = "plan --model tiny --ranks 2 --global-batch 8 --memory-per-rank 1GiB --top 100 --json -o " +
                           TempPath("slice-plan.json") + " --cost ";
  const std::string whole = FormulaProfile("whole-4.json", 4), slice = FormulaProfile("slice-2.json", 2);
  PplabRun r = Pplab(plan + whole);
  INFO(r.out);
  REQUIRE(r.code == 0);
  const nlohmann::json from_whole = nlohmann::json::parse(r.out);
  r = Pplab(plan + slice);
  INFO(r.out);
  REQUIRE(r.code == 0);
  const nlohmann::json from_slice = nlohmann::json::parse(r.out);
  CHECK(from_slice["costs_from"] == "fitted to " + slice + " (a slice of 2 of the model's 4 layers)");
  // Costs that follow the FLOPs and the shapes fit the same from 2 layers as
  // from 4: every candidate fitted from the whole model's profile is costed
  // the same from the slice's; only the whole's own stages stand in for a
  // candidate (measured_costs) of their own.
  std::map<std::string, nlohmann::json> by_key;
  const auto key = [](const nlohmann::json& c) {
    return c["schedule"].dump() + c["microbatches"].dump() + c["virtual_stages"].dump() + c["partition"].dump() +
           c["layers_per_stage"].dump() + c["recompute"].dump();
  };
  for (const auto& c : from_slice["candidates"]) {
    CHECK(c["measured_costs"] == false);
    by_key[key(c)] = c;
  }
  int compared = 0;
  for (const auto& c : from_whole["candidates"]) {
    if (c["measured_costs"] == true) continue;
    INFO(c.dump());
    REQUIRE(by_key.count(key(c)) == 1);
    const nlohmann::json& d = by_key[key(c)];
    CHECK(d["step_time"].get<double>() == Approx(c["step_time"].get<double>()).epsilon(1e-6));
    CHECK(d["peak_memory_bytes"].get<double>() == Approx(c["peak_memory_bytes"].get<double>()).epsilon(1e-6));
    ++compared;
  }
  CHECK(compared > 20);
  // More layers than the model, or another width: refused.
  r = Pplab("plan --model tiny --ranks 2 --global-batch 8 --memory-per-rank 1GiB -o " + TempPath("slice-plan.json") +
            " --cost " + FormulaProfile("deeper-6.json", 6));
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("was measured on 6 layers, more than the 4 of --model tiny"));
  // simulate takes a profile's stages as they are: a slice's are not the model's.
  r = Pplab("simulate -s 1f1b -k 2 -m 4 --model tiny --cost " + slice);
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("was measured with 2 of --model tiny's 4 layers (profile --layers)"));
  r = Pplab("plan --model small --ranks 2 --global-batch 8 --memory-per-rank 1GiB -o " + TempPath("slice-plan.json") +
            " --cost " + slice);
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("(the model configs differ)"));
}

TEST_CASE("cli: plan fits no negative byte scale to a profile whose bytes are below the formulas' exact parts",
          "[cli][plan]") {
  // One byte of activations and of weight gradients a stage: less than the
  // parts the formulas take as they are. A negative fit made the predicted
  // bytes shrink to 0 as the microbatches grew.
  const std::string path = FormulaProfile("tiny-bytes.json", 4);
  nlohmann::json doc = nlohmann::json::parse(ReadTextFile(path));
  for (auto& stage : doc["stages"]) {
    stage["activation_bytes"] = 1;
    stage["weight_grad_bytes"] = 1;
  }
  WriteTextFile(path, doc.dump());
  const PplabRun r = Pplab(
      "plan --model tiny --ranks 2 --global-batch 16 --memory-per-rank 1GiB --schedules gpipe "
      "--json -o " +
      TempPath("tiny-bytes-plan.json") + " --cost " + path);
  INFO(r.out);
  REQUIRE(r.code == 0);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  for (const char* k : {"activations_layers", "activations_head"}) {
    INFO(k);
    CHECK(j["byte_scales"][k].get<double>() == 0);  // was -0.23
  }
  CHECK(j["byte_scales"]["weight_grads"].get<double>() >= 0);
}

TEST_CASE("cli: plan fits profiles at two microbatch sizes together, with a fixed time a layer", "[cli][plan]") {
  const std::string plan = "plan --model tiny --ranks 2 --global-batch 8 --memory-per-rank 1GiB --top 100 -o " +
                           TempPath("two-sizes-plan.json");
  const std::string two = FormulaProfile("fixed-mb2.json", 4, 2, 0.1),
                    four = FormulaProfile("fixed-mb4.json", 4, 4, 0.1);
  PplabRun r = Pplab(plan + " --json --cost " + two + " --cost " + four);
  INFO(r.out);
  REQUIRE(r.code == 0);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  CHECK(j["costs"] == nlohmann::json::array({two, four}));
  CHECK(j["costs_from"] == "fitted to " + two + ", " + four +
                               " (2 microbatch sizes: between each two, a fixed time a layer besides the time per "
                               "FLOP)");
  REQUIRE(j["size_ranges"].size() == 1);
  CHECK(j["size_ranges"][0]["microbatch_sizes"] == nlohmann::json::array({2, 4}));
  CHECK(j["size_ranges"][0]["ns_per_flop"]["forward"].get<double>() == Approx(1.0).epsilon(1e-4));
  const nlohmann::json& fixed = j["size_ranges"][0]["fixed_ms_per_layer"];
  CHECK(fixed["forward"].get<double>() == Approx(0.1).epsilon(1e-4));
  CHECK(fixed["backward"].get<double>() == Approx(0.2).epsilon(1e-4));
  CHECK(fixed["backward_input"].get<double>() == Approx(0.1).epsilon(1e-4));
  CHECK(fixed["backward_weight"].get<double>() == Approx(0.1).epsilon(1e-4));
  // The bytes are the formulas': every factor 1 (to the bytes' rounding).
  for (const char* k : {"activations_layers", "activations_head", "weight_grads", "messages", "workspace"}) {
    INFO(k);
    CHECK(j["byte_scales"][k].get<double>() == Approx(1.0).epsilon(1e-4));
  }
  // Each profile's own configuration (M = 4 and M = 2 on K = 2, partition
  // 2,2) stands in verbatim, whatever the schedule.
  std::set<int> measured;
  for (const auto& c : j["candidates"]) {
    if (c["measured_costs"] == true) measured.insert(c["microbatch_size"].get<int>());
  }
  CHECK(measured == std::set<int>{2, 4});
  // The text names the fit: 0.1 ms a layer in F, I and W, 0.2 in B; 1 and 2 ns a FLOP.
  r = Pplab(plan + " --cost " + two + " --cost " + four);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("\nfit between microbatches of 2 and 4, F/B/I/W: 0.100/0.200/0.100/0.100 ms a "
                                    "layer + 1.0000/2.0000/1.0000/1.0000 ns a FLOP\n"));
  CHECK_THAT(r.out, Catch::Contains("\nbytes fitted to the profile, x the formulas: activations 1.000 (layers), "
                                    "1.000 (head); W's stash 1.000; workspace 1.000; messages 1.000\n"));
  // One profile: no fixed time, and the text says so of a plan at another size.
  r = Pplab(plan + " --json --cost " + two);
  REQUIRE(r.code == 0);
  const nlohmann::json single = nlohmann::json::parse(r.out);
  CHECK(single["size_ranges"].is_null());
  size_t other = 0;  // the first row at another size than the profile's 2
  while (other < single["candidates"].size() && single["candidates"][other]["microbatch_size"] == 2) ++other;
  REQUIRE(other < single["candidates"].size());
  const std::string pick = " --pick " + std::to_string(other + 1);
  r = Pplab(plan + pick + " --cost " + two);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out,
             Catch::Contains("\nnote: its microbatches of " + single["candidates"][other]["microbatch_size"].dump() +
                             " are costed from a profile at 2 in proportion to the FLOPs;"));
  r = Pplab(plan + pick + " --cost " + two + " --cost " + four);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, !Catch::Contains("note:"));
  // Two profiles at one size (two partitions) fit no fixed time either: the note says so.
  const std::string two_other = FormulaProfile("fixed-mb2-1-3.json", 4, 2, 0.1, "1,3");
  r = Pplab(plan + pick + " --cost " + two + " --cost " + two_other);
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out,
             Catch::Contains("\nnote: its microbatches of " + single["candidates"][other]["microbatch_size"].dump() +
                             " are costed from profiles at 2 in proportion to the FLOPs;"));
  // Two profiles of one configuration (here one file twice) would each claim
  // its costs, and the first given would win: refused.
  r = Pplab(plan + " --cost " + two + " --cost " + two);
  CHECK(r.code == 2);
  CHECK(r.out == "pplab: error: --cost " + two + " was measured with the microbatch size 2, partition 2,2 and 2 " +
                     "ranks of --cost " + two + ": give one profile for each configuration\n");
  // Each profile's link counts alike, in any order: the one whose time for
  // the largest message is the median, latency and bandwidth together. Apart,
  // the medians would be (0.3 ms, 1 GB/s), no profile's link.
  const auto with_link = [](const std::string& from, const std::string& name, double latency_ms, double gbps) {
    nlohmann::json j = nlohmann::json::parse(ReadTextFile(from));
    j["link"] = {{"latency_ms", latency_ms}, {"bandwidth_gbps", gbps}};
    const std::string path = TempPath(name);
    WriteTextFile(path, j.dump());
    return path;
  };
  const std::string near = with_link(two, "link-near.json", 0.01, 1.0),
                    far = with_link(four, "link-far.json", 0.51, 3.0),
                    mid = with_link(two_other, "link-mid.json", 0.3, 0.5);
  const std::vector<std::string> forward =
      PlanRows(Pplab(plan + " --json --cost " + near + " --cost " + far + " --cost " + mid));
  for (const std::string& order : {" --cost " + far + " --cost " + mid + " --cost " + near,
                                   " --cost " + mid + " --cost " + near + " --cost " + far}) {
    r = Pplab(plan + " --json" + order);
    INFO(order << "\n" << r.out);
    REQUIRE(r.code == 0);
    CHECK(PlanRows(r) == forward);
    // Their largest message, 16 KiB (4 x 32 tokens of 32 fp32 values), takes
    // 0.026, 0.516 and 0.333 ms: the 0.3 ms link's is the median.
    CHECK(nlohmann::json::parse(r.out)["link"]["latency_ms"].get<double>() == Approx(0.3));
    CHECK(nlohmann::json::parse(r.out)["link"]["bandwidth_gbps"].get<double>() == Approx(0.5));
  }
  // Profiles of different configurations are not fitted together.
  const std::string base = WriteProfiledCost("together-a.json");
  struct Case {
    std::string file, says;
  };
  const Case cases[] = {
      {ProfiledCostWith("together-seq.json", R"("seq_len": 32)", R"("seq_len": 64)"),
       "--seq-len 64, --cost " + base + " with 32"},
      {ProfiledCostWith("together-bf16.json", R"("device": "cpu")", R"("device": "cpu", "precision": "bf16")"),
       "--precision bf16, --cost " + base + " with fp32"},
      {ProfiledCostWith("together-gpu.json", R"("device": "cpu")", R"("device": "cuda:0")"),
       "--device cuda, --cost " + base + " with cpu"},
  };
  for (const Case& c : cases) {
    r = Pplab(plan + " --cost " + base + " --cost " + c.file);
    CHECK(r.code == 2);
    CHECK(r.out == "pplab: error: --cost " + c.file + " was measured with " + c.says +
                       ": profiles fitted together must share it (only the microbatch size, partition and ranks may "
                       "differ)\n");
  }
  // On a CPU, another number of threads a rank (another K) is another time per FLOP.
  const std::string threads =
      ProfiledCostWith("together-threads.json", R"("threads_per_rank": 1)", R"("threads_per_rank": 2)");
  r = Pplab(plan + " --cost " + base + " --cost " + threads);
  CHECK(r.code == 2);
  CHECK(r.out == "pplab: error: --cost " + threads + " was measured with 2 threads a rank, --cost " + base +
                     " with 1 (meta.threads_per_rank): CPU profiles fitted together must share it\n");
  // One file a --cost.
  r = Pplab(plan + " --cost " + two + " " + four);
  CHECK(r.code != 0);
  CHECK_THAT(r.out, Catch::Contains(four));
}

TEST_CASE("cli: plan with a profile's spreads samples each row and marks ties in the table and --json",
          "[cli][plan][samples]") {
  // A profile of the tiny model (4 layers, partition 2,2, 2 x 16 tokens) whose F and B vary by -10 %..+20 %.
  const std::string cost = TempPath("tiny_spread_profile.json");
  WriteTextFile(cost, R"({"format": "pplab.cost", "version": 1, "stages": [
      {"forward_ms": 1, "forward_p10_ms": 0.9, "forward_p90_ms": 1.2,
       "backward_ms": 2, "backward_p10_ms": 1.8, "backward_p90_ms": 2.4},
      {"forward_ms": 1.5, "forward_p10_ms": 1.35, "forward_p90_ms": 1.8,
       "backward_ms": 3, "backward_p10_ms": 2.7, "backward_p90_ms": 3.6}],
    "meta": {"source": "pplab profile", "model": "tiny", "config": )" +
                          LoadLlamaConfig("tiny").ToJson() + R"(, "partition": "2,2", "microbatch_size": 2,
      "seq_len": 16, "device": "cpu", "threads_per_rank": 1, "ranks": 2}})");
  const std::string args = "plan --model tiny --ranks 2 --global-batch 8 --memory-per-rank 8GiB --cost " + cost +
                           " --schedules gpipe,1f1b -o " + TempPath("tie_plan.json");
  const PplabRun a = Pplab(args + " --json"), b = Pplab(args + " --json");
  INFO(a.out);
  REQUIRE(a.code == 0);
  CHECK(a.out == b.out);  // the draws are seeded
  const auto j = nlohmann::json::parse(a.out);
  CHECK(j["ties"]["samples"] == 100);
  CHECK(j["ties"]["seed"] == 1);
  for (const auto& c : j["candidates"]) {
    CHECK(c["samples"]["p10"].get<double>() <= c["samples"]["p50"].get<double>());
    CHECK(c["samples"]["p50"].get<double>() <= c["samples"]["p90"].get<double>());
  }
  // gpipe and 1f1b at the best M cost the same: a tie; M = 1 is far behind.
  CHECK(j["candidates"][0]["tie"] == true);
  CHECK(j["candidates"][1]["tie"] == true);
  CHECK(j["candidates"].back()["tie"] == false);
  const PplabRun text = Pplab(args);
  REQUIRE(text.code == 0);
  CHECK_THAT(text.out, Catch::Contains("noise") && Catch::Contains("tie") && Catch::Contains("#1 ties with #2"));
  // Only the rows shown are sampled: with one, no tie is claimed or denied.
  const PplabRun one = Pplab(args + " --top 1");
  REQUIRE(one.code == 0);
  CHECK_THAT(one.out, Catch::Contains("no other row is shown to compare with #1") && !Catch::Contains("no row"));
}

TEST_CASE("cli: plan refuses a profile with no time to fit, or whose partition is not its model's layers",
          "[cli][plan]") {
  nlohmann::json doc = nlohmann::json::parse(ReadTextFile(FormulaProfile("zero-times.json", 4)));
  for (auto& stage : doc["stages"]) {
    for (const char* key : {"forward_ms", "backward_ms", "backward_input_ms", "backward_weight_ms"}) stage[key] = 0;
  }
  const std::string zero = TempPath("zero-times.json");
  WriteTextFile(zero, doc.dump());
  const std::string plan = "plan --model tiny --ranks 2 --global-batch 8 --memory-per-rank 1GiB -o " +
                           TempPath("refused_plan.json") + " --cost ";
  PplabRun r = Pplab(plan + zero);
  CHECK(r.code == 2);
  CHECK(r.out == "pplab: error: " + zero +
                     ": every stage's forward takes 0 ms; plan fits its time per FLOP to a profile's measured times\n");
  // meta.partition "1,1" holds 2 of the config's 4 layers: named where the
  // file is read, by plan and by simulate alike.
  doc = nlohmann::json::parse(ReadTextFile(FormulaProfile("short-partition.json", 4)));
  doc["meta"]["partition"] = "1,1";
  const std::string short_partition = TempPath("short-partition.json");
  WriteTextFile(short_partition, doc.dump());
  const std::string line = "pplab: error: " + short_partition +
                           ": meta.partition \"1,1\" holds 2 layers but meta.config.num_hidden_layers is 4\n";
  r = Pplab(plan + short_partition);
  CHECK(r.code == 2);
  CHECK(r.out == line);
  r = Pplab("simulate -s 1f1b -k 2 -m 2 --cost " + short_partition);
  CHECK(r.code == 2);
  CHECK(r.out == line);
}

}  // namespace pplab::plan_cli_profiles_test

namespace pplab::plan_cli_profiles_test {

TEST_CASE("cli: plan costs DualPipe's overlapped pairs in turn where its profile says the runtime runs them so",
          "[cli][plan]") {
  const std::string at_once = WriteProfiledCost("pairs-at-once.json");
  std::string text = ReadTextFile(at_once);
  text.insert(text.rfind('}'), R"(, "overlapped_pairs": "in_turn")");
  const std::string in_turn = TempPath("pairs-in-turn.json");
  WriteTextFile(in_turn, text);
  const auto step_of = [](const std::string& profile, const std::string& cost_out) {
    const PplabRun r = Pplab(
        "plan --model tiny --ranks 2 --global-batch 8 --memory-per-rank 1GiB --schedules "
        "dualpipe --json -o " +
        TempPath("pairs-plan.json") + " --cost-out " + cost_out + " --cost " + profile);
    INFO(r.out);
    REQUIRE(r.code == 0);
    return nlohmann::json::parse(r.out)["picked"]["step_time"].get<double>();
  };
  const std::string out_at_once = TempPath("pairs-at-once-out.json"), out_in_turn = TempPath("pairs-in-turn-out.json");
  const double overlapped = step_of(at_once, out_at_once), in_sequence = step_of(in_turn, out_in_turn);
  CHECK(in_sequence > overlapped);  // F + B, not max(F, B), for every pair
  CHECK(CostModel::FromJson(ReadTextFile(out_in_turn), out_in_turn).PairsInTurn());
  CHECK_FALSE(CostModel::FromJson(ReadTextFile(out_at_once), out_at_once).PairsInTurn());
}

}  // namespace pplab::plan_cli_profiles_test
