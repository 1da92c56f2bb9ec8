// pplab profile across processes: the cost model it writes, and its errors.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "models/llama.h"
#include "schedules/file_io.h"
#include "schedules/generators.h"
#include "schedules/lowering.h"
#include "sim/cost_model.h"
#include "sim/simulator.h"
#include "tests/run_pplab.h"
#include "tools/profile_report.h"

namespace pplab::profile_cli_test {

TEST_CASE("profile of the tiny model on 2 ranks writes a cost model the simulator reads, with step costs and spreads",
          "[profile]") {
  const std::string path = std::string(PPLAB_TEST_TMP_DIR) + "/profile_tiny.json";
  const int B = 2, L = 16, C = 32;  // tiny: hidden 32
  const PplabRun r =
      Pplab("profile --model tiny -k 2 --microbatch-size 2 --seq-len 16 --warmup 2 --repeats 7 -o " + path);
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("stage") != std::string::npos);
  const std::string text = ReadTextFile(path);
  const CostModel costs = CostModel::FromJson(text, path);
  REQUIRE(costs.NumStages() == 2);
  // pplab's executor runs an overlapped F&B's parts in turn: its profile says so.
  CHECK(costs.PairsInTurn());
  const auto doc = nlohmann::json::parse(text);
  for (int s = 0; s < 2; ++s) {
    const auto& st = doc["stages"][s];
    INFO("stage " << s << ": " << st.dump());
    for (const char* key : {"forward_ms", "backward_ms", "backward_input_ms", "backward_weight_ms"}) {
      CHECK(st[key].get<double>() > 0);
    }
    // I + W does the work of B (W walks the graph again); the factor is wide
    // because the test machine may be loaded.
    const double iw = st["backward_input_ms"].get<double>() + st["backward_weight_ms"].get<double>();
    CHECK(iw > 0.2 * st["backward_ms"].get<double>());
    CHECK(iw < 10.0 * st["backward_ms"].get<double>());
    CHECK(st["activation_bytes"].get<int64_t>() > 0);
    CHECK(st["weight_grad_bytes"].get<int64_t>() > 0);
    // Every action's spread: p10 <= median <= p90; no replicas, so no REDUCE_GRAD.
    for (const std::string kind : {"forward", "backward", "backward_input", "backward_weight"}) {
      INFO(kind);
      CHECK(st[kind + "_p10_ms"].get<double>() <= st[kind + "_ms"].get<double>());
      CHECK(st[kind + "_ms"].get<double>() <= st[kind + "_p90_ms"].get<double>());
    }
    CHECK_FALSE(st.contains("reduce_grad_ms"));
  }
  // The step's work after the actions, measured: all positive on 2 ranks, each with its spread.
  const auto& step = doc["step"];
  INFO("step: " << step.dump());
  for (const std::string kind : {"loss_allreduce", "norm_allreduce", "clip", "optimizer"}) {
    INFO(kind);
    CHECK(step[kind + "_ms"].get<double>() > 0);
    CHECK(step[kind + "_p10_ms"].get<double>() <= step[kind + "_ms"].get<double>());
    CHECK(step[kind + "_ms"].get<double>() <= step[kind + "_p90_ms"].get<double>());
  }
  CHECK(costs.Step().optimizer > 0);
  CHECK_FALSE(step.contains("tied_exchange_ms"));  // the tiny preset's head is its own
  CHECK(costs.HasSpread());
  CHECK(doc["meta"]["extra"]["step_per_world_rank"].size() == 2);
  // Stage 0 sends hidden (B,L,C) float32 and attention_mask (B,L) int64; the
  // last stage sends its input gradient (B,L,C).
  CHECK(doc["stages"][0]["message_bytes"].get<int64_t>() == B * L * C * 4 + B * L * 8);
  CHECK(doc["stages"][1]["message_bytes"].get<int64_t>() == B * L * C * 4);
  CHECK(doc["stages"][0]["input_bytes"].get<int64_t>() == 0);
  CHECK(doc["stages"][1]["input_bytes"].get<int64_t>() == B * L * C * 4 + B * L * 8);
  // Gloo's send is a view of the outputs, which the stage keeps until its B
  // anyway: it holds nothing more when sent. The last stage sends no forward
  // message.
  CHECK(doc["stages"][0]["forward_send_bytes"].get<int64_t>() == 0);
  CHECK_FALSE(doc["stages"][1].contains("forward_send_bytes"));
  // The last stage's input gradient (B,L,C) float32; its input came from rank 0.
  CHECK(doc["stages"][1]["input_grad_bytes"].get<int64_t>() == B * L * C * 4);
  CHECK_FALSE(doc["stages"][0].contains("input_grad_bytes"));
  CHECK(doc["stages"][0]["activation_includes_input"] == false);
  CHECK(doc["stages"][1]["activation_includes_input"] == true);
  CHECK(doc["message_memory"] ==
        nlohmann::json{{"sent_freed", "step_end"}, {"receive_posted", "one_action_ahead"}, {"sent_view", true}});
  REQUIRE(costs.Messages());
  CHECK(costs.Messages()->sent_freed == MessageMemory::SentFreed::kStepEnd);
  CHECK(doc["link"]["latency_ms"].get<double>() > 0);
  CHECK(doc["link"]["bandwidth_gbps"].get<double>() >= 0);
  const auto& meta = doc["meta"];
  CHECK(meta["source"] == "pplab profile");
  CHECK(meta["model"] == "tiny");
  CHECK(meta["config"]["hidden_size"] == C);
  CHECK(meta["config"]["num_hidden_layers"] == 4);
  CHECK(meta["partition"] == "2,2");
  CHECK(meta["microbatch_size"] == B);
  CHECK(meta["seq_len"] == L);
  CHECK(meta["device"] == "cpu");
  CHECK(meta["threads_per_rank"].get<int>() >= 1);
  CHECK(meta["ranks"] == 2);
  CHECK(meta["precision"] == "fp32");
  // --attention auto: sdpa where this LibTorch has it (2.x), else explicit.
  CHECK(meta["attention"] == (SdpaAvailable() ? "sdpa" : "explicit"));
  CHECK(meta["extra"]["action_overhead_ms"].get<double>() >= 0);
  // On the host clock no rank has a device lag, so none is launch-bound.
  CHECK(meta["extra"]["launch_bound_per_rank"] == nlohmann::json::array({nullptr, nullptr}));
  CHECK(meta["extra"]["action_ms_per_rank"][1].get<double>() > 0);
  CHECK(meta["extra"]["stages"][1]["backward_transient_bytes"].get<int64_t>() > 0);
  CHECK(meta["tensor_parallel"] == 1);
  CHECK(meta["sequence_parallel"] == false);
  CHECK(meta["cuda_graphs"] == false);
  // Exactly these fields; anything else goes under extra.
  CHECK(meta.size() == 16);
  // 2 ranks of cores / 2 threads fit the cores (one slot each): timed at once,
  // and no mapping for the simulator to queue.
  const bool fits = std::thread::hardware_concurrency() >= 2;
  CHECK(meta["extra"]["measure_turns"] == (fits ? 1 : 2));
  CHECK(meta["shared_device"] == (fits ? "none" : "turns"));
  CHECK(doc.contains("devices") == !fits);

