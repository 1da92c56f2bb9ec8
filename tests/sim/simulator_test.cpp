#include "sim/simulator.h"

#include <algorithm>
#include <array>
#include <catch2/catch.hpp>
#include <map>
#include <set>

#include "schedules/error.h"
#include "schedules/generators.h"
#include "schedules/lowering.h"
#include "sim/analytic.h"
#include "sim/zb_auto.h"
#include "tests/generator_rules.h"

namespace pplab {
namespace {

CostModel UniformCosts(int stages, TimeNs f, TimeNs b, TimeNs w = 0) {
  StageCost c;
  c.forward = f;
  c.backward = b;
  if (w > 0) c.backward_weight = w;
  c.activation_bytes = 100;
  c.weight_grad_bytes = 10;
  return CostModel::Uniform(stages, c, Link{});
}

}  // namespace

TEST_CASE("simulated bubble equals the analytic one for uniform costs and free communication", "[sim]") {
  int compared = 0;
  std::set<std::string> families;
  // (f, b, w) in ns: w only matters for split schedules; the zero-bubble
  // closed forms hold for T_F = T_I = T_W, i.e. b = 2f, w = f.
  const std::vector<std::array<TimeNs, 3>> cost_sets = {{1000, 2000, 1000}, {1000, 1000, 500}, {3000, 2000, 1000}};
  for (const GeneratorInfo& g : Generators()) {
    if (g.needs_costs) continue;  // zb-auto claims no closed form; see zb_auto_test.cpp
    for (int K = 1; K <= 8; ++K) {
      for (int M = 1; M <= 16; ++M) {
        for (int v = 1; v <= 3; ++v) {
          if (!FamilyAccepts(g, K, M, v)) continue;
          const Schedule s = Lower(Generate(g.name, {K, M, v}));
          for (const auto& [f, b, w] : cost_sets) {
            const CostModel costs = UniformCosts(s.stages, f, b, w);
            const auto analytic = AnalyticBubbleFor(s, costs);
            if (!analytic) continue;
            const SimResult r = Simulate(s, costs);
            const double simulated =
                analytic->convention == BubbleConvention::kMakespan ? r.bubble_fraction : r.span_bubble_fraction;
            INFO(g.name << " K=" << K << " M=" << M << " v=" << v << " f=" << f << " b=" << b << " w=" << w
                        << " formula " << analytic->formula << " makespan " << r.makespan);
            CHECK(simulated == Approx(analytic->fraction).margin(1e-12));
            families.insert(g.name);
            ++compared;
          }
        }
      }
    }
  }
  CHECK(compared > 1000);
  CHECK(families == std::set<std::string>{"gpipe", "1f1b", "interleaved-1f1b", "looped-bfs", "zb-h1", "zb-h2", "zb-v",
                                          "interleaved-zb"});
}

}  // namespace pplab

