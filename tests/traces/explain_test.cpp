#include "traces/explain.h"

#include <catch2/catch.hpp>

#include "schedules/error.h"
#include "schedules/generators.h"
#include "schedules/lowering.h"
#include "sim/simulator.h"
#include "sim/zb_auto.h"
#include "tests/generator_rules.h"
#include "traces/chrome_trace.h"

namespace pplab::explain_test {
namespace {

constexpr TimeNs kMs = kNsPerMs;

StageCost Stage(TimeNs f, TimeNs b) {
  StageCost c;
  c.forward = f;
  c.backward = b;
  return c;
}

TimeNs PartsSum(const RankIdle& r) {
  return r.warm_up + r.cool_down + r.imbalance + r.comm + r.shared_device + r.other;
}

// The simulated trace, written and read back, as explain reads it.
Timeline RoundTrip(const Timeline& t) { return TimelineFromChromeTrace(TimelineToChromeTrace(t), "test"); }

TimelineEvent Ev(RankId r, const std::string& action, TimeNs start, TimeNs end) {
  return {r, ParseAction(action), start, end};
}

}  // namespace

TEST_CASE("explain: gpipe K=2 M=2 F=1 B=2 with 0.5 ms latency, split by hand", "[explain]") {
  // rank 0: F0 [0,1] F1 [1,2] B0 [6,8] B1 [8,10]; rank 1: F0 [1.5,2.5] F1
  // [2.5,3.5] B0 [3.5,5.5] B1 [5.5,7.5]. Rank 0 waits [2,6) for the gradient
  // of mb 0: stage 1 finishes it at 5.5 (imbalance), it arrives at 6 (comm).
  const CostModel costs = CostModel::Uniform(2, Stage(1 * kMs, 2 * kMs), Link{kMs / 2, 0});
  const SimResult sim = Simulate(Lower(GenerateGPipe(2, 2)), costs);
  const IdleExplanation x = ExplainIdle(RoundTrip(sim.timeline));
  REQUIRE(x.makespan == 10 * kMs);
  REQUIRE(x.per_rank.size() == 2);
  const RankIdle& r0 = x.per_rank[0];
  CHECK(r0.busy == 6 * kMs);
  CHECK(r0.idle == 4 * kMs);
  CHECK(r0.warm_up == 0);
  CHECK(r0.cool_down == 0);
  CHECK(r0.imbalance == 3500000);
  CHECK(r0.comm == 500000);
  CHECK(r0.imbalance_by_stage == std::map<StageId, TimeNs>{{1, 3500000}});
  const RankIdle& r1 = x.per_rank[1];
  CHECK(r1.busy == 6 * kMs);
  CHECK(r1.warm_up == 1500000);
  CHECK(r1.cool_down == 2500000);
  CHECK(r1.imbalance == 0);
  CHECK(r1.comm == 0);
  for (const RankIdle& r : x.per_rank) {
    CHECK(r.shared_device == 0);
    CHECK(r.other == 0);
    CHECK(PartsSum(r) == r.idle);
  }
}

TEST_CASE("explain: a slower stage 0 shows as imbalance then comm on rank 1, named stage 0", "[explain]") {
  // Stage 0 F=2, stage 1 F=1, B=2 both, latency 0.5. rank 0: F0 [0,2] F1
  // [2,4] B0 [8,10] B1 [10,12]; rank 1: F0 [2.5,3.5] F1 [4.5,5.5] B0
  // [5.5,7.5] B1 [7.5,9.5]. Rank 1 waits [3.5,4.5) for mb 1: stage 0 ends
  // it at 4, it arrives at 4.5.
  const CostModel costs = CostModel::FromStages({Stage(2 * kMs, 2 * kMs), Stage(1 * kMs, 2 * kMs)}, Link{kMs / 2, 0});
  const SimResult sim = Simulate(Lower(GenerateGPipe(2, 2)), costs);
  const IdleExplanation x = ExplainIdle(RoundTrip(sim.timeline));
  REQUIRE(x.makespan == 12 * kMs);
  const RankIdle& r0 = x.per_rank[0];
  CHECK(r0.idle == 4 * kMs);
  CHECK(r0.imbalance == 3500000);
  CHECK(r0.comm == 500000);
  CHECK(r0.imbalance_by_stage == std::map<StageId, TimeNs>{{1, 3500000}});
  const RankIdle& r1 = x.per_rank[1];
  CHECK(r1.idle == 6 * kMs);
  CHECK(r1.warm_up == 2500000);
  CHECK(r1.cool_down == 2500000);
  CHECK(r1.imbalance == 500000);
  CHECK(r1.comm == 500000);
  CHECK(r1.imbalance_by_stage == std::map<StageId, TimeNs>{{0, 500000}});
  for (const RankIdle& r : x.per_rank) CHECK(PartsSum(r) == r.idle);
}

TEST_CASE("explain: the split adds up to idle on every generator's simulated trace, with nothing left over",
          "[explain]") {
  int explained = 0;
  for (const GeneratorInfo& g : Generators()) {
    for (int K : {1, 2, 3, 4}) {
      for (int M : {4, 8}) {
        for (int v : {1, 2}) {
          if (!FamilyAccepts(g, K, M, v)) continue;
          auto costs_of = [](int num_stages) {
            std::vector<StageCost> stages;
            for (StageId st = 0; st < num_stages; ++st) {
              StageCost c = Stage(1000 + 300 * (st % 3), 2000 + 700 * (st % 2));
              c.backward_weight = 900;
              c.message_bytes = 1000;
              stages.push_back(c);
            }
            return CostModel::FromStages(stages, Link{150, 2.0});
          };
          // zb-auto searches its order with the same costs (one stage per rank).
          const Schedule s = Lower(GenerateWithCosts(g.name, {K, M, v}, costs_of(K * v)));
          const SimResult sim = Simulate(s, costs_of(s.stages));
          const IdleExplanation x = ExplainIdle(RoundTrip(sim.timeline));
          INFO(g.name << " K=" << K << " M=" << M << " v=" << v);
          REQUIRE(x.makespan == sim.makespan);
          for (const RankIdle& r : x.per_rank) {
            INFO("rank " << r.rank);
            CHECK(r.busy == sim.per_rank[r.rank].busy);
            CHECK(r.idle == sim.per_rank[r.rank].idle);
            CHECK(PartsSum(r) == r.idle);
            CHECK(r.other == 0);  // in a simulation every wait has a cause
            CHECK(r.shared_device == 0);
            TimeNs by_stage = 0;
            for (const auto& [stage, ns] : r.imbalance_by_stage) by_stage += ns;
            CHECK(by_stage == r.imbalance);
          }
          ++explained;
        }
      }
    }
  }
  CHECK(explained > 30);
}

TEST_CASE("explain: waiting while another rank computes on the same device is shared_device", "[explain]") {
  Timeline t;
  t.name = "shared";
  t.ranks = 2;
  t.events = {Ev(0, "0F0", 0, 2000), Ev(0, "0F1", 3000, 4000), Ev(0, "0REDUCE_GRAD", 4000, 4500),
              Ev(0, "0W0", 5000, 5500), Ev(1, "1F0", 2000, 3000)};
  // Each rank on its own device: the gap [2000, 3000) has no cause.
  IdleExplanation x = ExplainIdle(t);
  CHECK(x.makespan == 5500);
  CHECK(x.per_rank[0].other == 1000 + 500);  // [2000,3000) and [4500,5000)
  CHECK(x.per_rank[0].comm == 500);          // the collective [4000,4500)
  CHECK(x.per_rank[0].shared_device == 0);
  t.devices = {0, 0};
  x = ExplainIdle(RoundTrip(t));
  CHECK(x.per_rank[0].shared_device == 1000);
  CHECK(x.per_rank[0].other == 500);
  CHECK(x.per_rank[0].comm == 500);
  CHECK(x.per_rank[1].warm_up == 2000);
  CHECK(x.per_rank[1].cool_down == 2500);
  for (const RankIdle& r : x.per_rank) CHECK(PartsSum(r) == r.idle);
}

TEST_CASE("explain: two simulated ranks on one device: rank 1 waits for the device, rank 0 for stage 1",
          "[explain][devices]") {
  // GPipe K=2 M=2, F=1, B=2, free comms, one device (simulator_test.cpp):
  // rank 0 F [0,1) [1,2) B [6,8) [10,12); rank 1 F [2,3) [3,4) B [4,6) [8,10).
  CostModel costs = CostModel::Uniform(2, Stage(1000, 2000), Link{});
  costs.SetDevices({0, 0});
  const IdleExplanation x = ExplainIdle(RoundTrip(Simulate(Lower(GenerateGPipe(2, 2)), costs).timeline));
  REQUIRE(x.makespan == 12000);
  const RankIdle& r0 = x.per_rank[0];
  CHECK(r0.idle == 6000);
  CHECK(r0.imbalance == 4000 + 2000);  // [2,6) and [8,10): stage 1's gradients not made yet
  CHECK(r0.imbalance_by_stage == std::map<StageId, TimeNs>{{1, 6000}});
  CHECK(r0.shared_device == 0);
  const RankIdle& r1 = x.per_rank[1];
  CHECK(r1.idle == 6000);
  CHECK(r1.warm_up == 2000);
  CHECK(r1.shared_device == 2000);  // [6,8): rank 0's B0 holds the device
  CHECK(r1.cool_down == 2000);
  for (const RankIdle& r : x.per_rank) {
    CHECK(r.other == 0);
    CHECK(PartsSum(r) == r.idle);
  }
}

TEST_CASE("explain: a received message without its producer in the trace is waited for as comm", "[explain]") {
  Timeline t;
  t.ranks = 1;
  t.events = {Ev(0, "1F0", 0, 1000), Ev(0, "1RECV_F1", 0, 3000), Ev(0, "1F1", 3500, 4500)};
  const IdleExplanation x = ExplainIdle(t);
  CHECK(x.per_rank[0].comm == 2000);
  CHECK(x.per_rank[0].other == 500);  // data there at 3000, computed at 3500
  CHECK(x.per_rank[0].imbalance == 0);
}

TEST_CASE("explain: a rank without compute is warm-up, overlapping computes are refused", "[explain]") {
  Timeline t;
  t.name = "p";
  t.ranks = 2;
  t.events = {Ev(0, "0F0", 0, 1000)};
  IdleExplanation x = ExplainIdle(t);
  CHECK(x.per_rank[1].warm_up == 1000);
  CHECK(x.per_rank[1].idle == 1000);
  CHECK(CanExplainIdle(t));
  t.events.push_back(Ev(0, "0F1", 500, 1500));
  CHECK_FALSE(CanExplainIdle(t));
  CHECK_THROWS_WITH(ExplainIdle(t), Catch::Contains("rank 0 runs 0F1") && Catch::Contains("before 0F0 ends"));
}

TEST_CASE("explain: a zero-length action at another's start is read first, in any order of the events", "[explain]") {
  Timeline t;
  t.name = "p";
  t.ranks = 1;
  // 0F1 takes no time at 1 ms, where 0B0 starts; listed after it.
  t.events = {Ev(0, "0F0", 0, kMs), Ev(0, "0B0", kMs, 2 * kMs), Ev(0, "0F1", kMs, kMs), Ev(0, "0B1", 2 * kMs, 3 * kMs)};
  REQUIRE(CanExplainIdle(t));
  const IdleExplanation x = ExplainIdle(t);
  CHECK(x.per_rank[0].busy == 3 * kMs);
  CHECK(x.per_rank[0].idle == 0);
}

TEST_CASE("trace: devices round-trip through otherData, a wrong length is refused", "[explain][trace]") {
  Timeline t;
  t.name = "d";
  t.ranks = 2;
  t.devices = {3, 3};
  t.events = {Ev(0, "0F0", 0, 1000)};
  const std::string text = TimelineToChromeTrace(t);
  CHECK(text.find("\"devices\":[3,3]") != std::string::npos);
  CHECK(TimelineFromChromeTrace(text, "x").devices == std::vector<int>{3, 3});
  std::string bad = text;
  bad.replace(bad.find("[3,3]"), 5, "[3]");
  CHECK_THROWS_WITH(TimelineFromChromeTrace(bad, "bad.json"), Catch::Contains("bad.json: otherData.devices"));
  t.devices.clear();
  CHECK(TimelineToChromeTrace(t).find("devices") == std::string::npos);
}

}  // namespace pplab::explain_test