  // The simulator takes it, its step work and its spreads.
  const PplabRun sim = Pplab("simulate -s 1f1b -k 2 -m 4 --cost " + path + " --json --samples 20");
  INFO(sim.out);
  CHECK(sim.code == 0);
  const auto simulated = nlohmann::json::parse(sim.out);
  CHECK(simulated["samples"]["p10"].get<double>() <= simulated["samples"]["p90"].get<double>());

  // --json prints the same document as one object.
  const PplabRun j = Pplab("profile --model tiny -k 2 --microbatch-size 1 --seq-len 8 --warmup 0 --repeats 1 --json");
  INFO(j.out);
  REQUIRE(j.code == 0);
  const auto printed = nlohmann::json::parse(j.out.substr(j.out.find('{')));
  CHECK(printed["meta"]["partition"] == "2,2");
  CHECK(printed["stages"].size() == 2);
}

TEST_CASE("profile of a model with tied embeddings times the swap of their gradients, which simulate costs",
          "[profile]") {
  const std::string dir = PPLAB_TEST_TMP_DIR, model = dir + "/profile_tied_model.json",
                    path = dir + "/profile_tied.json";
  WriteTextFile(model, R"({"vocab_size": 256, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 4,
      "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 128,
      "tie_word_embeddings": true})");
  const PplabRun r =
      Pplab("profile --model " + model + " -k 2 --microbatch-size 2 --seq-len 16 --warmup 1 --repeats 3 -o " + path);
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("tied embeddings' gradient swap between the first and the last stage"));
  const CostModel costs = CostModel::FromJson(ReadTextFile(path), path);
  const TimeNs swap = costs.Step().tied_exchange;
  CHECK(swap > 0);
  REQUIRE(costs.Step().tied_exchange_spread);
  CHECK(costs.Step().tied_exchange_spread->p10 <= swap);
  // 1f1b puts the halves on ranks 0 and 1: the simulated step has the swap
  // on both.
  const SimResult sim = Simulate(Lower(Generate("1f1b", {2, 4, 1})), costs);
  int swaps = 0;
  for (const StepEvent& e : sim.timeline.step_events) swaps += e.name == "tied_exchange" && e.end - e.start == swap;
  CHECK(swaps == 2);
}

