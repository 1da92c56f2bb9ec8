// Multi-process training through the pplab binary (Gloo over loopback): its
// partitions and options, warm-up, recomputed stages, the sharded optimizer,
// and its processes when one is killed.
#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "models/llama_config.h"
#include "models/partition.h"
#include "schedules/file_io.h"
#include "schedules/generators.h"
#include "tests/run_pplab.h"
#include "tests/tools/train_cli_test_support.h"

namespace pplab::train_cli_test {

TEST_CASE("a compute partition takes the plan's placement and --seq-len, and is refused for two copies", "[train]") {
  // The small preset (8 layers) in a V on 2 ranks: the layers the workers
  // use, reported in --json, are the ones PartitionByCompute gives.
  const PplabRun r = Train("--model small -s v-half -k 2 --steps 1 --partition compute --json");
  INFO(r.out);
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out.substr(r.out.find('{')));
  CHECK(j["partition"] == PartitionByCompute(LlamaPreset("small"), VPlacement(2), 32).ToString());
  const PplabRun dual = Train("-s dualpipe -k 2 --steps 1 --partition compute");
  CHECK(dual.code == 2);
  CHECK_THAT(dual.out, Catch::Contains("--partition compute: needs the plan's placement of one copy of the model"));
}

TEST_CASE("plan's line for a partition refitted to the memory limit trains that layer list", "[train][plan]") {
  // The small preset on 4 ranks at 25 MiB: interleaved-zb over memory with
  // its named partitions fits with layers moved off the ranks over the limit (plan_search.h,
  // "fitted"), the fastest plan that fits beside 1f1b; its train line names
  // the layers. (zb-auto, left out, ties with it on a named partition.)
  const std::string plan = std::string(PPLAB_TEST_TMP_DIR) + "/refitted-plan.json";
  const PplabRun r = Pplab(
      "plan --model small --ranks 4 --global-batch 16 --seq-len 128 --memory-per-rank 25MiB "
      "--recompute none --schedules 1f1b,interleaved-zb --json -o " +
      plan);
  INFO(r.out);
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  REQUIRE(j["best"]["partition"] == "fitted");
  CHECK(j["refit"]["fit"].get<int>() >= 1);
  const std::string layers = j["best"]["layers_per_stage"];
  const std::string line = j["train_command"];
  CHECK_THAT(line, Catch::Contains(" --partition " + layers + " "));
  const PplabRun t = Pplab(line.substr(line.find("train ")) + " --synthetic --out '' -q --steps 1 --json");
  INFO(t.out);
  REQUIRE(t.code == 0);
  CHECK(nlohmann::json::parse(t.out.substr(t.out.find('{')))["partition"] == layers);
}