namespace pplab::explain_test {

TEST_CASE("explain: per-step work after the last compute is cool-down, step events round-trip", "[explain][step]") {
  CostModel costs = CostModel::Uniform(2, Stage(1000, 2000), Link{});
  StepCosts step;
  step.norm_allreduce = 200;
  step.optimizer = 500;
  costs.SetStep(step);
  const SimResult sim = Simulate(Lower(GenerateGPipe(2, 2)), costs);
  const Timeline back = RoundTrip(sim.timeline);
  REQUIRE(back.step_events.size() == 4);
  CHECK(back.step_events[3].name == "optimizer");
  CHECK(back.step_events[3].start == 9200);
  const IdleExplanation x = ExplainIdle(back);
  CHECK(x.makespan == 9700);
  CHECK(x.per_rank[0].cool_down == 700);
  CHECK(x.per_rank[1].cool_down == 9700 - 7000);
  for (const RankIdle& r : x.per_rank) CHECK(PartsSum(r) == r.idle);
}

}  // namespace pplab::explain_test

namespace pplab::explain_test {

TEST_CASE("explain: a measured-style trace: slow producer, transfer, then executor overhead", "[explain]") {
  // As the executor writes it: the RECV spans from the step's start to when
  // its data was taken. Rank 0's F1 ends late at 3.5, the data is taken at
  // 4.1 and rank 1 starts F1 at 4.2.
  Timeline t;
  t.source = "measured";
  t.ranks = 2;
  t.events = {Ev(0, "0F0", 0, 1000),         Ev(0, "0SEND_F0", 1000, 1050), Ev(0, "0F1", 1000, 3500),
              Ev(0, "0SEND_F1", 3500, 3550), Ev(1, "1RECV_F0", 0, 1100),    Ev(1, "1F0", 1100, 2000),
              Ev(1, "1RECV_F1", 0, 4100),    Ev(1, "1F1", 4200, 5200)};
  const IdleExplanation x = ExplainIdle(t);
  const RankIdle& r1 = x.per_rank[1];
  CHECK(r1.warm_up == 1100);
  CHECK(r1.imbalance == 1500);  // [2.0, 3.5): stage 0 still computing
  CHECK(r1.imbalance_by_stage == std::map<StageId, TimeNs>{{0, 1500}});
  CHECK(r1.comm == 600);   // [3.5, 4.1)
  CHECK(r1.other == 100);  // [4.1, 4.2): data there, device free
  CHECK(r1.cool_down == 0);
  CHECK(PartsSum(r1) == r1.idle);
  CHECK(x.per_rank[0].cool_down == 5200 - 3500);
}

}  // namespace pplab::explain_test

