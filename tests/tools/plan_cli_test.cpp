// Runs `pplab plan` as a user would: its search over the GPUs, the train line
// it prints, the plan it writes, and its refusals (profiles: plan_cli_profiles_test.cpp).
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>
#include <utility>

#include "schedules/file_io.h"
#include "tests/run_pplab.h"
#include "tests/tools/cli_test_support.h"
#include "traces/chrome_trace.h"

namespace pplab::plan_cli_test {

TEST_CASE("cli: plan --gpus searches every K x D x T and prints the train line of the best", "[cli][plan]") {
  const std::string out = TempPath("gpus-plan.json");
  // The small preset splits over T = 1 or 2 (2 key/value heads).
  PplabRun r = Pplab(
      "plan --model small --gpus 4 --global-batch 16 --seq-len 128 --memory-per-rank 8GiB --top 400 "
      "--json -o " +
      out);
  INFO(r.out);
  REQUIRE(r.code == 0);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  CHECK(j["gpus"] == 4);
  std::set<int> ks, ts;
  for (const auto& c : j["candidates"]) {
    CHECK(c["ranks"].get<int>() * c["dp"].get<int>() * c["tp"].get<int>() == 4);
    ks.insert(c["ranks"].get<int>());
    ts.insert(c["tp"].get<int>());
  }
  CHECK(ks.size() >= 2);  // the rows span more than one K
  CHECK(ts == std::set<int>{1, 2});
  const int K = j["best"]["ranks"], D = j["best"]["dp"], T = j["best"]["tp"];
  CHECK(j["ranks"] == K);
  CHECK(j["tp"] == T);
  const std::string line = j["train_command"];
  CHECK_THAT(line, Catch::Contains("--ranks " + std::to_string(K) + " --dp " + std::to_string(D)));
  CHECK((line.find(" --tp ") != std::string::npos) == (T > 1));
  // A fixed T: every row has it, and the train line carries it.
  r = Pplab("plan --model small --gpus 4 --tp 2 --global-batch 16 --seq-len 128 --memory-per-rank 8GiB --json -o " +
            out);
  REQUIRE(r.code == 0);
  const nlohmann::json fixed = nlohmann::json::parse(r.out);
  for (const auto& c : fixed["candidates"]) CHECK(c["tp"] == 2);
  CHECK_THAT(fixed["train_command"].get<std::string>(), Catch::Contains(" --tp 2"));
  // Sequence parallelism: the rows with T > 1 carry it, and the train line.
  r = Pplab(
      "plan --model small --gpus 4 --sequence-parallel --global-batch 16 --seq-len 128 --memory-per-rank 8GiB "
      "--top 400 --json -o " +
      out);
  REQUIRE(r.code == 0);
  const nlohmann::json sp = nlohmann::json::parse(r.out);
  for (const auto& c : sp["candidates"]) CHECK(c["sequence_parallel"] == (c["tp"].get<int>() > 1));
  CHECK((sp["train_command"].get<std::string>().find(" --sequence-parallel") != std::string::npos) ==
        (sp["tp"].get<int>() > 1));
  // By default (auto) both layouts of each T > 1 candidate are rows; off keeps the positions whole.
  for (const std::string mode : {"", "--sequence-parallel off "}) {
    r = Pplab("plan --model small --gpus 4 " + mode +
              "--global-batch 16 --seq-len 128 --memory-per-rank 8GiB --top 4000 --json -o " + out);
    REQUIRE(r.code == 0);
    const nlohmann::json rows = nlohmann::json::parse(r.out)["candidates"];
    std::set<std::pair<int, bool>> layouts;
    for (const auto& c : rows) {
      layouts.insert({c["tp"].get<int>(), c["sequence_parallel"].get<bool>()});
    }
    if (mode.empty()) {
      CHECK(layouts == std::set<std::pair<int, bool>>{{1, false}, {2, false}, {2, true}});
    } else {
      CHECK(layouts == std::set<std::pair<int, bool>>{{1, false}, {2, false}});
    }
  }
  // The grids searched on several threads: the same ranking, row for row.
  std::string rankings[2];
  for (int i = 0; i < 2; ++i) {
    r = Pplab(
        "plan --model small --gpus 8 --global-batch 16 --seq-len 128 --memory-per-rank 8GiB --top 100000 "
        "--threads " +
        std::to_string(1 + 2 * i) + " --json -o " + out);
    REQUIRE(r.code == 0);
    const nlohmann::json j = nlohmann::json::parse(r.out);
    rankings[i] = j["candidates"].dump();
    CHECK(j["candidates"].size() == j["fitting"].get<size_t>());
  }
  CHECK(rankings[0] == rankings[1]);
  r = Pplab("plan --model small --gpus 4 --sequence-parallel sometimes --global-batch 16 --memory-per-rank 8GiB");
  CHECK(r.code == 2);
  CHECK(r.out == "pplab: error: --sequence-parallel: 'sometimes' is not auto, on or off\n");
  r = Pplab("plan --model small --ranks 2 --sequence-parallel --global-batch 16 --memory-per-rank 8GiB -o " + out);
  CHECK(r.code == 2);
  CHECK(r.out ==
        "pplab: error: --sequence-parallel splits the positions over the tensor-parallel ranks: it needs --tp 2 or "
        "more\n");
  r = Pplab("plan --model small --ranks 2 --tp 4 --global-batch 16 --memory-per-rank 8GiB -o " + out);
  CHECK(r.code == 2);
  CHECK(r.out == "pplab: error: --tp 4: the model's num_key_value_heads 2 is not a multiple of 4\n");
  r = Pplab("plan --model small --gpus 4 --ranks 2 --global-batch 16 --memory-per-rank 8GiB -o " + out);
  CHECK(r.code != 0);
  CHECK_THAT(r.out, Catch::Contains("--ranks excludes --gpus") || Catch::Contains("--gpus excludes --ranks"));
  r = Pplab("plan --model small --global-batch 16 --memory-per-rank 8GiB -o " + out);
  CHECK(r.code != 0);
  CHECK_THAT(r.out, Catch::Contains("give --ranks K (and --dp D), or --gpus N"));
}

TEST_CASE("cli: plan with no candidate to cost names a schedule rule where one ruled them out, else the layers",
          "[cli][plan]") {
  // DualPipe needs an even M of at least 2K: the message blamed the layers.
  PplabRun r = Pplab("plan --model tiny --ranks 2 --global-batch 1 --memory-per-rank 1GiB --schedules dualpipe -o " +
                     TempPath("no-candidate.json"));
  CHECK(r.code == 2);
  CHECK(r.out ==
        "pplab: error: plan: no candidate to cost: no schedule on 2 ranks fits both the model's 4 layers and "
        "its own rules for these microbatch counts (divisors of --global-batch / --dp), e.g. dualpipe: needs "
        "an even M >= 2K = 4 (half the microbatches enter at each end, at least K from each), got M=1\n");
  // One family of several named with none: a note, and in --json.
  r = Pplab(
      "plan --model tiny --ranks 3 --global-batch 6 --seq-len 64 --memory-per-rank 1GiB --schedules "
      "1f1b,dualpipe -o " +
      TempPath("no-candidate.json"));
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Catch::StartsWith("note: --schedules dualpipe: no candidate (needs an even number of ranks K >= 2 "
                                      "(each half of the ranks leads one direction), got K=3)\n"));
  r = Pplab(
      "plan --model tiny --ranks 3 --global-batch 6 --seq-len 64 --memory-per-rank 1GiB --schedules "
      "1f1b,dualpipe --json -o " +
      TempPath("no-candidate.json"));
  CHECK(nlohmann::json::parse(r.out)["no_candidate"] ==
        nlohmann::json{{"dualpipe",
                        "needs an even number of ranks K >= 2 (each half of the ranks leads one "
                        "direction), got K=3"}});
  r = Pplab("plan --model tiny --ranks 8 --global-batch 8 --memory-per-rank 1GiB --schedules 1f1b -o " +
            TempPath("no-candidate.json"));
  CHECK(r.out ==
        "pplab: error: plan: no candidate to cost: the model's 4 layers allow no schedule on 8 ranks with "
        "these options\n");
}