namespace pplab {

TEST_CASE("gpipe with communication costs (M+K-1)(f+b) plus one transfer per hop each way", "[sim]") {
  for (int K : {1, 2, 4}) {
    for (int M : {1, 3, 8}) {
      StageCost c;
      c.forward = 1000;
      c.backward = 2000;
      c.message_bytes = 500;
      const CostModel costs = CostModel::Uniform(K, c, Link{100, 5.0});  // 100 ns + 500 B / (5 B/ns) = 200 ns
      const SimResult r = Simulate(Lower(GenerateGPipe(K, M)), costs);
      // Forwards: (M+K-1) f with K-1 transfers on the path; backwards likewise.
      CHECK(r.makespan == (M + K - 1) * 3000 + 2 * (K - 1) * 200);
      CHECK(r.p2p_messages == 2L * (K - 1) * M);
      CHECK(r.p2p_bytes == 2L * (K - 1) * M * 500);
      // The critical path covers the makespan with no gaps.
      CHECK(r.critical_compute + r.critical_comm == r.makespan);
    }
  }
}

TEST_CASE("peak in-flight microbatches per rank follow each family's memory rule", "[sim]") {
  const int K = 4, M = 12;
  StageCost c;
  c.forward = 1;
  c.backward = 2;
  c.activation_bytes = 1000;
  c.weight_grad_bytes = 100;
  for (RankId r = 0; r < K; ++r) {
    const SimResult gpipe = Simulate(GenerateGPipe(K, M), CostModel::Uniform(K, c, {}));
    CHECK(gpipe.per_rank[r].peak_inflight == M);
    CHECK(gpipe.per_rank[r].peak_activation_bytes == M * 1000);
    const SimResult f1b1 = Simulate(Generate1F1B(K, M), CostModel::Uniform(K, c, {}));
    CHECK(f1b1.per_rank[r].peak_inflight == K - r);
    CHECK(f1b1.per_rank[r].peak_activation_bytes == (K - r) * 1000);
    const SimResult h1 = Simulate(GenerateZeroBubbleH1(K, M), CostModel::Uniform(K, c, {}));
    CHECK(h1.per_rank[r].peak_inflight == K - r);
    const SimResult h2 = Simulate(GenerateZeroBubbleH2(K, M), CostModel::Uniform(K, c, {}));
    CHECK(h2.per_rank[r].peak_inflight == 2 * (K - r) - 1);
  }
}

TEST_CASE("an action's workspace counts in the peak while it runs, on top of what is held", "[sim]") {
  const int K = 4, M = 12;
  StageCost c;
  c.forward = 1;
  c.backward = 2;
  c.activation_bytes = 1000;
  c.workspace_bytes = 300;
  for (RankId r = 0; r < K; ++r) {
    // GPipe holds all M microbatches when the first B starts; 1F1B holds
    // K - r when a rank's F of its last warm-up microbatch runs.
    CHECK(Simulate(GenerateGPipe(K, M), CostModel::Uniform(K, c, {})).per_rank[r].peak_activation_bytes ==
          M * 1000 + 300);
    CHECK(Simulate(Generate1F1B(K, M), CostModel::Uniform(K, c, {})).per_rank[r].peak_activation_bytes ==
          (K - r) * 1000 + 300);
  }
  // It round-trips through the JSON form.
  const CostModel m = CostModel::Uniform(2, c, {});
  CHECK(CostModel::FromJson(m.ToJson(), "t").Stage(1).workspace_bytes == 300);
}

TEST_CASE("simulation is deterministic and linear: same input, same timeline", "[sim]") {
  const Schedule s = Lower(GenerateInterleaved1F1B(4, 8, 2));
  StageCost c;
  c.forward = 333;
  c.backward = 777;
  c.message_bytes = 1 << 20;
  const CostModel costs = CostModel::Uniform(s.stages, c, Link{50, 12.5});
  const SimResult a = Simulate(s, costs), b = Simulate(s, costs);
  REQUIRE(a.timeline.events.size() == s.NumActions());
  for (size_t i = 0; i < a.timeline.events.size(); ++i) {
    CHECK(a.timeline.events[i].start == b.timeline.events[i].start);
    CHECK(a.timeline.events[i].end == b.timeline.events[i].end);
  }
}

TEST_CASE("costs whose sums would overflow int64 are refused", "[sim]") {
  StageCost c;
  c.forward = int64_t{1} << 60;
  c.backward = 1;
  CHECK_THROWS_WITH(Simulate(Generate1F1B(2, 8), CostModel::Uniform(2, c, {})),
                    Catch::Contains("more than int64 nanoseconds or bytes can hold"));
}

TEST_CASE("the closed form is only claimed for the generator's own order and real costs", "[sim]") {
  StageCost c;
  c.forward = 1000;
  c.backward = 2000;
  const CostModel costs = CostModel::Uniform(4, c, {});
  Schedule renamed = GenerateLoopedBfs(2, 4, 2);
  CHECK(AnalyticBubbleFor(renamed, costs).has_value());
  renamed.name = "interleaved-1f1b";  // same K, M, v, another family's name
  CHECK_FALSE(AnalyticBubbleFor(renamed, costs).has_value());
  StageCost free;
  free.forward = 0;
  free.backward = 0;
  CHECK_FALSE(AnalyticBubbleFor(GenerateLoopedBfs(2, 4, 2), CostModel::Uniform(4, free, {})).has_value());
}

TEST_CASE("a schedule that cannot finish is an error naming the stuck ranks", "[sim]") {
  Schedule s = Lower(Generate1F1B(2, 1));
  // rank 0: F0 SEND_F0 RECV_B0 B0 -> put RECV_B0 ... B0 before F0's send.
  s.programs[0] = {{ActionKind::kRecvB, 0, 0},
                   {ActionKind::kBackward, 0, 0},
                   {ActionKind::kForward, 0, 0},
                   {ActionKind::kSendF, 0, 0}};
  StageCost c;
  c.forward = 1;
  c.backward = 1;
  CHECK_THROWS_WITH(Simulate(s, CostModel::Uniform(2, c, {})),
                    Catch::Contains("rank 0 step 1 (0B0) needs its own forward"));
  CHECK_THROWS_WITH(Simulate(s, CostModel::Uniform(3, c, {})), Catch::Contains("cost model has 3 stages"));
  // Looped placement, stages 0 and 2 on rank 0: rank 0 waits for stage 1's
  // output before it has sent stage 1 its input, so both ranks wait forever.
  Schedule looped = Lower(GenerateLoopedBfs(2, 1, 2));
  Program& p = looped.programs[0];
  std::stable_partition(p.begin(), p.end(),
                        [](const Action& a) { return a.stage == 2 && a.kind != ActionKind::kSendB; });
  CHECK_THROWS_WITH(Simulate(looped, CostModel::Uniform(4, c, {})),
                    Catch::Contains("deadlock, these ranks wait for messages never sent: rank 0 at step 1 (2F0)"));
}

}  // namespace pplab