TEST_CASE("the profile's activation bytes predict the executor's measured peak", "[profile]") {
  // One stage a rank, and two (interleaved, V-shaped with DualPipeV's overlap).
  for (const auto& [virtual_stages, schedules] :
       {std::pair<int, std::vector<std::string>>{1, {"gpipe", "1f1b", "zb-h1"}},
        {2, {"interleaved-1f1b -v 2", "dualpipev"}}}) {
    const std::string path =
        std::string(PPLAB_TEST_TMP_DIR) + "/profile_peak_v" + std::to_string(virtual_stages) + ".json";
    const PplabRun p = Pplab("profile --model tiny -k 2 --microbatch-size 2 --seq-len 16 --warmup 0 --repeats 1 -v " +
                             std::to_string(virtual_stages) + " -o " + path);
    INFO(p.out);
    REQUIRE(p.code == 0);
    for (const std::string& schedule : schedules) {
      const PplabRun sim = Pplab("simulate -s " + schedule + " -k 2 -m 4 --cost " + path + " --json");
      const PplabRun train =
          Pplab("train -s " + schedule +
                " -k 2 -m 4 --model tiny --batch-size 8 --seq-len 16 --steps 2 --measure-memory --json --synthetic"
                " --out '' -q --eval-every 0");
      INFO(schedule << "\n" << sim.out << "\n" << train.out);
      REQUIRE(sim.code == 0);
      REQUIRE(train.code == 0);
      const auto predicted = nlohmann::json::parse(sim.out)["per_rank"];
      const auto measured =
          nlohmann::json::parse(train.out.substr(train.out.find('{')))["measured_peak_activation_bytes"];
      REQUIRE(measured.size() == 2);
      for (int r = 0; r < 2; ++r) {
        const double want = predicted[r]["peak_activation_bytes"].get<double>();
        const double got = measured[r].get<double>();
        std::printf("peak activation bytes %-22s rank %d: predicted %.0f, measured %.0f (%+.2f %%)\n", schedule.c_str(),
                    r, want, got, 100 * (want - got) / got);
        // The stash, the largest temporaries (workspace_bytes) and the
        // message buffers as Gloo holds them (message_memory) are what the
        // executor holds: within 0.5 % (the issue's target is 10 %). One
        // gradient message counted twice is about 1 % of zb-h1's last rank
        // here (runtime/exec/executor.cc copies what SEND_B sends for that).
        CHECK(want <= 1.005 * got);
        CHECK(want >= 0.995 * got);
      }
    }
  }
}

TEST_CASE("profile names the ranks whose GPU waited for the host's launches, from its overhead run", "[profile]") {
  // Rank 0 lagged 0.05 ms behind its host against 2.5 ms actions (under a
  // tenth: launch-bound), rank 1 ran 30 ms behind (the GPU the bound).
  nlohmann::json meta = {{"cuda_graphs", false},
                         {"extra",
                          {{"launch_bound_per_rank", {true, false}},
                           {"device_lag_ms_per_rank", {0.05, 30.0}},
                           {"action_ms_per_rank", {2.5, 2.5}}}}};
  CHECK(cli::LaunchBoundLine(meta) ==
        "the GPU waited for the host to launch its kernels on rank 0 (device lag against a compute action: 0.050 ms "
        "against 2.500 ms): profile --cuda-graphs may time faster stages, for train --cuda-graphs");
  meta["extra"]["launch_bound_per_rank"] = {true, true};
  CHECK_THAT(cli::LaunchBoundLine(meta), Catch::Contains("on ranks 0, 1 (") &&
                                             Catch::Contains("0.050 ms against 2.500 ms; 30.000 ms against 2.500 ms"));
  // Nothing to say on the host clock (no lag: null), with graphs already,
  // or where no rank waited for its host.
  meta["extra"]["launch_bound_per_rank"] = {nullptr, nullptr};
  CHECK(cli::LaunchBoundLine(meta).empty());
  meta["extra"]["launch_bound_per_rank"] = {true, false};
  meta["cuda_graphs"] = true;
  CHECK(cli::LaunchBoundLine(meta).empty());
  meta["cuda_graphs"] = false;
  meta["extra"]["launch_bound_per_rank"] = {false, false};
  CHECK(cli::LaunchBoundLine(meta).empty());
}