TEST_CASE("cli: plan reads a Hugging Face config.json, and 8B parameters do not fit one 80 GiB GPU", "[cli][plan]") {
  const std::string out = TempPath("hf-plan.json");
  // Meta-Llama-3-8B's config.json: 8 030 261 248 parameters, 16 bytes each of
  // weights, gradients and AdamW moments (128.5 GB) before any activation.
  PplabRun r = Pplab("plan --model " + Data("models/llama3-8b-config.json") +
                     " --gpus 8 --global-batch 64 --seq-len 4096 --memory-per-rank 80GiB --precision bf16"
                     " --flops-per-second 4e14 --top 200 --json -o " +
                     out);
  INFO(r.out);
  REQUIRE(r.code == 0);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  REQUIRE(j["fitting"].get<int>() > 0);
  for (const auto& c : j["candidates"]) {
    CHECK(c["ranks"].get<int>() * c["dp"].get<int>() * c["tp"].get<int>() == 8);
    CHECK(c["ranks"].get<int>() * c["tp"].get<int>() >= 2);  // the model is split somehow
    CHECK(c["peak_memory_bytes"].get<double>() <= 80.0 * (1 << 30));
  }
  // A rate in TFLOP/s where FLOP/s is meant: a step of 6 x 8e9 x 262 144
  // tokens at 400 FLOP/s is about 1e12 years, past any int64 clock. Refused,
  // where it once wrapped to a step of 0 ms that ranked first.
  r = Pplab("plan --model " + Data("models/llama3-8b-config.json") +
            " --ranks 8 --global-batch 64 --seq-len 4096 --memory-per-rank 80GiB --precision bf16"
            " --flops-per-second 400 -o " +
            out);
  CHECK(r.code == 2);
  CHECK(r.out ==
        "pplab: error: --flops-per-second 400: a step of 64 sequences of 4096 tokens would take over 30 years at that "
        "rate, beyond the simulator's clock (FLOP/s, not TFLOP/s)\n");
  // Llama-3-70B's shape (70 553 706 496 parameters, 1.13 TB of state) on 8
  // such GPUs: it says how many the state alone needs.
  const std::string big = TempPath("llama-70b-config.json");
  WriteTextFile(big, R"({"model_type": "llama", "vocab_size": 128256, "hidden_size": 8192,
    "intermediate_size": 28672, "num_hidden_layers": 80, "num_attention_heads": 64, "num_key_value_heads": 8,
    "max_position_embeddings": 8192})");
  r = Pplab("plan --model " + big + " --gpus 8 --global-batch 64 --seq-len 4096 --memory-per-rank 80GiB -o " + out);
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::EndsWith("need at least 14 GPUs of this memory\n"));
  // A config of another architecture: one line naming the file and the field.
  const std::string gemma = TempPath("gemma-config.json");
  WriteTextFile(gemma, R"({"model_type": "gemma2", "vocab_size": 1000, "hidden_size": 64})");
  r = Pplab("plan --model " + gemma + " --ranks 2 --global-batch 8 --memory-per-rank 8GiB -o " + out);
  CHECK(r.code != 0);
  CHECK(r.out == "pplab: error: " + gemma +
                     ": model_type \"gemma2\" is not a Llama: pplab builds Llama decoder layers "
                     "(model_type llama, mistral, qwen2 or qwen3)\n");
}