namespace pplab {

// DualPipe's README gives its bubble as (PP/2 - 1)(F&B + B - 3W) per rank,
// PP = K. It holds here as the worst rank's idle time, makespan - busy, when
// T_F = T_I = T_W (so B = 2F, W = F), messages are free and the overlapped
// pair costs F&B with B <= F&B <= F + B; with F&B above F + B, or other
// ratios, it does not (the simulator is the answer then).
TEST_CASE("dualpipe's bubble is the README's (K/2-1)(F&B+B-3W) and it holds K+1 activations per rank",
          "[sim][dualpipe]") {
  int compared = 0;
  for (int K : {2, 4, 6, 8}) {
    for (int M : {2 * K, 2 * K + 2, 4 * K, 30}) {
      for (TimeNs fb : {2000, 2600, 3000}) {
        StageCost c;
        c.forward = 1000;
        c.backward = 2000;
        c.backward_weight = 1000;
        c.forward_backward = fb;
        c.activation_bytes = 100;
        const SimResult r = Simulate(Lower(GenerateDualPipe(K, M)), CostModel::Uniform(2 * K, c, {}));
        TimeNs worst_idle = 0;
        for (const RankMetrics& m : r.per_rank) {
          worst_idle = std::max(worst_idle, m.idle);
          INFO("K=" << K << " M=" << M << " rank " << m.rank);
          // PP+1 activations: K + 1 stage-microbatches in flight on every rank.
          CHECK(m.peak_inflight == K + 1);
          CHECK(m.peak_activation_bytes == (K + 1) * 100);
        }
        INFO("K=" << K << " M=" << M << " F&B=" << fb << " makespan " << r.makespan);
        CHECK(worst_idle == (K / 2 - 1) * (fb + 2000 - 3 * 1000));
        ++compared;
      }
    }
  }
  CHECK(compared == 48);
  // Outside the assumptions the formula is not claimed: F&B = 3500 > F + B.
  StageCost c;
  c.forward = 1000;
  c.backward = 2000;
  c.backward_weight = 1000;
  c.forward_backward = 3500;
  const SimResult r = Simulate(Lower(GenerateDualPipe(8, 16)), CostModel::Uniform(16, c, {}));
  TimeNs worst_idle = 0;
  for (const RankMetrics& m : r.per_rank) worst_idle = std::max(worst_idle, m.idle);
  CHECK(worst_idle == 8500);  // the formula would say 3 x 2500 = 7500
}

}  // namespace pplab

namespace pplab {
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

}  // namespace pplab

namespace pplab {

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

}  // namespace pplab