TEST_CASE("profile refuses bad input with one line and a non-zero exit", "[profile]") {
  const std::string ok = " --microbatch-size 1 --seq-len 8 --repeats 1";
  for (const std::string& args : {
           std::string("--model nosuch -k 2") + ok,                           // unknown model
           std::string("--model tiny -k 2 --partition 3,2") + ok,             // 5 layers, the model has 4
           std::string("--model tiny -k 2 -v 3") + ok,                        // 6 stages for 4 layers
           std::string("--model tiny -k 2 --microbatch-size 0 --seq-len 8"),  // microbatch size
           std::string("--model tiny -k 2 --microbatch-size 1 --seq-len 0"),  // sequence length
           std::string("--model tiny -k 2 --microbatch-size 1 --seq-len 100000"),
           std::string("--model tiny -k 2 -o /nonexistent/dir/cost.json") + ok,  // unwritable output
           // below a file (root too cannot write there), and a folder
           std::string("--model tiny -k 2 -o " PPLAB_TEST_DATA_DIR "/deadlock.csv/cost.json") + ok,
           std::string("--model tiny -k 2 -o " PPLAB_TEST_TMP_DIR) + ok,
           std::string("--model tiny -k 2 --precision fp16") + ok,  // fp32 or bf16 only
           std::string("--model tiny -k 2 --layers 5") + ok,        // a slice of more than 4 layers
           std::string("--model tiny -k 4 --layers 2") + ok,        // 4 stages of 2 layers
           std::string("--model tiny -k 1 --layers 0") + ok,        // no layers (it profiled all)
           std::string("--model tiny -k 1 --tp 3") + ok,            // 4 heads over 3 ranks
           std::string("--model tiny -k 1 --tp 0") + ok,
           std::string("--model tiny -k 1 --sequence-parallel") + ok,  // without --tp
           std::string("--model tiny -k 1 --tp 2 --sequence-parallel --microbatch-size 1 --seq-len 7"),
           std::string("--model tiny -k 1 --microbatch-size 2,0 --seq-len 8"),    // each size is checked
           std::string("--model tiny -k 1 --microbatch-size 2,4,2 --seq-len 8"),  // a size twice
           // a device this machine lacks (no CUDA here, or no 100th GPU), refused before the workers
           // start: each worker refused it, two lines
           std::string("--model tiny -k 2 --device cuda:99") + ok,
           std::string("--model tiny -k 2 --device tpu") + ok,
           // a folder, with several sizes too (each file is named after -o's)
           std::string("--model tiny -k 1 --microbatch-size 1,2 --seq-len 8 --repeats 1 -o " PPLAB_TEST_TMP_DIR),
           std::string("--model tiny -k 1 --microbatch-size 1,2 --seq-len 8 --repeats 1 -o " PPLAB_TEST_TMP_DIR "/"),
       }) {
    const PplabRun r = Pplab("profile " + args);
    INFO(args << "\n" << r.out);
    CHECK(r.code != 0);
    CHECK(r.out.find("pplab: error: ") == 0);
    CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 1);
  }
  // -o may not replace the --model file it reads (nor one profile another).
  const std::string model = std::string(PPLAB_TEST_TMP_DIR) + "/profile_refuses-mb1.json";
  WriteTextFile(model, ReadTextFile(PPLAB_TEST_DATA_DIR "/fuzz/llama_config/tiny.json"));
  const std::string model_text = ReadTextFile(model);
  for (const std::string& sizes_out :
       {"1 -o " + model, "1,2 -o " + std::string(PPLAB_TEST_TMP_DIR) + "/profile_refuses.json"}) {
    const PplabRun r =
        Pplab("profile --model " + model + " -k 1 --seq-len 8 --repeats 1 --microbatch-size " + sizes_out);
    INFO(r.out);
    CHECK(r.code == 2);
    CHECK_THAT(r.out, Catch::Contains("-o and --model both name " + model));
  }
  CHECK(ReadTextFile(model) == model_text);
}