TEST_CASE("cli: plan's train line carries the precision and the device kind the plan was costed for", "[cli][plan]") {
  const std::string cpu = WriteProfiledCost("profiled-cpu.json");
  std::string text = ReadTextFile(cpu);
  const std::string device = R"("device": "cpu")";
  REQUIRE(text.find(device) != std::string::npos);
  const std::string gpu = TempPath("profiled-gpu.json");
  WriteTextFile(gpu, text.replace(text.find(device), device.size(), R"("device": "cuda:0", "precision": "bf16")"));
  const std::string plan = "plan --model tiny --ranks 2 --global-batch 8 --memory-per-rank 1GiB --json -o " +
                           TempPath("train-line.json") + " --cost ";
  PplabRun r = Pplab(plan + cpu);
  INFO(r.out);
  REQUIRE(r.code == 0);
  std::string line = nlohmann::json::parse(r.out)["train_command"];
  CHECK_THAT(line, !Catch::Contains("--precision") && !Catch::Contains("--device"));
  r = Pplab(plan + gpu);
  REQUIRE(r.code == 0);
  line = nlohmann::json::parse(r.out)["train_command"];
  // Each rank its own GPU (cuda, not the profile's cuda:0), bf16 as costed.
  CHECK_THAT(line, Catch::EndsWith(" --precision bf16 --device cuda"));
  // Analytic costs in bf16: the precision, and no device to name.
  r = Pplab("plan --model tiny --ranks 2 --global-batch 8 --memory-per-rank 1GiB --precision bf16 --json -o " +
            TempPath("train-line.json"));
  REQUIRE(r.code == 0);
  CHECK_THAT(nlohmann::json::parse(r.out)["train_command"].get<std::string>(), Catch::EndsWith(" --precision bf16"));
}

