// The simulator's run of actions, messages and devices
// (sim/simulator_engine.cc): a rank's messages queue on its comm resource,
// ranks share a device's slots (and its measured share of each action), and
// REDUCE_GRAD takes a stage's measured time.
#include <algorithm>
#include <catch2/catch.hpp>
#include <string>
#include <utility>
#include <vector>

#include "schedules/generators.h"
#include "schedules/lowering.h"
#include "sim/simulator.h"
#include "sim/zb_auto.h"
#include "tests/generator_rules.h"
#include "tests/sim/simulator_test_support.h"

namespace pplab::simulator_engine_test {
namespace {

// The [start, end) of each event of `kind` on `rank`, in program order.
std::vector<std::pair<TimeNs, TimeNs>> Spans(const SimResult& r, RankId rank, ActionKind kind) {
  std::vector<std::pair<TimeNs, TimeNs>> out;
  for (const TimelineEvent& e : r.timeline.events) {
    if (e.rank == rank && e.action.kind == kind) out.emplace_back(e.start, e.end);
  }
  return out;
}

using SpanList = std::vector<std::pair<TimeNs, TimeNs>>;

}  // namespace

TEST_CASE("comm resource: sends that take no longer than compute hide behind it", "[sim][comm]") {
  // GPipe K=2 M=3, F=1, B=2, each message 1 (latency): rank 0 sends
  // back to back while it computes, so the makespan is (M+K-1)(F+B) + 2.
  StageCost c;
  c.forward = 1000;
  c.backward = 2000;
  const SimResult r = Simulate(Lower(GenerateGPipe(2, 3)), CostModel::Uniform(2, c, Link{1000, 0}));
  CHECK(Spans(r, 0, ActionKind::kSendF) == SpanList{{1000, 2000}, {2000, 3000}, {3000, 4000}});
  CHECK(Spans(r, 0, ActionKind::kForward) == SpanList{{0, 1000}, {1000, 2000}, {2000, 3000}});
  CHECK(Spans(r, 1, ActionKind::kSendB) == SpanList{{7000, 8000}, {9000, 10000}, {11000, 12000}});
  CHECK(r.makespan == 14000);
}

TEST_CASE("comm resource: a rank's messages leave one at a time, so slow links delay the next stage", "[sim][comm]") {
  // GPipe K=2 M=3, F=1, B=2, each message 3. Rank 0's forwards end at 1, 2
  // and 3 but its messages queue: [1,4), [4,7), [7,10). Rank 1 computes F at
  // 4, 7, 10, B at [11,13), [13,15), [15,17) and sends its gradients
  // [13,16), [16,19), [19,22); rank 0's B run [16,18), [19,21), [22,24).
  // (With a link per message, not per rank, the makespan would be 18.)
  StageCost c;
  c.forward = 1000;
  c.backward = 2000;
  const SimResult r = Simulate(Lower(GenerateGPipe(2, 3)), CostModel::Uniform(2, c, Link{3000, 0}));
  CHECK(Spans(r, 0, ActionKind::kForward) == SpanList{{0, 1000}, {1000, 2000}, {2000, 3000}});
  CHECK(Spans(r, 0, ActionKind::kSendF) == SpanList{{1000, 4000}, {4000, 7000}, {7000, 10000}});
  CHECK(Spans(r, 1, ActionKind::kForward) == SpanList{{4000, 5000}, {7000, 8000}, {10000, 11000}});
  CHECK(Spans(r, 1, ActionKind::kSendB) == SpanList{{13000, 16000}, {16000, 19000}, {19000, 22000}});
  CHECK(Spans(r, 0, ActionKind::kBackward) == SpanList{{16000, 18000}, {19000, 21000}, {22000, 24000}});
  CHECK(r.makespan == 24000);
  // The critical path runs through the queued messages without a gap.
  TimeNs covered = 0;
  for (size_t i = 0; i < r.critical_path.size(); ++i) {
    covered += r.critical_path[i].end - r.critical_path[i].start;
    if (i > 0) CHECK(r.critical_path[i].start == r.critical_path[i - 1].end);
  }
  CHECK(covered == r.makespan);
  CHECK(r.critical_comm == 6 * 3000);  // three messages each way
}

TEST_CASE("shared device: two ranks on one device run one compute action at a time", "[sim][devices]") {
  // GPipe K=2 M=2, F=1, B=2, free comms, both ranks on device 0. By hand:
  // rank 0 F0 [0,1), F1 [1,2) (ready at 1 with rank 1's F0: the lower rank
  // goes first), rank 1 F0 [2,3), F1 [3,4), B0 [4,6); at 6 rank 0's B0 and
  // rank 1's B1 are ready: rank 0 first, [6,8); rank 1 B1 [8,10); rank 0 B1
  // [10,12). The device never idles: makespan = all the work = 12.
  StageCost c;
  c.forward = 1000;
  c.backward = 2000;
  CostModel costs = CostModel::Uniform(2, c, Link{});
  costs.SetDevices({0, 0});
  const SimResult r = Simulate(Lower(GenerateGPipe(2, 2)), costs);
  CHECK(Spans(r, 0, ActionKind::kForward) == SpanList{{0, 1000}, {1000, 2000}});
  CHECK(Spans(r, 1, ActionKind::kForward) == SpanList{{2000, 3000}, {3000, 4000}});
  CHECK(Spans(r, 1, ActionKind::kBackward) == SpanList{{4000, 6000}, {8000, 10000}});
  CHECK(Spans(r, 0, ActionKind::kBackward) == SpanList{{6000, 8000}, {10000, 12000}});
  CHECK(r.makespan == 12000);
  CHECK(r.timeline.devices == std::vector<int>{0, 0});
  TimeNs covered = 0;
  for (const CriticalStep& step : r.critical_path) covered += step.end - step.start;
  CHECK(covered == r.makespan);
  // Each rank on its own device (any ids): the plain pipeline, (M+K-1)(F+B).
  costs.SetDevices({7, 3});
  CHECK(Simulate(Lower(GenerateGPipe(2, 2)), costs).makespan == 9000);
  costs.SetDevices({0, 0, 0});
  CHECK_THROWS_WITH(Simulate(Lower(GenerateGPipe(2, 2)), costs), Catch::Contains("'devices' names 3 ranks"));
}

TEST_CASE("shared device: an action holds its slot for its measured share of its time, then the next rank starts",
          "[sim][devices]") {
  // As above (GPipe K=2 M=2, F=1, B=2, both ranks on device 0), with every
  // action keeping the device busy half its time (waiting the rest, as a
  // CPU rank's collectives do). By hand: rank 0 F0 [0,1) frees the slot at
  // 0.5; at 1 rank 0's F1 and rank 1's F0 are ready, the lower rank first:
  // F1 [1,2), freeing it at 1.5, then rank 1 F0 [1.5,2.5) (free at 2), F1
  // [2.5,3.5) (free at 3), B0 [3.5,5.5) (free at 4.5); at 5.5 rank 0's B0
  // and rank 1's B1 are ready: rank 0 first, [5.5,7.5) (free at 6.5), rank 1
  // B1 [6.5,8.5); rank 0 B1 [8.5,10.5). 10.5 against 12 with whole actions.
  StageCost c;
  c.forward = 1000;
  c.backward = 2000;
  c.device_share[0] = 0.5;
  c.device_share[1] = 0.5;
  CostModel costs = CostModel::Uniform(2, c, Link{});
  costs.SetDevices({0, 0});
  const SimResult r = Simulate(Lower(GenerateGPipe(2, 2)), costs);
  CHECK(Spans(r, 0, ActionKind::kForward) == SpanList{{0, 1000}, {1000, 2000}});
  CHECK(Spans(r, 1, ActionKind::kForward) == SpanList{{1500, 2500}, {2500, 3500}});
  CHECK(Spans(r, 1, ActionKind::kBackward) == SpanList{{3500, 5500}, {6500, 8500}});
  CHECK(Spans(r, 0, ActionKind::kBackward) == SpanList{{5500, 7500}, {8500, 10500}});
  CHECK(r.makespan == 10500);
  // The critical path's parts add up to the makespan: where the path goes
  // from an action to the next rank's on the device at its share, only the
  // part before the next starts counts (rank 0's F1 0.5 of its 1, its B0 1
  // of its 2): 12 with both counted whole, past the 10.5 makespan.
  CHECK(r.critical_compute == 10500);
  CHECK(r.critical_comm == 0);
  CHECK(r.critical_compute + r.critical_comm + r.critical_step == r.makespan);
  // On devices of their own the shares change nothing: (M+K-1)(F+B).
  costs.SetDevices({0, 1});
  CHECK(Simulate(Lower(GenerateGPipe(2, 2)), costs).makespan == 9000);
  // They round-trip through the cost file, and a share outside (0, 1] is refused by name.
  const CostModel back = CostModel::FromJson(costs.ToJson(), "shares.json");
  CHECK(back.Stage(0).DeviceShareOf(ActionKind::kForward) == 0.5);
  CHECK(back.Stage(1).DeviceShareOf(ActionKind::kBackward) == 0.5);
  CHECK(back.Stage(1).DeviceShareOf(ActionKind::kBackwardWeight) == 1.0);  // unset: the whole action
  const std::string head = R"({"format": "pplab.cost", "version": 1, "num_stages": 2, "default": {"forward_ms": 1, )";
  CHECK_THROWS_WITH(CostModel::FromJson(head + R"("forward_device_share": 0}})", "bad.json"),
                    Catch::Contains("bad.json: default.forward_device_share must be a number in (0, 1], got 0"));
  CHECK_THROWS_WITH(CostModel::FromJson(head + R"("backward_weight_device_share": 1.5}})", "bad.json"),
                    Catch::Contains("backward_weight_device_share must be a number in (0, 1], got 1.5"));
}

TEST_CASE("shared device: every schedule still finishes, never faster than its device's total work", "[sim][devices]") {
  for (const GeneratorInfo& g : Generators()) {
    for (int K : {2, 4}) {
      const int M = 8, v = g.default_virtual;
      if (!FamilyAccepts(g, K, M, v)) continue;
      // zb-auto searches its order with the costs (one stage per rank).
      const Schedule s = Lower(GenerateWithCosts(g.name, {K, M, v}, UniformCosts(K * v, 1000, 2000, 1000)));
      CostModel costs = UniformCosts(s.stages, 1000, 2000, 1000);
      std::vector<int> devices;
      for (RankId r = 0; r < K; ++r) devices.push_back(r / 2);  // two ranks per device
      costs.SetDevices(devices);
      const SimResult shared = Simulate(s, costs);
      INFO(g.name << " K=" << K);
      for (RankId r = 0; r + 1 < K; r += 2) {
        CHECK(shared.makespan >= shared.per_rank[r].busy + shared.per_rank[r + 1].busy);
        // No two compute actions of one device overlap.
        std::vector<std::pair<TimeNs, TimeNs>> spans;
        for (const TimelineEvent& e : shared.timeline.events) {
          if ((e.rank == r || e.rank == r + 1) && IsCompute(e.action.kind)) spans.emplace_back(e.start, e.end);
        }
        std::sort(spans.begin(), spans.end());
        for (size_t i = 1; i < spans.size(); ++i) CHECK(spans[i].first >= spans[i - 1].second);
      }
    }
  }
}

TEST_CASE("shared device slots: a device with as many slots as ranks does not serialise them", "[sim][devices]") {
  // A CPU host whose 2 cores run 2 ranks of 1 thread: device 0 with 2 slots
  // is the plain pipeline, (M+K-1)(F+B) = 9.
  StageCost c;
  c.forward = 1000;
  c.backward = 2000;
  CostModel costs = CostModel::Uniform(2, c, Link{});
  costs.SetDevices({0, 0});
  costs.SetDeviceSlots({2});
  const SimResult r = Simulate(Lower(GenerateGPipe(2, 2)), costs);
  CHECK(r.makespan == 9000);
  CHECK(r.timeline.devices == std::vector<int>{0, 0});
  CHECK(r.timeline.device_slots == std::vector<int>{2});
  costs.SetDeviceSlots({1});  // one slot: as before, one action at a time
  CHECK(Simulate(Lower(GenerateGPipe(2, 2)), costs).makespan == 12000);
  costs.SetDevices({0, 1});
  costs.SetDeviceSlots({2});  // no entry for device 1
  CHECK_THROWS_WITH(Simulate(Lower(GenerateGPipe(2, 2)), costs),
                    Catch::Contains("'device_slots' has 1 entries, but rank 1 is on device 1"));
}

TEST_CASE("shared device slots: three ranks on two slots, by hand", "[sim][devices]") {
  // GPipe K=3 M=3, F=1, B=2, free comms, all ranks on device 0 with 2
  // slots. Requests for one time go by the time they were first ready, then
  // the lower rank. By hand (us): r0 F0 [0,1); r0 F1, r1 F0 [1,2); at 2
  // r0 F2, r1 F1 take both slots, r2 F0 waits to [3,4) beside r1 F2 [3,4);
  // r2 F1 [4,5), F2 [5,6), B0 [6,8), B1 [8,10) beside r1 B0 [8,10); at 10
  // r0 B0, r1 B1 and r2 B2 are ready: r0 B0, r1 B1 [10,12), r2 B2 [12,14)
  // beside r0 B1 [12,14); r1 B2 [14,16); r0 B2 [16,18).
  StageCost c;
  c.forward = 1000;
  c.backward = 2000;
  CostModel costs = CostModel::Uniform(3, c, Link{});
  costs.SetDevices({0, 0, 0});
  costs.SetDeviceSlots({2});
  const SimResult r = Simulate(Lower(GenerateGPipe(3, 3)), costs);
  CHECK(Spans(r, 0, ActionKind::kForward) == SpanList{{0, 1000}, {1000, 2000}, {2000, 3000}});
  CHECK(Spans(r, 1, ActionKind::kForward) == SpanList{{1000, 2000}, {2000, 3000}, {3000, 4000}});
  CHECK(Spans(r, 2, ActionKind::kForward) == SpanList{{3000, 4000}, {4000, 5000}, {5000, 6000}});
  CHECK(Spans(r, 2, ActionKind::kBackward) == SpanList{{6000, 8000}, {8000, 10000}, {12000, 14000}});
  CHECK(Spans(r, 1, ActionKind::kBackward) == SpanList{{8000, 10000}, {10000, 12000}, {14000, 16000}});
  CHECK(Spans(r, 0, ActionKind::kBackward) == SpanList{{10000, 12000}, {12000, 14000}, {16000, 18000}});
  CHECK(r.makespan == 18000);
  // Never more than two compute actions at once.
  for (const TimelineEvent& e : r.timeline.events) {
    if (!IsCompute(e.action.kind)) continue;
    int running = 0;
    for (const TimelineEvent& o : r.timeline.events) {
      running += IsCompute(o.action.kind) && o.start <= e.start && e.start < o.end;
    }
    CHECK(running <= 2);
  }
  TimeNs covered = 0;
  for (const CriticalStep& step : r.critical_path) covered += step.end - step.start;
  CHECK(covered == r.makespan);
}

TEST_CASE("a stage's measured reduce_grad_ms replaces the ring formula of REDUCE_GRAD in the simulated step",
          "[sim][cost_model]") {
  // One rank, D = 2: F [0,1), B [1,3), then REDUCE_GRAD of the stage.
  StageCost c;
  c.forward = 1000;
  c.backward = 2000;
  c.param_bytes = 1000;
  CostModel costs = CostModel::Uniform(1, c, Link{});
  DataParallel dp;
  dp.degree = 2;
  dp.link.bandwidth_gbps = 1;  // ring: 2 (D-1)/D x 1000 B at 1 B/ns = 1000 ns
  costs.SetDataParallel(dp);
  const Schedule s = AddReduceGrad(Lower(GenerateGPipe(1, 1)));
  CHECK(Simulate(s, costs).makespan == 4000);
  c.reduce_grad = 500;
  costs = CostModel::Uniform(1, c, Link{});
  costs.SetDataParallel(dp);
  CHECK(Simulate(s, costs).makespan == 3500);
  dp.degree = 1;  // no replicas: no all-reduce, measured or not
  costs.SetDataParallel(dp);
  CHECK(Simulate(s, costs).makespan == 3000);
}

}  // namespace pplab::simulator_engine_test