TEST_CASE("profile --layers measures a slice of the model that plan fits the whole model to", "[profile]") {
  const std::string path = std::string(PPLAB_TEST_TMP_DIR) + "/profile_slice.json";
  PplabRun r =
      Pplab("profile --model tiny --layers 2 -k 2 --microbatch-size 2 --seq-len 16 --warmup 1 --repeats 3 -o " + path);
  INFO(r.out);
  REQUIRE(r.code == 0);
  const auto meta = nlohmann::json::parse(ReadTextFile(path))["meta"];
  CHECK(meta["model"] == "tiny");
  CHECK(meta["config"]["num_hidden_layers"] == 2);
  CHECK(meta["partition"] == "1,1");
  r = Pplab("plan --model tiny --ranks 2 --global-batch 8 --memory-per-rank 1GiB --json --cost " + path + " -o " +
            std::string(PPLAB_TEST_TMP_DIR) + "/profile_slice_plan.json");
  REQUIRE(r.code == 0);
  CHECK(nlohmann::json::parse(r.out)["costs_from"] == "fitted to " + path + " (a slice of 2 of the model's 4 layers)");
}

TEST_CASE("profile at several microbatch sizes writes a cost model for each, which plan fits together", "[profile]") {
  const std::string dir = std::string(PPLAB_TEST_TMP_DIR);
  const int L = 16, C = 32;  // tiny: hidden 32
  for (const int mb : {1, 3}) std::remove((dir + "/sizes-mb" + std::to_string(mb) + ".json").c_str());
  PplabRun r = Pplab("profile --model tiny -k 2 --microbatch-size 3,1 --seq-len 16 --warmup 1 --repeats 3 -o " + dir +
                     "/sizes.json");
  INFO(r.out);
  REQUIRE(r.code == 0);
  for (const int mb : {1, 3}) {
    const std::string path = dir + "/sizes-mb" + std::to_string(mb) + ".json";
    INFO(path);
    const auto doc = nlohmann::json::parse(ReadTextFile(path));
    CHECK(doc["meta"]["microbatch_size"] == mb);
    // The same stages measured at each size: the messages are the size's
    // (B,L,C) fp32 activation (and the mask on the first stage's).
    CHECK(doc["stages"][0]["message_bytes"].get<int64_t>() == mb * L * C * 4 + mb * L * 8);
    CHECK(doc["stages"][1]["message_bytes"].get<int64_t>() == mb * L * C * 4);
    CHECK_THAT(r.out, Catch::Contains("cost model written to " + path + "\n"));
  }
  CHECK_THAT(r.out, Catch::Contains("fits them together (a fixed time a layer besides the time per FLOP): --cost " +
                                    dir + "/sizes-mb3.json --cost " + dir + "/sizes-mb1.json\n"));
  r = Pplab("plan --model tiny --ranks 2 --global-batch 6 --memory-per-rank 1GiB --json --cost " + dir +
            "/sizes-mb1.json --cost " + dir + "/sizes-mb3.json -o " + dir + "/sizes-plan.json");
  REQUIRE(r.code == 0);
  const auto plan = nlohmann::json::parse(r.out);
  REQUIRE(plan["size_ranges"].size() == 1);
  CHECK(plan["size_ranges"][0]["microbatch_sizes"] == nlohmann::json::array({1, 3}));
  // --json: one cost model a line, in the order given.
  r = Pplab("profile --model tiny -k 1 --microbatch-size 2,1 --seq-len 8 --warmup 0 --repeats 1 --json");
  REQUIRE(r.code == 0);
  std::vector<int> sizes;
  size_t start = 0;
  for (size_t end = r.out.find('\n'); end != std::string::npos; start = end + 1, end = r.out.find('\n', start)) {
    const std::string line = r.out.substr(start, end - start);
    if (!line.empty() && line[0] == '{') sizes.push_back(nlohmann::json::parse(line)["meta"]["microbatch_size"]);
  }
  CHECK(sizes == std::vector<int>{2, 1});
}

TEST_CASE("profile and train refuse a model this machine cannot hold, before any worker starts", "[profile]") {
  // Llama-3-70B's shape: about 70.6e9 parameters, 1.1 TB of fp32 weights,
  // gradients and AdamW moments, more than any machine the tests run on.
  const std::string config = std::string(PPLAB_TEST_TMP_DIR) + "/profile-llama-70b-config.json";  // not plan_cli_test's
  WriteTextFile(config, R"({"model_type": "llama", "vocab_size": 128256, "hidden_size": 8192,
    "intermediate_size": 28672, "num_hidden_layers": 80, "num_attention_heads": 64, "num_key_value_heads": 8})");
  for (const std::string& command : {"profile --model " + config + " -k 2 --microbatch-size 1 --seq-len 8",
                                     "train --model " + config + " -k 1 -m 1 --synthetic --steps 1 --out ''"}) {
    const PplabRun r = Pplab(command);
    INFO(command << "\n" << r.out);
    CHECK(r.code == 2);
    CHECK_THAT(r.out, Catch::StartsWith("pplab: error: ") && Catch::Contains("(model state and LibTorch)") &&
                          Catch::EndsWith("or pass --oversubscribe\n"));
    CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 1);
  }
}