namespace pplab {

TEST_CASE("per-step costs: clip and optimizer follow each rank's last action, all-reduces wait for every rank",
          "[sim][step]") {
  // GPipe K=2 M=2, F=1, B=2, free comms: rank 0 ends at 9, rank 1 at 7.
  StageCost c;
  c.forward = 1000;
  c.backward = 2000;
  CostModel costs = CostModel::Uniform(2, c, Link{});
  const Schedule s = Lower(GenerateGPipe(2, 2));
  CHECK(Simulate(s, costs).makespan == 9000);
  StepCosts step;
  step.clip = 250;
  step.optimizer = 500;
  costs.SetStep(step);
  SimResult r = Simulate(s, costs);
  // No all-reduce: each rank clips and steps at once, rank 1 from 7.
  CHECK(r.makespan == 9750);
  REQUIRE(r.timeline.step_events.size() == 4);
  const auto& ev = r.timeline.step_events;
  CHECK((ev[0].rank == 0 && ev[0].name == "clip" && ev[0].start == 9000 && ev[0].end == 9250));
  CHECK((ev[1].rank == 0 && ev[1].name == "optimizer" && ev[1].start == 9250 && ev[1].end == 9750));
  CHECK((ev[2].rank == 1 && ev[2].name == "clip" && ev[2].start == 7000 && ev[2].end == 7250));
  CHECK((ev[3].rank == 1 && ev[3].name == "optimizer" && ev[3].start == 7250 && ev[3].end == 7750));
  CHECK(r.per_rank[1].idle == 9750 - 6000);
  CHECK(r.critical_step == 750);
  CHECK(r.critical_compute + r.critical_comm + r.critical_step == r.makespan);
  // The loss and norm all-reduces start at 9 on both ranks, then clip and optimizer.
  step.loss_allreduce = 100;
  step.norm_allreduce = 200;
  costs.SetStep(step);
  r = Simulate(s, costs);
  CHECK(r.makespan == 9000 + 100 + 200 + 250 + 500);
  REQUIRE(r.timeline.step_events.size() == 8);
  for (RankId rank : {0, 1}) {
    const StepEvent& loss = r.timeline.step_events[4 * rank];
    const StepEvent& opt = r.timeline.step_events[4 * rank + 3];
    CHECK((loss.name == "loss_allreduce" && loss.start == 9000 && loss.end == 9100));
    CHECK((opt.name == "optimizer" && opt.start == 9550 && opt.end == 10050));
  }
  CHECK(r.critical_step == 1050);
  CHECK(r.timeline.Makespan() == r.makespan);
  CHECK(r.bubble_fraction == Approx(1.0 - 12000.0 / (2 * 10050.0)));
}

TEST_CASE("tied embeddings: the halves' ranks swap gradients once both are done, before the all-reduces",
          "[sim][step]") {
  // GPipe K=2 M=2, F=1, B=2, free comms: rank 0 ends at 9, rank 1 at 7.
  StageCost c;
  c.forward = 1000;
  c.backward = 2000;
  CostModel costs = CostModel::Uniform(2, c, Link{});
  StepCosts step;
  step.tied_exchange = 300;
  step.optimizer = 500;
  costs.SetStep(step);
  SimResult r = Simulate(Lower(GenerateGPipe(2, 2)), costs);
  // Stage 0 on rank 0, stage 1 on rank 1: both swap from 9 to 9.3, then step.
  CHECK(r.makespan == 9000 + 300 + 500);
  REQUIRE(r.timeline.step_events.size() == 4);
  for (const StepEvent& e : r.timeline.step_events) {
    if (e.name == "tied_exchange") CHECK((e.start == 9000 && e.end == 9300));
    if (e.name == "optimizer") CHECK((e.start == 9300 && e.end == 9800));
  }
  CHECK(r.critical_compute + r.critical_comm + r.critical_step == r.makespan);
  // zb-v puts stage 0 and stage 3 on rank 0: nothing to swap.
  const Schedule v = Lower(Generate("zb-v", {2, 2, 2}));
  CostModel four = CostModel::Uniform(4, c, Link{});
  const TimeNs alone = Simulate(v, four).makespan;
  four.SetStep(step);
  r = Simulate(v, four);
  CHECK(r.makespan == alone + 500);
  for (const StepEvent& e : r.timeline.step_events) CHECK(e.name != "tied_exchange");
  // DualPipe K=2: two pipelines, two pairs between ranks 0 and 1, one after the other.
  const Schedule dual = Lower(Generate("dualpipe", {2, 4, 0}));
  four.SetStep(StepCosts{});
  const SimResult base = Simulate(dual, four);
  four.SetStep(step);
  r = Simulate(dual, four);
  CHECK(r.makespan == base.makespan + 2 * 300 + 500);
  // The cost file carries it, and leaves it out when 0.
  CHECK(CostModel::FromJson(costs.ToJson(), "t").Step().tied_exchange == 300);
  CHECK(CostModel::Uniform(2, c, Link{}).ToJson().find("tied_exchange") == std::string::npos);
}

}  // namespace pplab

namespace pplab {

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

}  // namespace pplab