TEST_CASE("cli: plan costs fused attention without the softmax probabilities, and its train line asks for it",
          "[cli][plan]") {
  const std::string out = TempPath("attention-plan.json");
  const std::string plan =
      "plan --model tiny --ranks 2 --global-batch 8 --seq-len 64 --memory-per-rank 1GiB "
      "--recompute none --json -o " +
      out;
  auto rows = [](const PplabRun& r) {
    INFO(r.out);
    REQUIRE(r.code == 0);
    const nlohmann::json j = nlohmann::json::parse(r.out);
    std::map<std::string, int64_t> peak;  // by schedule, M, v and partition
    for (const auto& c : j["candidates"]) {
      peak[c["schedule"].get<std::string>() + " " + c["microbatches"].dump() + " " + c["virtual_stages"].dump() + " " +
           c["partition"].get<std::string>()] = c["peak_memory_bytes"].get<int64_t>();
    }
    return std::make_pair(j, peak);
  };
  const auto [explicit_plan, explicit_peak] = rows(Pplab(plan + " --top 400 --attention explicit"));
  const auto [fused_plan, fused_peak] = rows(Pplab(plan + " --top 400 --attention sdpa"));
  CHECK(explicit_plan["attention"] == "explicit");
  CHECK(fused_plan["attention"] == "sdpa");
  // The train line names the attention where train's auto would run the
  // other: sdpa always, explicit with a LibTorch 2.x build.
  const bool auto_is_sdpa = std::string(PPLAB_TRAIN_ATTENTION) == "sdpa";
  if (auto_is_sdpa) {
    CHECK_THAT(explicit_plan["train_command"].get<std::string>(), Catch::Contains(" --attention explicit"));
  } else {
    CHECK_THAT(explicit_plan["train_command"].get<std::string>(), !Catch::Contains("--attention"));
  }
  CHECK_THAT(fused_plan["train_command"].get<std::string>(), Catch::Contains(" --attention sdpa"));
  // Without --attention (and no profile) plan costs what train --attention
  // auto runs with this build's LibTorch, and says so in its help.
  const auto [default_plan, default_peak] = rows(Pplab(plan + " --top 400"));
  CHECK(default_plan["attention"] == PPLAB_TRAIN_ATTENTION);
  CHECK(default_peak == (auto_is_sdpa ? fused_peak : explicit_peak));
  CHECK_THAT(default_plan["train_command"].get<std::string>(), !Catch::Contains("--attention explicit"));
  const PplabRun help = Pplab("plan --help");
  CHECK_THAT(help.out, Catch::Contains(std::string("sdpa from 2.0 on: ") + PPLAB_TRAIN_ATTENTION + ")"));
  // Every candidate holds less: no (heads x 64) probabilities a token a layer.
  REQUIRE(fused_peak.size() == explicit_peak.size());
  for (const auto& [row, bytes] : fused_peak) {
    INFO(row);
    CHECK(bytes < explicit_peak.at(row));
  }
  // A profile records the attention it ran; plan takes it, and refuses another.
  const std::string cpu = WriteProfiledCost("profiled-attention.json");
  std::string text = ReadTextFile(cpu);
  const std::string device = R"("device": "cpu")";
  const std::string sdpa = TempPath("profiled-sdpa.json");
  WriteTextFile(sdpa, text.replace(text.find(device), device.size(), R"("device": "cpu", "attention": "sdpa")"));
  const std::string fitted = "plan --model tiny --ranks 2 --global-batch 8 --memory-per-rank 1GiB --json -o " + out;
  PplabRun r = Pplab(fitted + " --cost " + sdpa);
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK(nlohmann::json::parse(r.out)["attention"] == "sdpa");
  r = Pplab(fitted + " --cost " + sdpa + " --attention explicit");
  CHECK(r.code == 2);
  CHECK(r.out == "pplab: error: --cost " + sdpa + " was measured with --attention sdpa, not explicit\n");
  r = Pplab(fitted + " --attention flash");
  CHECK(r.code != 0);
  CHECK_THAT(r.out, Catch::Contains("--attention"));
}

TEST_CASE("cli: plan says what its links were costed at, on nodes or not", "[cli][plan]") {
  const std::string plan =
      "plan --model tiny --gpus 4 --global-batch 8 --memory-per-rank 1GiB -o " + TempPath("links-line.json");
  PplabRun r = Pplab(plan + " --link-bandwidth 400 --gpus-per-node 2");
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("\nlinks: between stages 400.0 GB/s, 0.000 ms (flags); on nodes of 2 GPUs, "
                                    "across nodes 25.0 GB/s, 0.010 ms; data-parallel rings inside a node as between "
                                    "stages, across nodes as above\n"));
  r = Pplab(plan + " --dp-bandwidth 0");
  CHECK_THAT(r.out, Catch::Contains("\nlinks: between stages free; data-parallel rings not costed\n"));
  r = Pplab(plan + " --gpus-per-node 2 --json");
  REQUIRE(r.code == 0);
  CHECK(nlohmann::json::parse(r.out)["gpus_per_node"] == 2);
  CHECK(Pplab(plan + " --gpus-per-node 0").code != 0);
  // Below 1e-6 GB/s, as a cost file's links: plan wrote a --cost-out that
  // simulate then refused, and steps past the action time limit.
  for (const char* flag : {"--link-bandwidth", "--dp-bandwidth", "--tp-bandwidth"}) {
    r = Pplab(plan + " " + flag + " 1e-9");
    CHECK(r.code != 0);
    CHECK_THAT(r.out, Catch::Contains(flag) && Catch::Contains("must be 0 (infinite) or at least 1e-6 GB/s"));
    CHECK(Pplab(plan + " " + flag + " 1e-6").code == 0);
  }
}