TEST_CASE("train --plan takes the flags the plan file records where the command line gives none", "[train][plan]") {
  // The plan's model, batch and recompute are in its file, so `train --plan
  // FILE` alone trains what was planned.
  const std::string plan = std::string(PPLAB_TEST_TMP_DIR) + "/planned-flags-plan.json";
  const PplabRun r = Pplab(
      "plan --model tiny --ranks 2 --global-batch 8 --seq-len 32 --memory-per-rank 1GiB --recompute all "
      "--schedules 1f1b --json -o " +
      plan);
  INFO(r.out);
  REQUIRE(r.code == 0);
  const nlohmann::json planned = nlohmann::json::parse(ReadTextFile(plan))["planned"];
  CHECK(planned["model"] == "tiny");
  CHECK(planned["batch_size"] == 8);
  CHECK(planned["recompute"] == "all");
  const std::string run = "train --plan " + plan + " --synthetic --out '' --steps 1 --json";
  PplabRun t = Pplab(run);
  INFO(t.out);
  REQUIRE(t.code == 0);
  nlohmann::json j = nlohmann::json::parse(t.out.substr(t.out.find('{')));
  CHECK(j["model"] == "tiny");
  CHECK(j["recompute"] == "all");
  CHECK(j["partition"] == MakePartition(LlamaPreset("tiny"), 2, "uniform").ToString());
  CHECK(j["tokens_per_s"].get<double>() > 0);
  // A flag given stands, with a note naming the plan's value.
  t = Pplab(run + " --recompute none --batch-size 16");
  REQUIRE(t.code == 0);
  CHECK_THAT(t.out, Catch::Contains("pplab: note: --plan " + plan +
                                    " was planned with --recompute all; this run takes --recompute none, as given"));
  CHECK_THAT(t.out, Catch::Contains("was planned with --batch-size 8; this run takes --batch-size 16, as given"));
  j = nlohmann::json::parse(t.out.substr(t.out.find('{')));
  CHECK(j["recompute"] == "none");
  // A planned value of the wrong type, or a flag no plan records: one line.
  nlohmann::json file = nlohmann::json::parse(ReadTextFile(plan));
  for (const auto& [key, value, message] : std::vector<std::tuple<std::string, nlohmann::json, std::string>>{
           {"batch_size", "8", "planned.batch_size must be a positive integer, got \"8\""},
           {"cuda_graphs", 1, "planned.cuda_graphs must be true or false, got 1"},
           {"steps", 3, "planned.steps is not a train flag a plan records (those are model, partition,"},
           {"model", "nowhere/config.json", "planned.model (--model nowhere/config.json): "}}) {
    nlohmann::json bad = file;
    bad["planned"][key] = value;
    WriteTextFile(plan, bad.dump());
    t = Pplab(run);
    INFO(key << ": " << t.out);
    CHECK(t.code == 2);
    CHECK_THAT(t.out, Catch::StartsWith("pplab: error: --plan " + plan + ": " + message));
  }
  // A planned switch whose size is given away goes with it: there is no
  // flag to turn the plan's --shard-optimizer off under --dp 1.
  nlohmann::json sharded = file;
  sharded["planned"]["dp"] = 2;
  sharded["planned"]["shard_optimizer"] = true;
  WriteTextFile(plan, sharded.dump());
  t = Pplab(run + " --dp 1");
  INFO(t.out);
  REQUIRE(t.code == 0);
  CHECK_THAT(t.out, Catch::Contains("was planned with --shard-optimizer, which needs --dp 2 or more; this run takes "
                                    "--dp 1 without it"));
}

TEST_CASE("train runs PyTorch's lowered plan without its UNSHARD/RESHARD, and says so", "[train][plan]") {
  const std::string file = std::string(PPLAB_TEST_DATA_DIR) + "/pytorch/1f1b_k2_m2_compute_comms.csv";
  const PplabRun r = Train("--plan " + file + " -m 2 --steps 1");
  INFO(r.out);
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("pplab: note: --plan " + file +
                                    ": its 4 UNSHARD/RESHARD actions are not run (pplab has no FSDP"));
}