namespace pplab {
namespace {

// A stage of F 1000 ns and B 2000 ns that holds 1000 activation bytes.
StageCost StageOfThousand() {
  StageCost c;
  c.forward = 1000;
  c.backward = 2000;
  c.activation_bytes = 1000;
  return c;
}

// Two ranks of GPipe, M=2: F 1000 ns, B 2000 ns, 1000 activation bytes, 100-byte messages
// that take 100 ns, and the transport's rules for message buffers.
SimResult GPipeWithMessages(const std::optional<MessageMemory>& messages, std::optional<Bytes> forward_send) {
  StageCost c = StageOfThousand();
  c.message_bytes = 100;
  c.forward_send_bytes = forward_send;
  CostModel costs = CostModel::Uniform(2, c, Link{100, 0});
  costs.SetMessages(messages);
  return Simulate(Lower(GenerateGPipe(2, 2)), costs);
}

// Rank r's memory after its samples up to and including time t.
Bytes HeldAt(const SimResult& r, RankId rank, TimeNs t) {
  Bytes held = 0;
  for (const MemorySample& s : r.timeline.memory) {
    if (s.rank == rank && s.time <= t) held = s.bytes;
  }
  return held;
}

}  // namespace

TEST_CASE("message buffers freed at the step's end and allocated at use (Gloo) count in the peak", "[sim]") {
  // Rank 0: F m0 [0,1000], SEND_F (100 B held to the end), F m1 [1000,2000]
  // with 1000 + 100 + 1000 live, SEND_F (+100: 2200). Rank 1 runs F at
  // 1100 and 2100 and its B's at 3100-5100 and 5100-7100; each SEND_B
  // arrives 100 ns later. Rank 0's first B (5200-7200) has the received
  // gradient allocated when it starts: 2200 + 100.
  const MessageMemory gloo{MessageMemory::SentFreed::kStepEnd, MessageMemory::ReceivePosted::kAtUse};
  const SimResult with = GPipeWithMessages(gloo, std::nullopt);
  const SimResult without = GPipeWithMessages(std::nullopt, std::nullopt);
  CHECK(without.per_rank[0].peak_activation_bytes == 2000);
  CHECK(with.per_rank[0].peak_activation_bytes == 2300);
  // Made of two F's activations, two sent copies and the received gradient.
  CHECK(with.per_rank[0].peak_parts.activations == 2000);
  CHECK(with.per_rank[0].peak_parts.messages == 300);
  CHECK(with.per_rank[0].peak_parts.Total() == 2300);
  CHECK(HeldAt(with, 0, 2000) == 2200);
  // Rank 1 (the last stage) holds its input gradients from each B's end:
  // 1000 + 100 after the first, 100 + 100 after the second.
  CHECK(HeldAt(with, 1, 5100) == 1100);
  CHECK(HeldAt(with, 1, 7100) == 200);
  CHECK(with.per_rank[1].peak_activation_bytes == 2000);
  // Everything is freed by the step's end; times are unchanged.
  CHECK(with.timeline.memory.back().bytes == 0);
  CHECK(HeldAt(with, 0, with.makespan) == 0);
  CHECK(with.makespan == without.makespan);
}

TEST_CASE("message buffers freed after delivery and posted one action ahead (NCCL) count where they live", "[sim]") {
  // NCCL sends a view of outputs F keeps anyway: a SEND_F holds nothing
  // more. Rank 0 posts its first gradient receive with F m1 (2100 live
  // during it) and its second with its first B: 1000 + 1000 + 100 + 100.
  const MessageMemory nccl{MessageMemory::SentFreed::kNextSendAfterDelivery,
                           MessageMemory::ReceivePosted::kOneActionAhead};
  const SimResult r = GPipeWithMessages(nccl, Bytes{0});
  CHECK(r.per_rank[0].peak_activation_bytes == 2200);
  CHECK(HeldAt(r, 0, 1000) == 2100);
  // Rank 1 posts RECV_F m0 at the step's start (no compute before it) and
  // RECV_F m1 with F m0, whose received input then counts in F's own bytes.
  CHECK(HeldAt(r, 1, 0) == 100);
  CHECK(HeldAt(r, 1, 1100) == 1100);
  CHECK(HeldAt(r, 1, 2100) == 2000);
  // Its first SEND_B's gradients (100) are freed by the second SEND_B at
  // 7100, after their delivery at 5200: 100 held after it, 0 at the end.
  CHECK(HeldAt(r, 1, 7100) == 100);
  CHECK(r.timeline.memory.back().bytes == 0);
  // With Gloo's rules rank 0's forwards would hold 200 bytes more.
  const MessageMemory gloo{MessageMemory::SentFreed::kStepEnd, MessageMemory::ReceivePosted::kAtUse};
  CHECK(GPipeWithMessages(gloo, Bytes{0}).per_rank[0].peak_activation_bytes == 2100);
}

TEST_CASE("outputs sent as a view stay held by the message after B releases them, until the transport frees it",
          "[sim]") {
  // Gloo as pplab uses it: receives posted one action ahead, sends freed at
  // the step's end, and a SEND_F that is a view of F's outputs (0 bytes
  // more when sent). Rank 0: F m0 [0,1000], F m1 [1000,2000] with its first
  // gradient receive posted (2100), B m0 [5200,7200] with the second
  // posted (2200). When B m0 ends, its activations go (-1000) and so does
  // the gradient it used (-100), but its outputs' 100 bytes stay with
  // SEND_F m0: 1200, then 200 after B m1, 0 once the step's actions end.
  const MessageMemory gloo{MessageMemory::SentFreed::kStepEnd, MessageMemory::ReceivePosted::kOneActionAhead,
                           /*sent_view=*/true};
  const SimResult r = GPipeWithMessages(gloo, Bytes{0});
  CHECK(r.per_rank[0].peak_activation_bytes == 2200);
  CHECK(HeldAt(r, 0, 1000) == 2100);
  CHECK(HeldAt(r, 0, 7199) == 2200);
  CHECK(HeldAt(r, 0, 7200) == 1200);
  CHECK(HeldAt(r, 0, 9199) == 1200);
  CHECK(r.timeline.memory.back().bytes == 0);
  // Freed after delivery (NCCL's rule), SEND_F m0 is gone by SEND_F m1 at
  // 2000, before B m0: its outputs go with B m0 (1100 after it). SEND_F m1,
  // which no later send frees, keeps its outputs from B m1 to the end (100).
  const MessageMemory nccl{MessageMemory::SentFreed::kNextSendAfterDelivery,
                           MessageMemory::ReceivePosted::kOneActionAhead, /*sent_view=*/true};
  const SimResult n = GPipeWithMessages(nccl, Bytes{0});
  CHECK(HeldAt(n, 0, 7200) == 1100);
  CHECK(HeldAt(n, 0, 9199) == 1100);
  // B m1 ends at 9200 with the step's actions: 100 held, then 0.
  CHECK(std::any_of(n.timeline.memory.begin(), n.timeline.memory.end(),
                    [](const MemorySample& m) { return m.rank == 0 && m.time == 9200 && m.bytes == 100; }));
  CHECK(HeldAt(n, 0, n.makespan) == 0);
  // A transport whose sends copy to another device (Gloo from a GPU) holds
  // nothing on this one: the outputs go with B as well.
  const MessageMemory host_copy{MessageMemory::SentFreed::kStepEnd, MessageMemory::ReceivePosted::kOneActionAhead,
                                /*sent_view=*/false};
  CHECK(HeldAt(GPipeWithMessages(host_copy, Bytes{0}), 0, 7200) == 1100);
  // A send that copied its message (forward_send_bytes = message_bytes)
  // holds the copy from the send (2200 at 1000, 2300 from SEND_F m1, 2400
  // with the second receive posted), and the outputs go with B: 1300.
  const SimResult copied = GPipeWithMessages(gloo, Bytes{100});
  CHECK(HeldAt(copied, 0, 1000) == 2200);
  CHECK(copied.per_rank[0].peak_activation_bytes == 2400);
  CHECK(HeldAt(copied, 0, 7200) == 1300);
}

TEST_CASE("input gradients handed to the previous stage on the same rank are held until its B ends", "[sim]") {
  // K=1, v=2, M=1: F s0, F s1, B s1, B s0. After B s1 the rank holds
  // stage 0's activations and the 100-byte input gradient of stage 1.
  StageCost c = StageOfThousand();
  c.message_bytes = 100;
  CostModel costs = CostModel::Uniform(2, c, Link{});
  costs.SetMessages(MessageMemory{});
  const SimResult r = Simulate(Lower(GenerateInterleaved1F1B(1, 1, 2)), costs);
  CHECK(HeldAt(r, 0, 4000) == 1100);
  CHECK(HeldAt(r, 0, 6000) == 0);
}

TEST_CASE("message_memory and forward_send_bytes round-trip through the cost file and are checked", "[sim]") {
  StageCost c;
  c.forward = 1;
  c.backward = 2;
  c.forward_send_bytes = 0;
  CostModel m = CostModel::Uniform(2, c, {});
  m.SetMessages(MessageMemory{MessageMemory::SentFreed::kNextSendAfterDelivery,
                              MessageMemory::ReceivePosted::kOneActionAhead, /*sent_view=*/true});
  const CostModel back = CostModel::FromJson(m.ToJson(), "t");
  REQUIRE(back.Messages());
  CHECK(back.Messages()->sent_freed == MessageMemory::SentFreed::kNextSendAfterDelivery);
  CHECK(back.Messages()->receive_posted == MessageMemory::ReceivePosted::kOneActionAhead);
  CHECK(back.Messages()->sent_view);
  CHECK(back.Stage(1).forward_send_bytes == Bytes{0});
  CHECK_FALSE(CostModel::FromJson(CostModel::Uniform(2, c, {}).ToJson(), "t").Messages());
  const std::string base = R"({"format": "pplab.cost", "version": 1, "num_stages": 2,
      "default": {"forward_ms": 1, "backward_ms": 2}, "message_memory": )";
  CHECK_THROWS_WITH(CostModel::FromJson(base + R"({"sent_freed": "never", "receive_posted": "at_use"}})", "c.json"),
                    "c.json: message_memory.sent_freed must be \"step_end\" or \"next_send_after_delivery\", "
                    "got \"never\"");
  CHECK_THROWS_WITH(CostModel::FromJson(base + R"({"sent_freed": "step_end"}})", "c.json"),
                    "c.json: message_memory.receive_posted must be \"at_use\" or \"one_action_ahead\"");
  CHECK_THROWS_WITH(
      CostModel::FromJson(base + R"({"sent_freed": "step_end", "receive_posted": "at_use", "x": 1}})", "c.json"),
      "c.json: message_memory: unknown field 'x'");
  // sent_view is optional (files from before it mean no view) and a boolean.
  CHECK_FALSE(CostModel::FromJson(base + R"({"sent_freed": "step_end", "receive_posted": "at_use"}})", "c.json")
                  .Messages()
                  ->sent_view);
  CHECK_THROWS_WITH(CostModel::FromJson(
                        base + R"({"sent_freed": "step_end", "receive_posted": "at_use", "sent_view": 1}})", "c.json"),
                    "c.json: message_memory.sent_view must be true or false, got 1");
}