TEST_CASE("cli: plan keeps to the memory limit and writes a plan that validates", "[cli][plan]") {
  const std::string plan = TempPath("best_plan.json");
  const std::string base = "plan --model tiny --ranks 2 --global-batch 8 --seq-len 32 -o " + plan;
  PplabRun r = Pplab(base + " --memory-per-rank 2MiB --json --top 1000");
  REQUIRE(r.code == 0);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  REQUIRE(!j["candidates"].empty());
  CHECK(j["over_memory"].get<int>() > 0);
  for (const auto& c : j["candidates"]) CHECK(c["peak_memory_bytes"].get<long long>() <= 2 * 1024 * 1024);
  CHECK(j["candidates"][0] == j["best"]);
  CHECK_THAT(j["train_command"].get<std::string>(),
             Catch::StartsWith(std::string(PPLAB_BINARY) + " train --plan " + plan + " --model tiny --partition ") &&
                 Catch::Contains("--batch-size 8 --seq-len 32 --ranks 2 --dp 1"));
  r = Pplab("validate " + plan);
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("'" + j["best"]["schedule"].get<std::string>() + "' is valid"));
  // --trace and --svg: the best candidate's simulated step, whose makespan is
  // its ranked step time, and which explain reads.
  const std::string trace = TempPath("best_plan_trace.json"), svg = TempPath("best_plan.svg");
  r = Pplab(base + " --memory-per-rank 2MiB --json --trace " + trace + " --svg " + svg);
  REQUIRE(r.code == 0);
  const nlohmann::json traced = nlohmann::json::parse(r.out);
  CHECK(traced["trace_file"] == trace);
  const Timeline simulated = TimelineFromChromeTrace(ReadTextFile(trace), trace);
  CHECK(static_cast<double>(Summarize(simulated).makespan) * 1e-6 ==
        Approx(traced["best"]["step_time"].get<double>()).epsilon(1e-9));
  CHECK(Pplab("explain " + trace).code == 0);
  CHECK_THAT(ReadTextFile(svg),
             Catch::Contains("<svg") && Catch::Contains(traced["best"]["schedule"].get<std::string>()));
  r = Pplab(base + " --memory-per-rank 1kB");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("no plan fits in --memory-per-rank 1000 bytes"));
  // zb-auto searches its order under the limit: its peaks are not among the
  // candidates' whose smallest the line gives.
  CHECK_THAT(r.out, Catch::Contains("(not counting zb-auto, which searches an order under the limit itself)"));
  CHECK_THAT(Pplab(base + " --memory-per-rank 1kB --schedules 1f1b").out, !Catch::Contains("zb-auto"));
  // zb-auto alone gives no peak to compare (the smallest was once "0 bytes").
  r = Pplab(base + " --memory-per-rank 1kB --schedules zb-auto");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("bytes: none of the ") &&
                        Catch::Contains("has a peak to compare (zb-auto, searched alone, found no order under the "
                                        "limit)"));
  // --gpus' line says the same of zb-auto as --ranks' does.
  r = Pplab("plan --model tiny --gpus 2 --global-batch 8 --seq-len 32 --memory-per-rank 1kB -o " + plan);
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("(not counting zb-auto, which searches an order under the limit itself)"));
  r = Pplab("plan --model tiny --ranks 2 --global-batch 8 --seq-len 129 --memory-per-rank 1GiB -o " + plan);
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("--seq-len 129 exceeds the model's max_position_embeddings 128"));
  r = Pplab("plan --model tiny --ranks 2 --dp 3 --global-batch 8 --memory-per-rank 1GiB -o " + plan);
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("--global-batch 8 is not a multiple of --dp 3"));
  r = Pplab(base + " --memory-per-rank 2 furlongs");
  CHECK(r.code != 0);
  const std::string cost = WriteProfiledCost("plan_profile.json");
  r = Pplab("plan --model small --ranks 2 --global-batch 8 --memory-per-rank 1GiB --cost " + cost);
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("was measured with --model tiny, not small"));
  r = Pplab("plan --model tiny --ranks 2 --global-batch 8 --memory-per-rank 1GiB --seq-len 16 --cost " + cost);
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("was measured with --seq-len 32, not 16"));
  r = Pplab("plan --model tiny --ranks 2 --global-batch 8 --memory-per-rank 1GiB -o " + plan + " --cost " + cost);
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("fitted to " + cost));
}