TEST_CASE("train refuses bad options with one line", "[train]") {
  struct Case {
    const char* args;
    const char* says;
  };
  for (const Case& c :
       {Case{"-k 2 -m 3 --batch-size 8 --steps 1", "--batch-size 8 is not divisible by --microbatches 3"},
        Case{"-k 8 --model tiny --steps 1", "fewer than the 8 stages"},
        Case{"--model nope --steps 1", "unknown model preset 'nope'"},
        Case{"-k 2 --partition 3,3 --steps 1", "--partition: the entries sum to 6 layers"},
        Case{"--device bogus --steps 1", "--device 'bogus'"},
        Case{"-k 2 --recompute 2 --steps 1", "--recompute names stage 2, but the plan has stages 0 to 1"},
        Case{"-k 2 --recompute some --steps 1", "--recompute takes none, all, or stage ids"},
        Case{"-k 2 --shard-optimizer --steps 1",
             "--shard-optimizer shards the AdamW moments over the data-parallel "
             "replicas: it needs --dp 2 or more"},
        Case{"-k 2 --dp 2 --shard-optimizer --no-flat-params --steps 1", "--no-flat-params excludes --shard-optimizer"},
        Case{"-k 2 --warm-up maybe --steps 1", "--warm-up: expected auto, on or off, got 'maybe'"},
        Case{"-k 2 --cuda-graphs --steps 1",
             "--cuda-graphs captures a GPU's work: it needs --device cuda, got --device cpu"},
        Case{"-k 2 -s zb-h1 --cuda-graphs --device cuda --steps 1",
             "--cuda-graphs: schedule zb-h1 splits B into I and W, and a captured backward computes both"},
        Case{"-k 2 --cuda-graphs --tp 2 --device cuda --steps 1", "--cuda-graphs with --tp 2: a tensor-parallel"},
        Case{"-k 2 --cuda-graphs --recompute all --device cuda --steps 1", "--cuda-graphs with --recompute all"}}) {
    const PplabRun r = Train(c.args);
    INFO(c.args << "\n" << r.out);
    CHECK(r.code != 0);
    CHECK_THAT(r.out, Catch::Contains(c.says));
  }
}

TEST_CASE("the measured bubble lies from 0 up to below 1 with data parallelism too", "[train]") {
  // Each replica's ranks against that replica's span: against rank 0's own,
  // a faster replica made it negative (-0.27 at K=1, D=2). At K = 1 the one
  // rank's span is all compute but the gaps between its actions.
  for (const std::string& layout : {std::string("-k 1 --dp 2"), std::string("-k 2 --dp 2 -m 2")}) {
    const PplabRun r = Train(layout + " --steps 4 --json");
    INFO(layout << "\n" << r.out);
    REQUIRE(r.code == 0);
    const nlohmann::json j = nlohmann::json::parse(r.out.substr(r.out.find('{')));
    REQUIRE(j["bubbles"].size() == 4);
    for (const auto& b : j["bubbles"]) {
      CHECK(b.get<double>() >= 0);
      CHECK(b.get<double>() < (layout == "-k 1 --dp 2" ? 0.1 : 1.0));
    }
  }
}

TEST_CASE("a warm-up before the first step changes no loss, in pipelines, data and tensor parallelism", "[train]") {
  // Each layout on 2 processes: DualPipeV (two stages a rank, both ends of
  // the pipeline on each), zb-h1 over 2 replicas, and T=2 with sequence
  // parallelism (the warm-up's collectives inside the stages).
  for (const std::string& layout : {std::string("-k 2 -s dualpipev"), std::string("-k 1 --dp 2 -s zb-h1"),
                                    std::string("-k 1 --tp 2 --sequence-parallel")}) {
    auto run = [&](const std::string& warm_up) {
      const PplabRun r = Train(layout + " --steps 2 --json --warm-up " + warm_up);
      INFO(layout << " --warm-up " << warm_up << "\n" << r.out);
      REQUIRE(r.code == 0);
      return nlohmann::json::parse(r.out.substr(r.out.find('{')));
    };
    const nlohmann::json on = run("on"), off = run("off"), automatic = run("auto");
    INFO(layout);
    CHECK(on["losses"] == off["losses"]);
    CHECK(on["warm_up_ms"].get<double>() > 0);
    CHECK(off["warm_up_ms"].get<double>() == 0);
    CHECK(automatic["warm_up_ms"].get<double>() == 0);  // auto: only on a CUDA device
  }
}

