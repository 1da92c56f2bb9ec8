// The traces of multi-process training: the measured trace holds the plan's
// actions in order on one clock, and the rank-to-device mapping that explain
// and simulate read.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "schedules/action.h"
#include "schedules/file_io.h"
#include "schedules/schedule_io.h"
#include "tests/run_pplab.h"
#include "tests/tools/train_cli_test_support.h"
#include "traces/chrome_trace.h"
#include "traces/explain.h"

namespace pplab::train_trace_test {

TEST_CASE("the measured trace lists exactly the plan's actions, per rank, in program order", "[train]") {
  const std::string dir = PPLAB_TEST_TMP_DIR;
  REQUIRE(Pplab("export -s zb-h1 -k 2 -m 4 -o " + dir + "/zb.json").code == 0);
  const PplabRun r =
      Train("--plan " + dir + "/zb.json --steps 2 --batch-size 4 --seq-len 8 --json --trace " + dir + "/measured.json");
  INFO(r.out);
  REQUIRE(r.code == 0);
  const Schedule plan = LoadScheduleFile(dir + "/zb.json");
  const Timeline t = TimelineFromChromeTrace(ReadTextFile(dir + "/measured.json"), "measured.json");
  CHECK(t.source == "measured");
  CHECK(t.memory.empty());  // held bytes only with --measure-memory
  for (RankId rank = 0; rank < plan.ranks; ++rank) {
    std::vector<Action> got;
    for (const TimelineEvent& e : t.events) {
      if (e.rank == rank) got.push_back(e.action);
    }
    CHECK(got == plan.programs[rank]);
  }
  // The ranks' timelines share time 0 (one host, one steady clock): no
  // action starts before the message it takes was sent.
  std::map<MessageKey, TimeNs> sent;
  for (const TimelineEvent& e : t.events) {
    if (IsSend(e.action.kind)) sent[MessageOf(e.action)] = e.start;
  }
  int received = 0;
  for (const TimelineEvent& e : t.events) {
    for (const Action& part : PartsOf(e.action)) {
      if (!IsCompute(e.action.kind) || (part.kind != ActionKind::kForward && !IsInputGrad(part.kind))) continue;
      const auto it = sent.find(MessageKey{part.kind == ActionKind::kForward, part.stage, part.microbatch});
      if (it == sent.end()) continue;
      ++received;
      INFO(FormatAction(e.action) << " on rank " << e.rank << " starts at " << e.start << " ns, sent at "
                                  << it->second);
      CHECK(e.start >= it->second);
    }
  }
  CHECK(received == 2 * 4);  // each microbatch's activations and gradients
  // --json's executor overhead is explain's "other" over the makespan, per rank, of that trace.
  const auto j = nlohmann::json::parse(r.out.substr(r.out.find('{')));
  const IdleExplanation idle = ExplainIdle(t);
  REQUIRE(j["executor_overhead"].size() == 2);
  for (RankId rank = 0; rank < 2; ++rank) {
    const double want = static_cast<double>(idle.per_rank[rank].other) / static_cast<double>(idle.makespan);
    CHECK(j["executor_overhead"][rank].get<double>() == Approx(want).epsilon(1e-9));
  }
  // On the host clock the host issues each action as it runs it: the step
  // took as long to issue as to run, and no device trailed it.
  REQUIRE(j["host_issue_ms"].size() == 2);
  REQUIRE(j["device_lag_ms"].size() == 2);
  for (int step = 0; step < 2; ++step) {
    CHECK(j["host_issue_ms"][step].get<double>() == j["step_clock_ms"][step].get<double>());
    CHECK(j["host_issue_ms"][step].get<double>() > 0);
    CHECK(j["device_lag_ms"][step].get<double>() == 0.0);
  }
}

TEST_CASE("with --measure-memory the measured trace holds each rank's bytes after each action, as simulate's does",
          "[train][memory]") {
  // zb-h1 on 2 ranks of the tiny model: a profile at the run's own
  // configuration, simulate's trace from it, and the measured trace of the
  // same plan. The bytes each rank holds between actions are the
  // simulator's within 1 % (docs/fidelity.md, "Peak activation bytes").
  const std::string dir = PPLAB_TEST_TMP_DIR;
  const std::string cost = dir + "/held-cost.json", sim = dir + "/held-sim.json", real = dir + "/held-real.json";
  PplabRun r = Pplab("profile --model tiny -k 2 --microbatch-size 2 --seq-len 32 -o " + cost);
  INFO(r.out);
  REQUIRE(r.code == 0);
  r = Pplab("simulate -s zb-h1 -k 2 -m 4 --model tiny --microbatch-size 2 --seq-len 32 --cost " + cost + " --trace " +
            sim);
  REQUIRE(r.code == 0);
  r = Train("-s zb-h1 -k 2 --steps 2 --measure-memory --trace " + real);
  REQUIRE(r.code == 0);
  const Timeline t = TimelineFromChromeTrace(ReadTextFile(real), "held-real.json");
  for (RankId rank = 0; rank < 2; ++rank) {
    // One sample at the end of each action but the RECVs, in time order.
    size_t actions = 0, samples = 0;
    for (const TimelineEvent& e : t.events) actions += e.rank == rank && !IsRecv(e.action.kind);
    TimeNs last = -1;
    for (const MemorySample& m : t.memory) {
      if (m.rank != rank) continue;
      ++samples;
      CHECK(m.time >= last);
      last = m.time;
    }
    CHECK(samples == actions);
  }
  r = Pplab("diff " + sim + " " + real + " --json");
  REQUIRE(r.code == 0);
  const auto held = nlohmann::json::parse(r.out)["held_bytes"];
  REQUIRE(held.size() == 2);
  for (const auto& row : held) {
    INFO(row.dump());
    CHECK(std::abs(row["error"].get<double>()) < 0.01);
  }
  r = Pplab("diff " + sim + " " + real);
  CHECK_THAT(r.out, Catch::Contains("bytes held between actions, largest by rank"));
}

TEST_CASE(
    "train writes its rank-to-device mapping into the measured and simulated traces, explain and simulate read it",
    "[train][devices]") {
  const std::string dir = PPLAB_TEST_TMP_DIR;
  const std::string measured = dir + "/devices_measured.json", simulated = dir + "/devices_simulated.json";
  const PplabRun r =
      Train("-s 1f1b -k 2 --steps 2 --batch-size 4 --seq-len 8 --trace " + measured + " --sim-trace " + simulated);
  INFO(r.out);
  REQUIRE(r.code == 0);
  // On the CPU both local ranks share the host's cores: one device, with a
  // slot per rank's threads (each worker takes cores / 2 threads).
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int threads = std::max(1, cores / 2);
  for (const std::string& path : {measured, simulated}) {
    const Timeline t = TimelineFromChromeTrace(ReadTextFile(path), path);
    INFO(path);
    CHECK(t.devices == std::vector<int>{0, 0});
    if (std::getenv("OMP_NUM_THREADS") == nullptr) CHECK(t.device_slots == std::vector<int>{cores / threads});
    const PplabRun x = Pplab("explain --json " + path);
    INFO(x.out);
    REQUIRE(x.code == 0);
    CHECK(nlohmann::json::parse(x.out)["devices"] == nlohmann::json::parse("[0, 0]"));
  }
  const PplabRun sim = Pplab("simulate -s 1f1b -k 2 -m 4 --devices-from " + measured + " --json");
  INFO(sim.out);
  CHECK(sim.code == 0);
  CHECK_THAT(sim.out, !Catch::Contains("note:"));
  // Costs estimated from the measured trace hold the sharing already:
  // queuing for the devices again is said to count it twice.
  const std::string cost = dir + "/devices_measured.cost.json";
  REQUIRE(Pplab("stats " + measured + " --cost-out " + cost).code == 0);
  const PplabRun twice = Pplab("simulate -s 1f1b -k 2 -m 4 --cost " + cost + " --devices-from " + measured);
  INFO(twice.out);
  CHECK(twice.code == 0);
  CHECK_THAT(twice.out, Catch::Contains("pplab: note: --cost " + cost +
                                        " holds times measured with the devices "
                                        "shared (from " +
                                        measured + "): --devices-from " + measured +
                                        " queues its ranks for the devices again, counting the sharing twice"));
  const PplabRun once = Pplab("simulate -s 1f1b -k 2 -m 4 --cost " + cost);
  CHECK(once.code == 0);
  CHECK_THAT(once.out, !Catch::Contains("note:"));
  // With 2 tensor-parallel ranks a pipeline rank, 4 processes share the
  // cores: each pipeline rank stands for 2 of them, and gets half the slots.
  const std::string tp = dir + "/devices_tp.json";
  const PplabRun split = Train("-s 1f1b -k 2 --tp 2 --steps 2 --batch-size 4 --seq-len 8 --trace " + tp);
  INFO(split.out);
  REQUIRE(split.code == 0);
  const Timeline t = TimelineFromChromeTrace(ReadTextFile(tp), tp);
  CHECK(t.devices == std::vector<int>{0, 0});
  const int threads4 = std::max(1, cores / 4);
  if (std::getenv("OMP_NUM_THREADS") == nullptr) {
    CHECK(t.device_slots == std::vector<int>{std::max(1, cores / threads4 * 2 / 4)});
  }
}

TEST_CASE("the measured trace holds each rank's step work after its actions, as the simulated one does", "[train]") {
  const std::string real = std::string(PPLAB_TEST_TMP_DIR) + "/step-work.json";
  // DualPipe's two copies of the model first swap their gradients.
  const std::pair<std::string, std::vector<std::string>> plans[] = {
      {"-s 1f1b -k 2", {"loss_allreduce", "clip", "optimizer"}},
      {"-s dualpipe -k 2 -m 4", {"copy_exchange", "loss_allreduce", "clip", "optimizer"}}};
  for (const auto& [plan, expected] : plans) {
    // A clip norm every gradient exceeds, so the step clips.
    const PplabRun r = Train(plan + " --steps 2 --clip-norm 1e-9 --trace " + real);
    INFO(plan << "\n" << r.out);
    REQUIRE(r.code == 0);
    const Timeline t = TimelineFromChromeTrace(ReadTextFile(real), "step-work.json");
    TimeNs latest = 0;
    for (RankId rank = 0; rank < 2; ++rank) {
      INFO("rank " << rank);
      TimeNs last_compute = 0;
      for (const TimelineEvent& e : t.events) {
        if (e.rank == rank && IsCompute(e.action.kind)) last_compute = std::max(last_compute, e.end);
      }
      std::vector<std::string> names;
      TimeNs previous = last_compute;
      for (const StepEvent& e : t.step_events) {
        if (e.rank != rank) continue;
        // (The tied embeddings' swap, where the model ties them, comes first.)
        if (e.name != "tied_exchange") names.push_back(e.name);
        CHECK(e.start >= previous);  // after the rank's actions, one after another
        CHECK(e.end >= e.start);
        previous = e.end;
        latest = std::max(latest, e.end);
      }
      CHECK(names == expected);
    }
    CHECK(t.Makespan() == latest);  // the step's time ends with its work, as a simulated step's does
  }
}

}  // namespace pplab::train_trace_test