namespace pplab::explain_test {

TEST_CASE("explain: a device with two slots books no shared_device while only one other rank computes",
          "[explain][devices]") {
  // The shared-device case above, on a CPU host of 2 slots (2 cores, 1
  // thread per rank): rank 1's F0 takes the other slot, so the gap is other.
  Timeline t;
  t.name = "cpu";
  t.ranks = 3;
  t.events = {Ev(0, "0F0", 0, 2000), Ev(0, "0F1", 3000, 4000), Ev(1, "1F0", 2000, 3000), Ev(2, "2F0", 2500, 3500)};
  t.devices = {0, 0, 0};
  t.device_slots = {2};
  const Timeline back = RoundTrip(t);
  CHECK(back.device_slots == std::vector<int>{2});
  const IdleExplanation x = ExplainIdle(back);
  // [2000, 2500): one other rank computes, a slot is free: other. [2500, 3000): two others fill both slots.
  CHECK(x.per_rank[0].other == 500);
  CHECK(x.per_rank[0].shared_device == 500);
  for (const RankIdle& r : x.per_rank) CHECK(PartsSum(r) == r.idle);
  t.device_slots = {1};  // one slot: the whole gap waits for the device
  CHECK(ExplainIdle(t).per_rank[0].shared_device == 1000);
}

TEST_CASE("trace: device_slots round-trip through otherData, bad entries are refused", "[explain][trace]") {
  Timeline t;
  t.name = "d";
  t.ranks = 2;
  t.devices = {0, 0};
  t.device_slots = {2};
  t.events = {Ev(0, "0F0", 0, 1000)};
  const std::string text = TimelineToChromeTrace(t);
  CHECK(text.find("\"device_slots\":[2]") != std::string::npos);
  CHECK(TimelineFromChromeTrace(text, "x").device_slots == std::vector<int>{2});
  std::string zero = text;
  zero.replace(zero.find("\"device_slots\":[2]"), 18, "\"device_slots\":[0]");
  CHECK_THROWS_WITH(TimelineFromChromeTrace(zero, "zero.json"),
                    Catch::Contains("zero.json: otherData.device_slots entries must be integers"));
  std::string few = text;
  few.replace(few.find("\"devices\":[0,0]"), 15, "\"devices\":[0,1]");
  CHECK_THROWS_WITH(TimelineFromChromeTrace(few, "few.json"),
                    Catch::Contains("few.json: otherData.device_slots has 1 entries, but rank 1 is on device 1"));
  t.device_slots.clear();
  CHECK(TimelineToChromeTrace(t).find("device_slots") == std::string::npos);
}

}  // namespace pplab::explain_test