TEST_CASE("profile with --dp 2 measures each stage's REDUCE_GRAD and the simulator costs it", "[profile][dp]") {
  const std::string path = std::string(PPLAB_TEST_TMP_DIR) + "/profile_dp.json";
  const PplabRun r =
      Pplab("profile --model tiny -k 1 --dp 2 --microbatch-size 1 --seq-len 8 --warmup 1 --repeats 3 -o " + path);
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("REDUCE_GRAD over 2 replicas") != std::string::npos);
  const auto doc = nlohmann::json::parse(ReadTextFile(path));
  CHECK(doc["data_parallel"]["degree"] == 2);
  // One pipeline rank sends no messages: no transport rules to record.
  CHECK_FALSE(doc.contains("message_memory"));
  const auto& st = doc["stages"][0];
  CHECK(st["reduce_grad_ms"].get<double>() > 0);
  CHECK(st["reduce_grad_p10_ms"].get<double>() <= st["reduce_grad_ms"].get<double>());
  CHECK(st["reduce_grad_ms"].get<double>() <= st["reduce_grad_p90_ms"].get<double>());
  CHECK(doc["meta"]["extra"]["step_per_world_rank"].size() == 2);
  const CostModel costs = CostModel::FromJson(ReadTextFile(path), path);
  CHECK(costs.CollectiveTime({ActionKind::kReduceGrad, 0, 0}) == MsToNs(st["reduce_grad_ms"].get<double>()));
}

TEST_CASE("ranks that time-slice one device are profiled in turns, and the simulator queues them for it", "[profile]") {
  // OMP_NUM_THREADS of all the cores for each of 2 ranks: the host runs one
  // rank's actions at a time (1 slot), as one GPU does for 2 ranks.
  const std::string path = std::string(PPLAB_TEST_TMP_DIR) + "/profile_turns.json";
  const std::string threads = std::to_string(std::max(1u, std::thread::hardware_concurrency()));
  const PplabRun r =
      Pplab("profile --model tiny -k 2 --microbatch-size 2 --seq-len 16 --warmup 1 --repeats 3 -o " + path,
            "OMP_NUM_THREADS=" + threads + " ");
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("timed in 2 turns") != std::string::npos);
  const auto doc = nlohmann::json::parse(ReadTextFile(path));
  CHECK(doc["devices"] == std::vector<int>{0, 0});
  CHECK(doc["device_slots"] == std::vector<int>{1});
  CHECK(doc["meta"]["extra"]["measure_turns"] == 2);
  // Both ranks' F and B go through the one slot, each for its measured
  // share of it (the CPU time its threads kept busy): the step is at least
  // those shares back to back, M x sum over stages of (F f_share + B b_share).
  const int M = 4;
  double work = 0;
  for (const auto& st : doc["stages"]) {
    const double f_share = st["forward_device_share"].get<double>(),
                 b_share = st["backward_device_share"].get<double>();
    CHECK(f_share > 0);
    CHECK(f_share <= 1);
    CHECK(b_share > 0);
    CHECK(b_share <= 1);
    work += M * (st["forward_ms"].get<double>() * f_share + st["backward_ms"].get<double>() * b_share);
  }
  const PplabRun sim = Pplab("simulate -s 1f1b -k 2 -m 4 --cost " + path + " --json");
  INFO(sim.out);
  REQUIRE(sim.code == 0);
  const auto simulated = nlohmann::json::parse(sim.out);
  CHECK(simulated["makespan"].get<double>() >= work * (1 - 1e-9));
  // With whole actions holding the slot (the shares left out: a share
  // measured below 1, as on a loaded machine, may overlap the ranks), the
  // step is at least all of F and B back to back, M x sum over stages of
  // (F + B), and no shorter than with the shares.
  nlohmann::json whole_doc = doc;
  double whole_work = 0;
  for (auto& st : whole_doc["stages"]) {
    for (const char* key : {"forward_device_share", "backward_device_share", "backward_input_device_share",
                            "backward_weight_device_share"}) {
      st.erase(key);
    }
    whole_work += M * (st["forward_ms"].get<double>() + st["backward_ms"].get<double>());
  }
  const std::string whole_path = std::string(PPLAB_TEST_TMP_DIR) + "/profile_turns_whole.json";
  WriteTextFile(whole_path, whole_doc.dump());
  const PplabRun whole = Pplab("simulate -s 1f1b -k 2 -m 4 --cost " + whole_path + " --json");
  INFO(whole.out);
  REQUIRE(whole.code == 0);
  const double whole_makespan = nlohmann::json::parse(whole.out)["makespan"].get<double>();
  CHECK(whole_makespan >= whole_work * (1 - 1e-9));
  CHECK(whole_makespan >= simulated["makespan"].get<double>());
  // The same costs on a device each (--devices 0,1) overlap the ranks: shorter.
  const PplabRun apart = Pplab("simulate -s 1f1b -k 2 -m 4 --cost " + whole_path + " --devices 0,1 --json");
  INFO(apart.out);
  REQUIRE(apart.code == 0);
  CHECK(nlohmann::json::parse(apart.out)["makespan"].get<double>() < whole_makespan);
}