namespace pplab::train_trace_test {

TEST_CASE("train --json says how ranks sharing a device used it in the last step, as stats of its trace", "[train]") {
  // OMP_NUM_THREADS of all the cores for each of 2 ranks: one slot, which
  // the two time-slice, as two ranks do one GPU.
  const std::string threads = std::to_string(std::max(1u, std::thread::hardware_concurrency()));
  const std::string trace = std::string(PPLAB_TEST_TMP_DIR) + "/shared-device-trace.json";
  const PplabRun r = Pplab(
      "train --synthetic --out '' -q --model tiny --batch-size 8 --seq-len 32 --steps 3 -m 4 -k 2 -s 1f1b --json "
      "--trace " +
          trace,
      "OMP_NUM_THREADS=" + threads + " ");
  INFO(r.out);
  REQUIRE(r.code == 0);
  const nlohmann::json run = nlohmann::json::parse(r.out.substr(r.out.find('{')));
  REQUIRE(run.contains("shared_devices"));
  const nlohmann::json& d = run["shared_devices"].at(0);
  CHECK(d["ranks"] == std::vector<int>{0, 1});
  CHECK(d["slots"] == 1);
  // Two ranks on one slot: their compute is the busy time plus the time
  // both computed at once.
  CHECK(d["compute"].get<double>() == Approx(d["busy"].get<double>() + d["over_slots"].get<double>()).margin(1e-6));
  // The figures pplab stats reads off the run's trace.
  const PplabRun stats = Pplab("stats --json " + trace);
  REQUIRE(stats.code == 0);
  const nlohmann::json from_trace = nlohmann::json::parse(stats.out)["shared_devices"].at(0);
  CHECK(from_trace["ranks"] == d["ranks"]);
  for (const char* key : {"busy", "over_slots", "compute"}) {
    CHECK(from_trace[key].get<double>() == Approx(d[key].get<double>()).margin(1e-6));
  }
}

TEST_CASE("train's simulated step on a shared device is the one its measured costs simulate to, not queued twice",
          "[train]") {
  // Two ranks time-slicing one slot: the measured times already hold the
  // sharing, so the prediction from them runs the ranks' actions at once
  // (a slot each); it queued them for the device again, 45 % long.
  const std::string threads = std::to_string(std::max(1u, std::thread::hardware_concurrency()));
  const std::string dir = std::string(PPLAB_TEST_TMP_DIR) + "/shared-device-prediction";
  std::filesystem::create_directories(dir);
  const std::string measured = dir + "/measured.json", simulated = dir + "/simulated.json", cost = dir + "/cost.json",
                    plan = dir + "/plan.json";
  const PplabRun r = Pplab(
      "train --synthetic --out '' -q --model tiny --batch-size 8 --seq-len 32 --steps 2 -m 4 -k 2 "
      "-s 1f1b --trace " +
          measured + " --sim-trace " + simulated,
      "OMP_NUM_THREADS=" + threads + " ");
  INFO(r.out);
  REQUIRE(r.code == 0);
  const Timeline sim = TimelineFromChromeTrace(ReadTextFile(simulated), simulated);
  CHECK(sim.devices == std::vector<int>{0, 0});  // the mapping the run used
  CHECK(sim.device_slots == std::vector<int>{2});
  // The same costs through stats --cost-out and simulate: the same step.
  REQUIRE(Pplab("stats " + measured + " --cost-out " + cost).code == 0);
  REQUIRE(Pplab("export -s 1f1b -k 2 -m 4 -o " + plan).code == 0);
  const PplabRun again = Pplab("simulate --plan " + plan + " --cost " + cost + " --json");
  REQUIRE(again.code == 0);
  CHECK(nlohmann::json::parse(again.out)["makespan"].get<double>() ==
        Approx(static_cast<double>(sim.Makespan()) / 1e6).epsilon(1e-6));
}

}  // namespace pplab::train_trace_test