TEST_CASE("cli: plan --pick N writes row N of the ranking: its plan, trace, picture and train line", "[cli][plan]") {
  const std::string plan = TempPath("picked_plan.json"), trace = TempPath("picked_trace.json");
  const std::string base =
      "plan --model tiny --ranks 2 --global-batch 8 --seq-len 32 --memory-per-rank 1GiB --top 5 -o " + plan +
      " --trace " + trace;
  PplabRun r = Pplab(base + " --json");
  REQUIRE(r.code == 0);
  const nlohmann::json best = nlohmann::json::parse(r.out);
  CHECK(best["pick"] == 1);
  CHECK(best["picked"] == best["best"]);
  r = Pplab(base + " --json --pick 3");
  INFO(r.out);
  REQUIRE(r.code == 0);
  const nlohmann::json third = nlohmann::json::parse(r.out);
  // The same ranking; the third row is written, and the best stays the best.
  CHECK(third["candidates"] == best["candidates"]);
  CHECK(third["best"] == best["best"]);
  CHECK(third["pick"] == 3);
  const nlohmann::json& row = third["candidates"][2];
  CHECK(third["picked"] == row);
  CHECK(row != third["best"]);
  const nlohmann::json written = nlohmann::json::parse(ReadTextFile(plan));
  CHECK(written["name"] == row["schedule"]);
  CHECK(written["microbatches"] == row["microbatches"]);
  // A named partition by its name, a fitted one by its layers.
  const std::string partition = row["partition"] == "fitted" ? row["layers_per_stage"] : row["partition"];
  CHECK_THAT(third["train_command"].get<std::string>(), Catch::Contains(" --partition " + partition + " "));
  const Timeline simulated = TimelineFromChromeTrace(ReadTextFile(trace), trace);
  CHECK(static_cast<double>(Summarize(simulated).makespan) * 1e-6 ==
        Approx(row["step_time"].get<double>()).epsilon(1e-9));
  r = Pplab(base + " --pick 3");
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("\nplan #3 written to " + plan + " (" + row["schedule"].get<std::string>() +
                                    ", M=" + row["microbatches"].dump() + ","));
  // Past the rows that fit: one line, and nothing written.
  std::remove(plan.c_str());
  const size_t fitting = best["fitting"].get<size_t>();
  r = Pplab(base + " --pick " + std::to_string(fitting + 1));
  CHECK(r.code == 2);
  CHECK(r.out == "pplab: error: --pick " + std::to_string(fitting + 1) + ": only " + std::to_string(fitting) +
                     " candidates fit in --memory-per-rank 1GiB\n");
  struct stat st;
  CHECK(::stat(plan.c_str(), &st) != 0);
  CHECK(Pplab(base + " --pick 0").code != 0);
}

TEST_CASE("cli: plan refuses two outputs in one file or one over a profile it reads before it searches",
          "[cli][plan]") {
  const std::string profile = WriteProfiledCost("outputs-profile.json");
  const std::string kept = ReadTextFile(profile);
  const std::string plan_file = TempPath("outputs-plan.json");
  std::remove(plan_file.c_str());
  const std::string base = "plan --model tiny --ranks 2 --global-batch 8 --memory-per-rank 1GiB --cost " + profile;
  const std::pair<std::string, std::string> cases[] = {
      {" -o ''", "pplab: error: --output: an empty name; give the plan file to write (default plan.json)\n"},
      {" -o " + plan_file + " --trace " + plan_file,
       "pplab: error: --output and --trace both name " + plan_file + " (one would write over the other)\n"},
      {" -o " + plan_file + " --svg " + TempPath(".") + "/outputs-plan.json",
       "pplab: error: --output and --svg name one file (" + plan_file + " and " + TempPath(".") +
           "/outputs-plan.json) (one would write over the other)\n"},
      {" -o " + plan_file + " --cost-out " + profile, "pplab: error: --cost-out and --cost both name " + profile +
                                                          " (the output would replace a file the command reads)\n"},
      {" -o " + profile, "pplab: error: --output and --cost both name " + profile +
                             " (the output would replace a file the command reads)\n"},
      {" -o " + plan_file + " --trace " + TempPath("no-such-folder/t.json"),
       "pplab: error: --trace: cannot write " + TempPath("no-such-folder/t.json") + ": " + TempPath("no-such-folder") +
           ": No such file or directory\n"},
  };
  for (const auto& [flags, says] : cases) {
    const PplabRun r = Pplab(base + flags);
    CHECK(r.code == 2);
    CHECK(r.out == says);
  }
  // Nothing was written, and the profile is as it was.
  struct stat st;
  CHECK(::stat(plan_file.c_str(), &st) != 0);
  CHECK(ReadTextFile(profile) == kept);
  // Distinct files, and a device, are fine.
  CHECK(Pplab(base + " -o " + plan_file + " --trace /dev/null --svg /dev/null").code == 0);
  CHECK(::stat(plan_file.c_str(), &st) == 0);
}

}  // namespace pplab::plan_cli_test