TEST_CASE("recomputed stages train the same losses across processes with less memory on every rank",
          "[train][recompute]") {
  auto run = [](const std::string& recompute) {
    const PplabRun r = Train("-k 2 -s gpipe --steps 3 --measure-memory --json --recompute " + recompute);
    INFO(recompute << "\n" << r.out);
    REQUIRE(r.code == 0);
    return nlohmann::json::parse(r.out.substr(r.out.find('{')));
  };
  const nlohmann::json plain = run("none"), again = run("all"), first = run("0");
  // bf16 autocast, and I and W split (zb-h1): W reuses the graph I rebuilt.
  CHECK(run("all --precision bf16 -s zb-h1")["losses"] == run("none --precision bf16 -s zb-h1")["losses"]);
  CHECK(again["recompute"] == "all");
  CHECK(first["recompute"] == "0");
  // Bit for bit: the recomputed forward is the same computation.
  CHECK(again["losses"] == plain["losses"]);
  CHECK(first["losses"] == plain["losses"]);
  const auto peak = [](const nlohmann::json& j) {
    return j["measured_peak_activation_bytes"].get<std::vector<long>>();
  };
  REQUIRE(peak(plain).size() == 2);
  // GPipe holds all 4 microbatches' activations; recomputed, one at a time.
  for (size_t r = 0; r < 2; ++r) {
    INFO("rank " << r);
    CHECK(peak(again)[r] * 2 < peak(plain)[r]);
  }
  CHECK(peak(first)[0] * 2 < peak(plain)[0]);
  // Rank 1, not recomputed, holds what it held (within a message or two
  // of the receive buffers, whose time of arrival varies between runs).
  CHECK(static_cast<double>(peak(first)[1]) == Approx(static_cast<double>(peak(plain)[1])).epsilon(0.05));
}

TEST_CASE(
    "the sharded optimizer trains DP2 x PP2 bit for bit with half the moments, and its checkpoints resume "
    "either way",
    "[train][shard]") {
  const std::string dir = std::string(PPLAB_TEST_TMP_DIR) + "/shard";
  auto run = [](const std::string& args) {
    const PplabRun r = Train("-k 2 --dp 2 --json " + args);
    INFO(args << "\n" << r.out);
    REQUIRE(r.code == 0);
    return nlohmann::json::parse(r.out.substr(r.out.find('{')));
  };
  const nlohmann::json plain = run("--steps 6"), sharded = run("--steps 6 --shard-optimizer");
  CHECK(sharded["shard_optimizer"] == true);
  CHECK(plain["shard_optimizer"] == false);
  CHECK(sharded["losses"] == plain["losses"]);
  // Rank 0's one stage: 2 moments of n floats, or of ceil(n / 2) rounded up
  // to a multiple of 128 (ShardRange).
  const int64_t whole = plain["optimizer_state_bytes"].get<int64_t>();
  const int64_t half = sharded["optimizer_state_bytes"].get<int64_t>();
  CHECK(whole > 0);
  CHECK(2 * half - whole >= 0);
  CHECK(2 * half - whole <= 2 * 2 * 4 * 128);
  // A checkpoint holds the whole moments, so it resumes with or without
  // sharding, on the same steps as the run that was not interrupted.
  const std::vector<double> tail(plain["losses"].begin() + 3, plain["losses"].end());
  for (const auto& [first, then] : {std::pair<std::string, std::string>{"--shard-optimizer", ""},
                                    std::pair<std::string, std::string>{"", "--shard-optimizer"}}) {
    INFO("first '" << first << "', then '" << then << "'");
    REQUIRE(std::system(("rm -rf " + dir).c_str()) == 0);
    // The same 6-step run (its learning-rate schedule spans 6 steps), taken
    // back to its checkpoint after step 3.
    run("--steps 6 --checkpoint-every 3 --checkpoint-dir " + dir + " " + first);
    WriteTextFile(dir + "/latest", "step-000003\n");
    const nlohmann::json resumed = run("--steps 6 --resume --checkpoint-dir " + dir + " " + then);
    CHECK(resumed["losses"].get<std::vector<double>>() == tail);
  }
}