TEST_CASE("F and B count their own workspace where the stage gives each", "[sim]") {
  // One rank, GPipe, M=2: F0 holds 1000 + 100 while it runs, F1 2000 + 100,
  // the first B 2000 + 300 (workspace_bytes only stands in for a kind
  // that has none of its own).
  StageCost c = StageOfThousand();
  c.workspace_bytes = 5000;
  c.forward_workspace_bytes = 100;
  c.backward_workspace_bytes = 300;
  CHECK(Simulate(Lower(GenerateGPipe(1, 2)), CostModel::Uniform(1, c, {})).per_rank[0].peak_activation_bytes == 2300);
  c.backward_workspace_bytes.reset();  // B falls back to workspace_bytes
  CHECK(Simulate(Lower(GenerateGPipe(1, 2)), CostModel::Uniform(1, c, {})).per_rank[0].peak_activation_bytes == 7000);
  c.backward_workspace_bytes = 300;
  CHECK(c.WorkspaceOf(ActionKind::kForward) == 100);
  CHECK(c.WorkspaceOf(ActionKind::kBackwardWeight) == 300);
  CHECK(c.WorkspaceOf(ActionKind::kBackwardInput) == 300);  // I falls back to B's
  c.backward_input_workspace_bytes = 400;
  CHECK(c.WorkspaceOf(ActionKind::kBackwardInput) == 400);
  CHECK(c.WorkspaceOf(ActionKind::kBackwardWeight) == 300);
  CHECK(c.WorkspaceOf(ActionKind::kBackward) == 300);
  const CostModel back = CostModel::FromJson(CostModel::Uniform(2, c, {}).ToJson(), "t");
  CHECK(back.Stage(1).forward_workspace_bytes == Bytes{100});
  CHECK(back.Stage(1).backward_workspace_bytes == Bytes{300});
  CHECK(back.Stage(1).backward_input_workspace_bytes == Bytes{400});
}