namespace pplab::plan_cli_test {

TEST_CASE("cli: plan costs dualpipe's exchange between its two copies of the model over the link", "[cli][plan]") {
  const std::string plan = TempPath("copy-exchange-plan.json"), cost = TempPath("copy-exchange-cost.json");
  const std::string base = "plan --model tiny --ranks 2 --global-batch 8 --seq-len 32 --memory-per-rank 1GiB -o " +
                           plan + " --cost-out " + cost + " --link-bandwidth 1 --link-latency 0.5 --schedules ";
  REQUIRE(Pplab(base + "dualpipe").code == 0);
  const nlohmann::json dual = nlohmann::json::parse(ReadTextFile(cost));
  // Each rank's two parts' fp32 gradients over 1 GB/s, after 0.5 ms.
  CHECK(dual["step"]["copy_exchange_ms"].get<double>() > 0.5);
  REQUIRE(Pplab(base + "1f1b").code == 0);
  CHECK_FALSE(nlohmann::json::parse(ReadTextFile(cost))["step"].contains("copy_exchange_ms"));
}

TEST_CASE("cli: a plan file records a config file's absolute path, a preset by its name", "[cli][plan]") {
  // The config given relative to the folder plan runs in: train --plan
  // from another folder reads the file's path, so it must not be relative.
  const std::string dir = TempPath("plan_model_path");
  std::filesystem::create_directories(dir + "/configs");
  WriteTextFile(dir + "/configs/tiny.json", ReadTextFile(PPLAB_TEST_DATA_DIR "/fuzz/llama_config/tiny.json"));
  const std::string args = " --ranks 2 --global-batch 8 --seq-len 16 --memory-per-rank 1GiB --schedules 1f1b -o ";
  REQUIRE(Pplab("plan --model configs/tiny.json" + args + "plan.json", "cd " + dir + " && ").code == 0);
  const nlohmann::json planned = nlohmann::json::parse(ReadTextFile(dir + "/plan.json"))["planned"];
  CHECK(std::filesystem::equivalent(planned["model"].get<std::string>(), dir + "/configs/tiny.json"));
  CHECK(std::filesystem::path(planned["model"].get<std::string>()).is_absolute());
  REQUIRE(Pplab("plan --model tiny" + args + "preset.json", "cd " + dir + " && ").code == 0);
  CHECK(nlohmann::json::parse(ReadTextFile(dir + "/preset.json"))["planned"]["model"] == "tiny");
}

TEST_CASE("cli: plan keeps --memory-headroom of the limit free, and notes a plan at the limit", "[cli][plan]") {
  // At 23.5 MiB the best plan peaks at 23.46 MiB (99.8 %): a note; with 5 %
  // kept free the limit is 22.325 MiB, and the plan written is under it.
  const std::string args =
      "plan --model small --ranks 4 --global-batch 16 --seq-len 128 --memory-per-rank 23.5MiB --recompute none "
      "--attention explicit -o " +
      TempPath("headroom_plan.json");
  const PplabRun at_limit = Pplab(args);
  REQUIRE(at_limit.code == 0);
  CHECK_THAT(at_limit.out, Catch::Contains("is 99.8 % of --memory-per-rank") &&
                               Catch::Contains("--memory-headroom 5 keeps 5 % free"));
  const PplabRun kept = Pplab(args + " --memory-headroom 5 --json");
  REQUIRE(kept.code == 0);
  const nlohmann::json j = nlohmann::json::parse(kept.out);
  const double limit = std::floor(23.5 * 1024 * 1024 * 0.95);
  CHECK(j["best"]["peak_memory_bytes"].get<double>() <= limit);
  CHECK(j["memory_per_rank"].get<double>() == limit);
  CHECK_THAT(Pplab(args + " --memory-headroom 5").out, !Catch::Contains("note: its predicted peak"));
  CHECK(Pplab(args + " --memory-headroom 95").code != 0);
}

TEST_CASE("cli: a recomputed plan's --cost-out says so, and simulate refuses a second --recompute on it",
          "[cli][plan]") {
  const std::string plan = TempPath("recomputed-plan.json"), cost = TempPath("recomputed-cost.json");
  const PplabRun r = Pplab(
      "plan --model tiny --ranks 2 --global-batch 8 --memory-per-rank 1GiB --recompute all "
      "--schedules 1f1b --attention explicit --json -o " +
      plan + " --cost-out " + cost);
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK(nlohmann::json::parse(ReadTextFile(cost))["meta"]["recomputed"] == "all");
  const double step = nlohmann::json::parse(r.out)["best"]["step_time"].get<double>();
  const PplabRun sim = Pplab("simulate --plan " + plan + " --cost " + cost + " --json");
  REQUIRE(sim.code == 0);
  CHECK(nlohmann::json::parse(sim.out)["makespan"].get<double>() == Approx(step).epsilon(1e-9));
  // Its B already holds the forward: a second --recompute counted it twice.
  const PplabRun twice = Pplab("simulate --plan " + plan + " --cost " + cost + " --recompute all");
  CHECK(twice.code == 2);
  CHECK_THAT(twice.out, Catch::Contains("already hold the recomputed forward; drop --recompute"));
}

}  // namespace pplab::plan_cli_test