TEST_CASE(
    "profile --shared-device together times ranks that share a device at once, and the simulator runs them "
    "side by side",
    "[profile]") {
  // The same one-slot host as above, both ranks timed at the same time.
  const std::string path = std::string(PPLAB_TEST_TMP_DIR) + "/profile_together.json";
  const std::string threads = std::to_string(std::max(1u, std::thread::hardware_concurrency()));
  const PplabRun r = Pplab(
      "profile --model tiny -k 2 --microbatch-size 2 --seq-len 16 --warmup 1 --repeats 3 "
      "--shared-device together -o " +
          path,
      "OMP_NUM_THREADS=" + threads + " ");
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("timed together") != std::string::npos);
  const auto doc = nlohmann::json::parse(ReadTextFile(path));
  CHECK(doc["meta"]["extra"]["measure_turns"] == 1);
  CHECK(doc["meta"]["shared_device"] == "together");
  // The mapping is kept, with a slot for each of the device's ranks.
  CHECK(doc["devices"] == std::vector<int>{0, 0});
  CHECK(doc["device_slots"] == std::vector<int>{2});
  // So nothing queues: the step is the one of a device each (--devices 0,1).
  const PplabRun shared = Pplab("simulate -s 1f1b -k 2 -m 4 --cost " + path + " --json");
  const PplabRun apart = Pplab("simulate -s 1f1b -k 2 -m 4 --cost " + path + " --devices 0,1 --json");
  INFO(shared.out << apart.out);
  REQUIRE(shared.code == 0);
  REQUIRE(apart.code == 0);
  CHECK(nlohmann::json::parse(shared.out)["makespan"] == nlohmann::json::parse(apart.out)["makespan"]);
  // Its times hold the other rank's share of the device: plan, which gives
  // each rank a device of its own, refuses the file.
  const PplabRun plan = Pplab("plan --model tiny --ranks 2 --global-batch 8 --memory-per-rank 1GiB --cost " + path);
  CHECK(plan.code != 0);
  CHECK(plan.out.find("timed together (meta.shared_device \"together\")") != std::string::npos);
  CHECK(plan.out.find("profile with --shared-device turns") != std::string::npos);
}

TEST_CASE("profile --shared-device takes turns or together, refused otherwise before any worker starts", "[profile]") {
  const PplabRun r = Pplab("profile --model tiny -k 2 --microbatch-size 2 --seq-len 16 --shared-device alone");
  CHECK(r.code != 0);
  CHECK(r.out.find("--shared-device alone: must be turns or together") != std::string::npos);
}