TEST_CASE("killing the launcher takes its workers with it", "[train]") {
  // Start a long run, wait until its launcher and two workers are up, kill
  // the launcher with SIGKILL (no chance to clean up), and count what is
  // left. The seed is computed by the shell and the pattern is a regular
  // expression, so that 918273 is in the run's command lines and nowhere in
  // this script's (pgrep would count the shell and its subshells).
  // The launcher's store folder is left behind, in a TMPDIR of the test's
  // own, until the next launch removes it.
  const std::string tmp = std::string(PPLAB_TEST_TMP_DIR) + "/killed_launcher_tmp";
  const std::string script = "rm -rf " + tmp + " && mkdir " + tmp + " && export TMPDIR=" + tmp + "\n" +
                             std::string(PPLAB_BINARY) +
                             " train --synthetic --out '' -q --model tiny --steps 1000000 --seed $((918270 + 3)) "
                             ">/dev/null 2>&1 & L=$!\n"
                             "count() { pgrep -f 'seed 91827[3]' | wc -l; }\n"
                             "stores() { ls -d $TMPDIR/pplab-store-* 2>/dev/null | wc -l; }\n"
                             "for i in $(seq 1 600); do [ $(count) -ge 3 ] && break; sleep 0.1; done\n"
                             "before=$(count)\n"
                             "kill -9 $L\n"
                             "for i in $(seq 1 300); do [ $(count) -eq 0 ] && break; sleep 0.1; done\n"
                             "left=$(stores)\n" +
                             std::string(PPLAB_BINARY) +
                             " train --synthetic --out '' -q --model tiny --steps 1 >/dev/null 2>&1; code=$?\n"
                             "echo \"$before $(count) $left $code $(stores)\"\n";
  FILE* pipe = popen(script.c_str(), "r");
  REQUIRE(pipe != nullptr);
  int before = -1, after = -1, left = -1, next_code = -1, left_after_next = -1;
  REQUIRE(std::fscanf(pipe, "%d %d %d %d %d", &before, &after, &left, &next_code, &left_after_next) == 5);
  pclose(pipe);
  CHECK(before == 3);
  CHECK(after == 0);
  CHECK(left == 1);
  CHECK(next_code == 0);
  CHECK(left_after_next == 0);
}

TEST_CASE("a killed worker makes the others exit with the rank and action they waited on", "[train]") {
  const PplabRun r = Train("-s 1f1b -k 2 -m 2 --steps 4 --comm-timeout 5 --kill-rank-at 1:2");
  INFO(r.out);
  CHECK(r.code != 0);
  // The first failure is reported; rank 0's consequent error (waiting on
  // rank 1) is summarised, not printed.
  CHECK_THAT(r.out, Catch::Contains("pplab: rank 1 was killed by signal"));
  CHECK_THAT(r.out, Catch::Contains("pplab: rank 0 stopped after rank 1 failed"));
  CHECK_THAT(r.out, !Catch::Contains("pplab: error: rank 0"));
}

TEST_CASE("a worker killed before the rendezvous stops the others at once, not after the timeout", "[train]") {
  // With --comm-timeout 60 the others would wait in the rendezvous for 60 s
  // and the launcher give them 70 s more; nothing is left to wait for.
  const auto start = std::chrono::steady_clock::now();
  const PplabRun r = Train("-s 1f1b -k 4 -m 4 --steps 2 --comm-timeout 60 --kill-rank-at 1:-1");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO(r.out);
  CHECK(r.code == 1);
  CHECK_THAT(r.out, Catch::Contains("pplab: rank 1 was killed by signal"));
  CHECK_THAT(r.out, Catch::Contains("pplab: ranks 0, 2-3 stopped after rank 1 failed"));
  // They were stopped, not late: no line for each.
  CHECK_THAT(r.out, !Catch::Contains("did not exit"));
  std::printf("a worker killed before the rendezvous: the run ended in %.1f s (--comm-timeout 60)\n", seconds);
  CHECK(seconds < 30);
}

}  // namespace pplab::train_cli_test