namespace pplab::explain_test {

TEST_CASE("explain: a rank held in its own send is waiting on communication, not executor overhead", "[explain]") {
  // Rank 0's executor waits for its SEND_F0 [1, 5) before F1 starts at 5:
  // 4 ms of comm. After SEND_F1 ends at 6.1, rank 0 has no compute left.
  Timeline t;
  t.source = "measured";
  t.ranks = 2;
  t.events = {Ev(0, "0F0", 0, 1000),         Ev(0, "0SEND_F0", 1000, 5000), Ev(0, "0F1", 5000, 6000),
              Ev(0, "0SEND_F1", 6000, 6100), Ev(1, "1RECV_F0", 0, 1200),    Ev(1, "1F0", 1200, 2200),
              Ev(1, "1RECV_F1", 2200, 6100), Ev(1, "1F1", 6100, 7100)};
  const IdleExplanation x = ExplainIdle(t);
  const RankIdle& r0 = x.per_rank[0];
  CHECK(r0.comm == 4000);
  CHECK(r0.other == 0);
  CHECK(r0.cool_down == 1100);
  CHECK(PartsSum(r0) == r0.idle);
  // Rank 1 waits [2.2, 5) for stage 0's F1 to start and end (imbalance to 6),
  // then [6, 6.1) for the message.
  CHECK(x.per_rank[1].imbalance == 3800);
  CHECK(x.per_rank[1].comm == 100);
  // A send that ends before the gap does, with nothing else: the rest is other.
  t.events[1].end = 3000;
  CHECK(ExplainIdle(t).per_rank[0].comm == 2000);
  CHECK(ExplainIdle(t).per_rank[0].other == 2000);
}

TEST_CASE("explain: rounded for a table, a rank's parts add up to its idle and busy + idle to the makespan",
          "[explain]") {
  // Rounded each apart to microseconds, 2.0024 + 4.0016 + 0.0007 + 0.0007 ms
  // read 2.002 + 4.002 + 0.001 + 0.001 = 6.006, for an idle of 6.005.
  RankIdle r;
  r.warm_up = 2'002'400;
  r.cool_down = 4'001'600;
  r.imbalance = 700;
  r.comm = 700;
  r.idle = PartsSum(r);  // 6'005'400
  r.busy = 12'003'000;
  r.imbalance_by_stage = {{0, 300}, {2, 400}};
  const RankIdle shown = RoundedIdle(r, r.busy + r.idle, 1000);
  CHECK(shown.busy == 12'003'000);
  CHECK(shown.idle == 6'005'000);
  // The units left over go to the largest remainders: 0.7, 0.7 before 0.6.
  CHECK(shown.warm_up == 2'002'000);
  CHECK(shown.cool_down == 4'001'000);
  CHECK(shown.imbalance == 1000);
  CHECK(shown.comm == 1000);
  CHECK(PartsSum(shown) == shown.idle);
  // Stage 2's 0.4 us takes the unit; stage 0's rounds to nothing and is left out.
  CHECK(shown.imbalance_by_stage == std::map<StageId, TimeNs>{{2, 1000}});
  // On every rank of a simulated trace with odd times the same holds.
  const CostModel costs = CostModel::Uniform(3, Stage(1'000'400, 2'000'400), Link{400, 0});
  const IdleExplanation x = ExplainIdle(Simulate(Lower(Generate1F1B(3, 4)), costs).timeline);
  for (const RankIdle& exact : x.per_rank) {
    const RankIdle rounded = RoundedIdle(exact, x.makespan, 1000);
    CHECK(PartsSum(rounded) == rounded.idle);
    CHECK(rounded.busy + rounded.idle == (x.makespan + 500) / 1000 * 1000);
    TimeNs stages = 0;
    for (const auto& [stage, ns] : rounded.imbalance_by_stage) stages += ns;
    CHECK(stages == rounded.imbalance);
  }
}

}  // namespace pplab::explain_test