TEST_CASE("an I keeps the output gradients it used until its W, as the executor does", "[sim]") {
  // zb-h1, K=2, M=1, free links, Gloo's rules. Rank 0: F0 [0,1000] holds
  // 1000, its SEND_F a 100-byte copy; I0 [3000,4000] gets the 100-byte
  // gradient, then holds 500 for W0 in place of its 1000 of activations:
  // 1000 + 100 + 100 - 1000 + 500 = 700 until W0 ends at 5000, which frees
  // the gradient with its 500: the send's copy is left, until the step ends
  // at the same time.
  StageCost c = StageOfThousand();
  c.backward_weight = 1000;
  c.weight_grad_bytes = 500;
  c.message_bytes = 100;
  CostModel costs = CostModel::Uniform(2, c, Link{});
  costs.SetMessages(MessageMemory{});
  const SimResult r = Simulate(Lower(GenerateZeroBubbleH1(2, 1)), costs);
  CHECK(HeldAt(r, 0, 3000) == 1200);
  CHECK(HeldAt(r, 0, 4000) == 700);
  CHECK(HeldAt(r, 0, 4999) == 700);
  std::vector<Bytes> at_end;
  for (const MemorySample& m : r.timeline.memory) {
    if (m.rank == 0 && m.time == 5000) at_end.push_back(m.bytes);
  }
  // W0 frees its 500, then the gradient, then the step's end the copy.
  CHECK(at_end == std::vector<Bytes>{200, 100, 0});
}

TEST_CASE("gradients are held at their own size, messages at the wire's", "[sim]") {
  // As bf16 on the wire does: 50-byte messages of 100-byte gradients. GPipe,
  // K=2, M=2, Gloo's rules. Rank 1 (the last stage) holds its first B's
  // input gradient (100) until its SEND_B, whose copy then holds 50: after
  // the second B 100 + 50, and after the second SEND_B 50 + 50.
  StageCost c = StageOfThousand();
  c.message_bytes = 50;
  c.input_grad_bytes = 100;
  CostModel costs = CostModel::Uniform(2, c, Link{100, 0});
  costs.SetMessages(MessageMemory{});
  const SimResult r = Simulate(Lower(GenerateGPipe(2, 2)), costs);
  // Rank 1: B's at 3100-5100 and 5100-7100, each SEND_B as its B ends. At
  // 5100: the B frees 1000, holds the gradient's 100, whose SEND_B swaps it
  // for the message's 50.
  std::vector<Bytes> at_first_send;
  for (const MemorySample& m : r.timeline.memory) {
    if (m.rank == 1 && m.time == 5100) at_first_send.push_back(m.bytes);
  }
  CHECK(at_first_send == std::vector<Bytes>{1000, 1100, 1050});
  CHECK(HeldAt(r, 1, 7100) == 50 + 50);
  // Rank 0 holds two 50-byte sent copies; its first B (5200-7200) holds the
  // received gradient as 100 bytes: 2000 + 100 + 100.
  CHECK(r.per_rank[0].peak_activation_bytes == 2200);
  CHECK(r.timeline.memory.back().bytes == 0);
}