TEST_CASE("profile --tp 2 times each pipeline rank's stages with its tensor-parallel group, for simulate",
          "[profile][tp]") {
  const std::string dir = std::string(PPLAB_TEST_TMP_DIR);
  const int B = 2, L = 16, C = 32, T = 2;  // tiny: hidden 32
  const std::string common = "profile --model tiny -k 2 --microbatch-size 2 --seq-len 16 --warmup 1 --repeats 3 -o ";
  const PplabRun whole = Pplab(common + dir + "/profile_tp1.json");
  INFO(whole.out);
  REQUIRE(whole.code == 0);
  const PplabRun split = Pplab(common + dir + "/profile_tp2.json --tp 2");
  INFO(split.out);
  REQUIRE(split.code == 0);
  CHECK(split.out.find("each pipeline rank is 2 tensor-parallel ranks: F, B, I and W hold their collectives") !=
        std::string::npos);
  const auto one = nlohmann::json::parse(ReadTextFile(dir + "/profile_tp1.json"));
  const auto two = nlohmann::json::parse(ReadTextFile(dir + "/profile_tp2.json"));
  CHECK(two["meta"]["tensor_parallel"] == T);
  CHECK(two["meta"]["sequence_parallel"] == false);
  CHECK(two["meta"]["ranks"] == 2);
  // 2 x 2 processes of 1 thread: on 2 cores each group fills them in its turn.
  const bool fits = std::thread::hardware_concurrency() >= 4;
  CHECK(two["meta"]["extra"]["measure_turns"] == (fits ? 1 : 2));
  // The pipeline is the t = 0 ranks': one step-work entry a world rank.
  CHECK(two["meta"]["extra"]["step_per_world_rank"].size() == 4);
  for (int s = 0; s < 2; ++s) {
    INFO("stage " << s);
    const auto& a = one["stages"][s];
    const auto& b = two["stages"][s];
    for (const char* key : {"forward_ms", "backward_ms", "backward_input_ms", "backward_weight_ms"}) {
      CHECK(b[key].get<double>() > 0);
    }
    // On the CPU each kind's share of the cores it kept busy, in (0, 1].
    for (const char* key : {"forward_device_share", "backward_device_share", "backward_input_device_share",
                            "backward_weight_device_share"}) {
      INFO(key);
      REQUIRE(b.contains(key));
      CHECK(b[key].get<double>() > 0);
      CHECK(b[key].get<double>() <= 1);
    }
    // Each rank holds its share of the heads and MLP columns: fewer bytes.
    CHECK(b["activation_bytes"].get<int64_t>() < a["activation_bytes"].get<int64_t>());
    CHECK(b["weight_grad_bytes"].get<int64_t>() < a["weight_grad_bytes"].get<int64_t>());
    // Without sequence parallelism each rank sends its counterpart the whole
    // hidden state, as at T = 1.
    CHECK(b["message_bytes"] == a["message_bytes"]);
  }
  CHECK(two["stages"][0]["message_bytes"].get<int64_t>() == B * L * C * 4 + B * L * 8);
  // simulate takes it as it is; plan fits it for T = 2 alone (its times
  // hold the collectives) and its train line says so.
  const PplabRun sim = Pplab("simulate -s 1f1b -k 2 -m 4 --cost " + dir + "/profile_tp2.json --json");
  INFO(sim.out);
  CHECK(sim.code == 0);
  const std::string plan = "plan --model tiny --cost " + dir + "/profile_tp2.json --ranks 2 --global-batch 8 " +
                           "--memory-per-rank 1GiB --schedules 1f1b -o " + dir + "/plan_tp2.json";
  const PplabRun planned = Pplab(plan);
  INFO(planned.out);
  CHECK(planned.code == 0);
  CHECK(planned.out.find(" --tp 2") != std::string::npos);
  const PplabRun other = Pplab(plan + " --tp 1");
  INFO(other.out);
  CHECK(other.code != 0);
  CHECK(other.out.find("pplab: error: --tp 1: --cost " + dir + "/profile_tp2.json was measured with --tp 2") == 0);
  const PplabRun layout = Pplab(plan + " --sequence-parallel on");
  INFO(layout.out);
  CHECK(layout.code != 0);
  CHECK(layout.out.find("pplab: error: --sequence-parallel on: --cost " + dir + "/profile_tp2.json was measured") == 0);
  const PplabRun as_json = Pplab(plan + " --json");
  INFO(as_json.out);
  REQUIRE(as_json.code == 0);
  const auto planned_json = nlohmann::json::parse(as_json.out.substr(as_json.out.find('{')));
  CHECK(planned_json["tp"] == 2);
  CHECK(planned_json["tp_link"] == "fitted");

  // With sequence parallelism the message is a 1/T share of the positions
  // (the mask stays whole), and the link is timed with that payload.
  const PplabRun sp = Pplab(common + dir + "/profile_sp.json --tp 2 --sequence-parallel");
  INFO(sp.out);
  REQUIRE(sp.code == 0);
  const auto seq = nlohmann::json::parse(ReadTextFile(dir + "/profile_sp.json"));
  CHECK(seq["meta"]["sequence_parallel"] == true);
  CHECK(seq["stages"][0]["message_bytes"].get<int64_t>() == B * (L / T) * C * 4 + B * L * 8);
  CHECK(seq["stages"][1]["message_bytes"].get<int64_t>() == B * (L / T) * C * 4);
  const auto& samples = seq["meta"]["extra"]["links"][0]["samples"];
  CHECK(samples[1]["bytes"].get<int64_t>() == B * (L / T) * C * 4);
}

}  // namespace pplab::profile_cli_test