namespace pplab::plan_cli_test {

TEST_CASE("cli: plan's no-fit messages name the limit as given, bytes as bytes and a fraction of a byte",
          "[cli][plan]") {
  const std::string out = TempPath("limits-plan.json");
  // 1024 heads at 131 072 tokens: a microbatch's attention probabilities
  // alone pass 2^62 bytes at every M of 65 536 sequences. Named as bytes
  // (it read "an action's time comes to 146 years").
  const std::string wide = TempPath("wide-config.json");
  WriteTextFile(wide, R"({"hidden_size": 2048, "intermediate_size": 64, "num_attention_heads": 1024,
    "num_key_value_heads": 1024, "num_hidden_layers": 2, "vocab_size": 32000, "max_position_embeddings": 1048576})");
  PplabRun r = Pplab("plan --model " + wide +
                     " --ranks 2 --global-batch 65536 --seq-len 131072 --attention explicit --flops-per-second 1e18 "
                     "--memory-per-rank 1e15 --schedules 1f1b --recompute none -o " +
                     out);
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::StartsWith("pplab: error: plan: every one of the 17 candidates is too large to cost "
                                      "(times or bytes past what int64 holds); the first: plan: a stage's bytes come "
                                      "to 4.612326 EB") &&
                        !Catch::Contains("years"));
  // With a headroom, the limit as given and what is left of it.
  r = Pplab("plan --model tiny --ranks 2 --global-batch 8 --memory-per-rank 100kB --memory-headroom 50 -o " + out);
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::StartsWith("pplab: error: no plan fits in --memory-per-rank 100000 bytes less "
                                      "--memory-headroom 50.0 % (50000 bytes): "));
  // Sharded over 3 replicas, the state is 8 + 8 / 3 bytes a parameter.
  r = Pplab(
      "plan --model tiny --ranks 2 --dp 3 --shard-optimizer --global-batch 6 --seq-len 8 --memory-per-rank 1kB -o " +
      out);
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("AdamW moments alone (10.67 bytes a parameter) need at least"));
  // Actions under a nanosecond each: the step rounds to 0, tokens/s read 0
  // and the rows ranked by memory alone.
  r = Pplab(
      "plan --model tiny --ranks 2 --global-batch 4 --seq-len 4 --memory-per-rank 8GiB --flops-per-second 1e18 -o " +
      out);
  CHECK(r.code == 2);
  CHECK(r.out ==
        "pplab: error: --flops-per-second 1e+18: the best candidate's step of 4 sequences of 4 tokens comes to 0 ns: "
        "its actions each take under 1 ns, and the simulator counts whole nanoseconds (is the rate in FLOP/s?)\n");
}

}  // namespace pplab::plan_cli_test

namespace pplab::plan_cli_test {

TEST_CASE("cli: plan's train line quotes its paths for the shell, and runs as printed", "[cli][plan]") {
  // A folder with a space and a file with a quote: the line was split at the space.
  const std::string dir = TempPath("plan dir");
  std::filesystem::create_directories(dir);
  const std::string out = dir + "/it's.json";
  const PplabRun r =
      Pplab("plan --model tiny --ranks 2 --global-batch 8 --memory-per-rank 1GiB --json -o \"" + out + "\"");
  INFO(r.out);
  REQUIRE(r.code == 0);
  const std::string line = nlohmann::json::parse(r.out)["train_command"].get<std::string>();
  CHECK_THAT(line, Catch::Contains(" train --plan '" + dir + "/it'\\''s.json' --model tiny "));
  const PplabRun run = Shell(line + " --steps 1 --synthetic --out '' -q");
  INFO(run.out);
  CHECK(run.code == 0);
}

}  // namespace pplab::plan_cli_test

namespace pplab::plan_cli_test {

TEST_CASE("cli: plan's table gives slow plans' tokens a second in three digits, not 0", "[cli][plan]") {
  // At 1000 FLOP/s the tiny model makes a few thousandths of a token a second.
  const PplabRun r = Pplab(
      "plan --model tiny --ranks 2 --global-batch 8 --memory-per-rank 1GiB --flops-per-second 1e3 "
      "--schedules 1f1b -o " +
      TempPath("slow-plan.json"));
  INFO(r.out);
  REQUIRE(r.code == 0);
  // The first row: the line whose first word is 1.
  std::smatch row;
  REQUIRE(std::regex_search(r.out, row, std::regex("\\n *1  1f1b [^\\n]*")));
  const std::string line = row.str();
  const std::string tokens = line.substr(line.find_last_of(' ') + 1);
  INFO(line);
  CHECK(std::regex_match(tokens, std::regex("0\\.00[1-9][0-9]{2}")));
}

}  // namespace pplab::plan_cli_test