TEST_CASE("a stage fed on its rank holds its input only where the previous stage does not", "[sim]") {
  // K=1, v=2, M=1 (F s0, F s1, B s1, B s0); no message rules. Stage 1's
  // 1000 activation bytes were measured with a received input of 300.
  StageCost c = StageOfThousand();
  c.input_bytes = 300;
  CostModel costs = CostModel::Uniform(2, c, Link{});
  const Schedule k1 = Lower(GenerateInterleaved1F1B(1, 1, 2));
  CHECK(Simulate(k1, costs).per_rank[0].peak_activation_bytes == 2000);  // taken as it is
  StageCost s1 = c;
  s1.activation_includes_input = true;
  costs.SetStage(1, s1);
  // Stage 0 keeps its outputs, which are stage 1's input: 1000 + 700.
  CHECK(Simulate(k1, costs).per_rank[0].peak_activation_bytes == 1700);
  // A recomputed stage 0 hands them over and keeps only its own input (0
  // on the first stage here): stage 1 holds all of its 1000 again (700 if
  // it were shared), and so does stage 0's B, which rebuilds its 1000.
  StageCost s0 = c;
  s0.activation_bytes = 0;
  s0.recomputed_bytes = 1000;
  costs.SetStage(0, s0);
  CHECK(Simulate(k1, costs).per_rank[0].peak_activation_bytes == 1000);
  s0.recomputed_bytes = 10;  // now only stage 1's F shows it
  costs.SetStage(0, s0);
  CHECK(Simulate(k1, costs).per_rank[0].peak_activation_bytes == 1000);
  // Measured handed over, run received (K=2): F s1 holds 300 more.
  costs = CostModel::Uniform(2, c, Link{});
  s1.activation_includes_input = false;
  costs.SetStage(1, s1);
  CHECK(Simulate(Lower(GenerateGPipe(2, 1)), costs).per_rank[1].peak_activation_bytes == 1300);
  // It round-trips through the file.
  CHECK(CostModel::FromJson(costs.ToJson(), "t").Stage(1).activation_includes_input == false);
}

TEST_CASE("a stage's kept weight casts count from its first compute action to the step's end", "[sim]") {
  // 1F1B, K=2, M=2: stage 1's casts (500) from its first F at 1000, stage
  // 0's (300) from 0. Rank 1 holds 1000 + 500 during its first F, which is
  // its peak (it runs F, B, F, B).
  StageCost c = StageOfThousand();
  c.cast_weight_bytes = 300;
  CostModel costs = CostModel::Uniform(2, c, Link{});
  StageCost s1 = c;
  s1.cast_weight_bytes = 500;
  costs.SetStage(1, s1);
  const SimResult r = Simulate(Lower(Generate1F1B(2, 2)), costs);
  CHECK(HeldAt(r, 1, 999) == 0);
  CHECK(HeldAt(r, 1, 1000) == 1500);
  CHECK(r.per_rank[1].peak_activation_bytes == 1500);
  // Rank 0 runs F, F (2000 held) before its first B: 2300.
  CHECK(r.per_rank[0].peak_activation_bytes == 2300);
  CHECK(r.timeline.memory.back().bytes == 0);
  CHECK(CostModel::FromJson(costs.ToJson(), "t").Stage(1).cast_weight_bytes == 500);
}

TEST_CASE("the kinds of a rank's peak add up to it, for every generator", "[sim]") {
  StageCost c = StageOfThousand();
  c.backward_weight = 700;
  c.weight_grad_bytes = 400;
  c.workspace_bytes = 50;
  c.message_bytes = 30;
  c.input_grad_bytes = 60;
  c.cast_weight_bytes = 500;
  int checked = 0;
  for (const GeneratorInfo& g : Generators()) {
    if (g.needs_costs) continue;
    for (int K : {2, 4}) {
      const int M = 2 * K, v = 2;
      if (!FamilyAccepts(g, K, M, v)) continue;
      const Schedule s = Lower(Generate(g.name, {K, M, v}));
      CostModel costs = CostModel::Uniform(s.stages, c, Link{100, 0});
      costs.SetMessages(MessageMemory{MessageMemory::SentFreed::kNextSendAfterDelivery,
                                      MessageMemory::ReceivePosted::kOneActionAhead});
      const SimResult r = Simulate(s, costs);
      for (const RankMetrics& m : r.per_rank) {
        INFO(g.name << " K=" << K << " rank " << m.rank);
        CHECK(m.peak_parts.Total() == m.peak_activation_bytes);
        CHECK(m.peak_parts.casts > 0);  // every rank computes some stage
        ++checked;
      }
      // Every rank ends the step holding nothing (samples are by rank, then time).
      std::map<RankId, Bytes> last;
      for (const MemorySample& m : r.timeline.memory) last[m.rank] = m.bytes;
      for (const auto& [rank, bytes] : last) CHECK(bytes == 0);
    }
  }
  CHECK(checked > 20);
}

}  // namespace pplab
