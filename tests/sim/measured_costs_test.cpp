// A cost model read off a timeline: the mean time of each compute kind per
// stage, and the link's latency from the messages receivers waited for,
// with those that came before they were needed as bounds.
#include "sim/measured_costs.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "schedules/generators.h"
#include "schedules/lowering.h"
#include "sim/simulator.h"

namespace pplab::measured_costs_test {
namespace {

constexpr TimeNs kMs = 1000000;

TimelineEvent Event(RankId r, ActionKind kind, StageId s, MicrobatchId m, TimeNs start, TimeNs end) {
  return {r, {kind, s, m}, start, end};
}

// A measured timeline of two ranks with these events.
Timeline TwoRanks(const std::string& name, std::vector<TimelineEvent> events) {
  Timeline t;
  t.name = name;
  t.source = "measured";
  t.ranks = 2;
  t.events = std::move(events);
  return t;
}

}  // namespace

TEST_CASE("measured costs: a simulated run's costs and latency come back, and so does its step", "[measured_costs]") {
  // 1F1B, K=2, M=4: F 1 ms, B 2 ms, each message 0.5 ms.
  StageCost c;
  c.forward = 1 * kMs;
  c.backward = 2 * kMs;
  const CostModel costs = CostModel::Uniform(2, c, Link{kMs / 2, 0});
  const Schedule plan = Lower(Generate1F1B(2, 4));
  const SimResult run = Simulate(plan, costs);
  // Rank 1's first F waits for F0 from its start; rank 0's first B waits
  // for B0; in the steady state each rank waits for the other's message:
  // every one of them took the link's 0.5 ms.
  const std::vector<double> waited = WaitedMessageMs(run.timeline);
  REQUIRE_FALSE(waited.empty());
  for (double ms : waited) CHECK(ms == Approx(0.5).margin(1e-9));
  const CostModel back = MeasuredCostModel(run.timeline, "run.json");
  CHECK(back.ComputeTime({ActionKind::kForward, 1, 0}) == 1 * kMs);
  CHECK(back.ComputeTime({ActionKind::kBackward, 0, 0}) == 2 * kMs);
  CHECK(back.TransferTime(0, 1, 0) == kMs / 2);
  CHECK(Simulate(plan, back).makespan == run.makespan);
  CHECK(nlohmann::json::parse(back.meta_json)["waited_messages"] == waited.size());
}

TEST_CASE("measured costs: a first message sent before its receiver posted for it is a bound", "[measured_costs]") {
  // Rank 1 came to its step late: it posted F0's receive at 3 ms, long
  // after rank 0 sent F0 at 1, and had it at 3.1; 2.1 ms is no link's time.
  Timeline late =
      TwoRanks("late", {Event(0, ActionKind::kForward, 0, 0, 0, kMs), Event(0, ActionKind::kSendF, 0, 0, kMs, kMs),
                        Event(1, ActionKind::kRecvF, 1, 0, 3 * kMs, 3100000),
                        Event(1, ActionKind::kForward, 1, 0, 3100000, 4100000)});
  CHECK(WaitedMessageMs(late).empty());
  // Posted before the send, it waited for it: exact.
  late.events[2].start = 0;
  REQUIRE(WaitedMessageMs(late).size() == 1);
  CHECK(WaitedMessageMs(late)[0] == Approx(2.1));
}

TEST_CASE("measured costs: each stage's REDUCE_GRAD takes the mean time the run's took", "[measured_costs]") {
  Timeline t =
      TwoRanks("dp", {Event(0, ActionKind::kForward, 0, 0, 0, kMs), Event(1, ActionKind::kForward, 1, 0, kMs, 2 * kMs),
                      Event(1, ActionKind::kBackward, 1, 0, 2 * kMs, 4 * kMs),
                      Event(0, ActionKind::kBackward, 0, 0, 4 * kMs, 6 * kMs),
                      Event(1, ActionKind::kReduceGrad, 1, 0, 4 * kMs, 7 * kMs),
                      Event(0, ActionKind::kReduceGrad, 0, 0, 6 * kMs, 8 * kMs)});
  const nlohmann::json cost = nlohmann::json::parse(MeasuredCostJson(t, "dp.json"));
  CHECK(cost["stages"][0]["reduce_grad_ms"] == 2.0);
  CHECK(cost["stages"][1]["reduce_grad_ms"] == 3.0);  // (until 2026-12-07 the file gave it none: 0 ms)
}

TEST_CASE("measured costs: a data-parallel trace's replicas come back, and its step with them", "[measured_costs]") {
  // GPipe, K=2, M=4, F 1 ms, B 2 ms, a 5 ms all-reduce a stage over 2
  // replicas: (M + K - 1)(F + B) = 15 ms, and stage 0's all-reduce after
  // its last B: 20 ms.
  StageCost c;
  c.forward = 1 * kMs;
  c.backward = 2 * kMs;
  c.reduce_grad = 5 * kMs;
  CostModel costs = CostModel::Uniform(2, c, Link{});
  DataParallel dp;
  dp.degree = 2;
  costs.SetDataParallel(dp);
  const Schedule plan = AddReduceGrad(Lower(Generate("gpipe", {2, 4, 0})));
  const SimResult run = Simulate(plan, costs);
  REQUIRE(run.makespan == 20 * kMs);
  CHECK(run.timeline.data_parallel == 2);
  const nlohmann::json file = nlohmann::json::parse(MeasuredCostJson(run.timeline, "dp.json"));
  CHECK(file["data_parallel"]["degree"] == 2);
  // Without the degree the file's REDUCE_GRADs took no time: 15 ms.
  CHECK(Simulate(plan, MeasuredCostModel(run.timeline, "dp.json")).makespan == 20 * kMs);
  Timeline alone = run.timeline;
  alone.data_parallel = 1;
  CHECK(Simulate(plan, MeasuredCostModel(alone, "dp.json")).makespan == 15 * kMs);
}

TEST_CASE("measured costs: every schedule's waited messages took the link's time, overlapped F&B included",
          "[measured_costs]") {
  // V shapes, several stages a rank, two pipelines, and DualPipe's
  // OVERLAP_F_B (which may take two messages and waits for the later):
  // wherever a rank waited for a message, it took the 0.5 ms link.
  StageCost c;
  c.forward = 1 * kMs;
  c.backward = 2 * kMs;
  const Link link{kMs / 2, 0};
  for (const char* name : {"gpipe", "interleaved-1f1b", "zb-h1", "zb-v", "dualpipev", "dualpipe"}) {
    INFO(name);
    const Schedule plan = Lower(Generate(name, {4, 8, 0}));
    const SimResult run = Simulate(plan, CostModel::Uniform(plan.stages, c, link));
    const std::vector<double> waited = WaitedMessageMs(run.timeline);
    REQUIRE_FALSE(waited.empty());
    CHECK(waited.front() == Approx(0.5).margin(1e-9));
    CHECK(waited.back() == Approx(0.5).margin(1e-9));
  }
}

TEST_CASE("measured costs: a simulated run on shared devices comes back with its devices and its link's latency",
          "[measured_costs]") {
  // Ranks that share a device queue for it; the waits for the device are
  // not the messages' (before, 1F1B on 2 ranks of one device came back with
  // a 1 ms link, and without the device: 11 ms, not 12). Four ranks, two a
  // device, and one of two slots, with messages of 0 and 0.5 ms.
  StageCost c;
  c.forward = 1 * kMs;
  c.backward = 2 * kMs;
  for (const TimeNs latency : {TimeNs{0}, kMs / 2}) {
    for (const std::vector<int>& slots : {std::vector<int>{}, std::vector<int>{2, 1}}) {
      const Schedule plan = Lower(Generate("1f1b", {4, 8, 0}));
      CostModel costs = CostModel::Uniform(4, c, Link{latency, 0});
      costs.SetDevices({0, 0, 1, 1});
      costs.SetDeviceSlots(slots);
      const SimResult run = Simulate(plan, costs);
      INFO("latency " << latency << " slots " << slots.size());
      const std::vector<double> waited = WaitedMessageMs(run.timeline);
      REQUIRE_FALSE(waited.empty());
      CHECK(waited.front() == Approx(NsToMs(latency)).margin(1e-9));
      CHECK(waited.back() == Approx(NsToMs(latency)).margin(1e-9));
      const CostModel back = MeasuredCostModel(run.timeline, "run.json");
      CHECK(back.Devices() == std::vector<int>{0, 0, 1, 1});
      CHECK(back.DeviceSlots() == slots);
      CHECK(back.TransferTime(0, 1, 0) == latency);
      CHECK(Simulate(plan, back).makespan == run.makespan);
    }
  }
  // A measured trace's times hold the sharing: no queue comes back.
  Timeline measured = TwoRanks(
      "1f1b", {Event(0, ActionKind::kForward, 0, 0, 0, kMs), Event(0, ActionKind::kBackward, 0, 0, kMs, 3 * kMs)});
  measured.devices = {0, 0};
  CHECK(MeasuredCostModel(measured, "m.json").Devices().empty());
}

TEST_CASE("measured costs: a message counts only when its receiver had run out of work", "[measured_costs]") {
  const std::vector<TimelineEvent> events = {
      // Rank 0: F0 0-1, F1 1-2, B0 5-7 (B0's gradients sent at 4.2, after F1 ended: waited 0.8 ms), B1 7-9.
      Event(0, ActionKind::kForward, 0, 0, 0, 1 * kMs),
      Event(0, ActionKind::kSendF, 0, 0, 1 * kMs, 1 * kMs),
      Event(0, ActionKind::kForward, 0, 1, 1 * kMs, 2 * kMs),
      Event(0, ActionKind::kSendF, 0, 1, 2 * kMs, 2 * kMs),
      Event(0, ActionKind::kBackward, 0, 0, 5 * kMs, 7 * kMs),
      Event(0, ActionKind::kBackward, 0, 1, 7 * kMs, 9 * kMs),
      // Rank 1: F0 1.3-2.2 (its first action: waited 0.3 ms), B0 2.2-4.2;
      // F1 4.2-5.2 was sent at 2, while B0 ran: not counted; B1 5.2-7.
      Event(1, ActionKind::kForward, 1, 0, 1300000, 2200000),
      Event(1, ActionKind::kBackward, 1, 0, 2200000, 4200000),
      Event(1, ActionKind::kSendB, 1, 0, 4200000, 4200000),
      // (F1's RECV ends as B0 does: the message was there already.)
      Event(1, ActionKind::kRecvF, 1, 1, 2200000, 4200000),
      Event(1, ActionKind::kForward, 1, 1, 4200000, 5200000),
      Event(1, ActionKind::kBackward, 1, 1, 5200000, 7 * kMs),
      Event(1, ActionKind::kSendB, 1, 1, 7 * kMs, 7 * kMs),
  };
  const Timeline t = TwoRanks("hand", events);
  // B1 on rank 0 got its message at 7 as B0 ended at 7: sent no earlier
  // than the previous action's end, so it counts, at 0 ms.
  const std::vector<double> waited = WaitedMessageMs(t);
  REQUIRE(waited.size() == 3);
  CHECK(waited[0] == Approx(0.0).margin(1e-12));
  CHECK(waited[1] == Approx(0.3));
  CHECK(waited[2] == Approx(0.8));
  const CostModel back = MeasuredCostModel(t, "hand.json");
  CHECK(back.TransferTime(1, 0, 0) == 300000);  // the median of three
  CHECK(back.ComputeTime({ActionKind::kForward, 0, 0}) == 1 * kMs);
  CHECK(back.ComputeTime({ActionKind::kBackward, 1, 0}) == 1900000);  // (2 + 1.8) / 2
}

TEST_CASE(
    "measured costs: a message that came while its receiver worked is a bound, or exact if the receiver "
    "waited for it after",
    "[measured_costs]") {
  // Rank 1 runs F0 (0-2.2) and B0 (2.2-4.2) while F1's activations are on
  // their way (sent at 2). Its usual gap between actions is 0.02 ms (F0 to
  // B0, F1 to B1), so a start 0.52 ms after B0's end waited for the
  // message: exact, 2.72 ms. Started at once, the message was there: it
  // took at most 2.22 ms.
  auto run = [](TimeNs f1_start) {
    return TwoRanks("late", {
                                Event(0, ActionKind::kForward, 0, 1, 1 * kMs, 2 * kMs),
                                Event(0, ActionKind::kSendF, 0, 1, 2 * kMs, 2 * kMs),
                                Event(1, ActionKind::kForward, 1, 0, 0, 2200000),
                                Event(1, ActionKind::kBackward, 1, 0, 2220000, 4200000),
                                Event(1, ActionKind::kForward, 1, 1, f1_start, f1_start + kMs),
                                Event(1, ActionKind::kBackward, 1, 1, f1_start + kMs + 20000, f1_start + 3 * kMs),
                            });
  };
  const std::vector<WaitedMessage> late = WaitedMessages(run(4720000));
  REQUIRE(late.size() == 1);
  CHECK(late[0].seen == WaitedMessage::Seen::kLate);
  CHECK(late[0].ms == Approx(2.72));
  const std::vector<WaitedMessage> early = WaitedMessages(run(4220000));
  REQUIRE(early.size() == 1);
  CHECK(early[0].seen == WaitedMessage::Seen::kEarly);
  CHECK(early[0].ms == Approx(2.22));
  CHECK(WaitedMessageMs(run(4220000)).empty());  // no exact time
  CHECK_FALSE(CensoredMedian(early).has_value());
  // A start within 3 times the rank's usual gap (0.06 ms) is the
  // executor's, not a wait.
  CHECK(WaitedMessages(run(4240000))[0].seen == WaitedMessage::Seen::kEarly);
  CHECK(LateGapMs({10000, 10000, 400000}) == Approx(kMinLateGapMs));
  CHECK(LateGapMs({100000, 200000, 300000}) == Approx(0.6));
}

TEST_CASE("measured costs: the median weighs in the bounds of messages that came before they were needed",
          "[measured_costs]") {
  using Seen = WaitedMessage::Seen;
  auto exact = [](double ms) { return WaitedMessage{0, 1, ms, Seen::kIdle}; };
  auto bound = [](double ms) { return WaitedMessage{0, 1, ms, Seen::kEarly}; };
  // Exact times alone: the upper median.
  CHECK(*CensoredMedian({exact(3), exact(1), exact(2)}) == 2);
  CHECK(*CensoredMedian({exact(4), exact(1), exact(3), exact(2)}) == 3);
  // Bounds above every exact time change nothing.
  CHECK(*CensoredMedian({exact(1), exact(2), exact(3), bound(10)}) == 2);
  // Two messages known to have taken at most 1.5 ms: from 3 ms down, the
  // share at most 3 is 1, at most 2 is 1 - 1/5 = 0.8, at most 1 is 0.8 (1 -
  // 1/4) = 0.6, above one half: the median is 1 ms.
  CHECK(*CensoredMedian({exact(1), exact(2), exact(3), bound(1.5), bound(1.5)}) == 1);
  // A late arrival is exact, as an idle receiver's is.
  CHECK(*CensoredMedian({WaitedMessage{0, 1, 5, Seen::kLate}, bound(6)}) == 5);
  // Per direction: 3 exact times at least, and the bounds beside them.
  const std::vector<WaitedMessage> both = {exact(1),   exact(2),   exact(3),
                                           bound(1.5), bound(1.5), WaitedMessage{1, 0, 9, Seen::kIdle}};
  const std::vector<LinkWaits> links = WaitedByLink(both);
  REQUIRE(links.size() == 1);
  CHECK(links[0].count == 3);
  CHECK(links[0].early == 2);
  CHECK(links[0].median_ms == 1);
}

TEST_CASE("measured costs: each direction between two ranks gets its own latency when it has samples enough",
          "[measured_costs]") {
  // 1F1B, K=2, M=8: F 1 ms, B 2 ms; activations take 1 ms to rank 1, the
  // gradients 0.3 ms back.
  StageCost c;
  c.forward = 1 * kMs;
  c.backward = 2 * kMs;
  CostModel costs = CostModel::Uniform(2, c, Link{kMs, 0});
  costs.SetLinkOverride(1, 0, Link{300000, 0});
  const Schedule plan = Lower(Generate1F1B(2, 8));
  const SimResult run = Simulate(plan, costs);
  const std::vector<WaitedMessage> waited = WaitedMessages(run.timeline);
  const std::vector<LinkWaits> links = WaitedByLink(waited);
  REQUIRE(links.size() == 2);
  CHECK(links[0].from == 0);
  CHECK(links[0].median_ms == Approx(1.0));
  CHECK(links[1].from == 1);
  CHECK(links[1].median_ms == Approx(0.3));
  for (const LinkWaits& l : links) CHECK(l.count >= kMinLinkSamples);
  // The cost model read off the run holds both, and gives its step back.
  const CostModel back = MeasuredCostModel(run.timeline, "run.json");
  CHECK(back.TransferTime(0, 1, 0) == kMs);
  CHECK(back.TransferTime(1, 0, 0) == 300000);
  CHECK(Simulate(plan, back).makespan == run.makespan);
  // A direction with fewer samples than kMinLinkSamples keeps the link.
  std::vector<WaitedMessage> few;
  size_t back_samples = 0;
  for (const WaitedMessage& w : waited) {
    if (w.from == 1 && ++back_samples >= kMinLinkSamples) continue;
    few.push_back(w);
  }
  REQUIRE(WaitedByLink(few).size() == 1);
  CHECK(WaitedByLink(few)[0].from == 0);
}

TEST_CASE("measured costs: clocks that disagree across ranks give no negative latency", "[measured_costs]") {
  // Rank 1's clock runs 0.4 ms behind rank 0's: its F0 seems to start
  // before rank 0 sent it.
  const std::vector<TimelineEvent> events = {
      // Rank 0: F0 0-1, sent at 1; B0 4-6.
      Event(0, ActionKind::kForward, 0, 0, 0, 1 * kMs),
      Event(0, ActionKind::kSendF, 0, 0, 1 * kMs, 1 * kMs),
      Event(0, ActionKind::kBackward, 0, 0, 4 * kMs, 6 * kMs),
      // Rank 1: F0 0.6-1.6, B0 1.6-3.6, sent at 3.6.
      Event(1, ActionKind::kForward, 1, 0, 600000, 1600000),
      Event(1, ActionKind::kBackward, 1, 0, 1600000, 3600000),
      Event(1, ActionKind::kSendB, 1, 0, 3600000, 3600000),
  };
  Timeline t = TwoRanks("skewed", events);
  const std::vector<double> waited = WaitedMessageMs(t);
  REQUIRE(waited.size() == 2);
  CHECK(waited[0] == Approx(-0.4));
  CHECK(waited[1] == Approx(0.4));
  // The median (of two, the upper) is 0.4; alone, the negative one is 0.
  CHECK(MeasuredCostModel(t, "skewed.json").TransferTime(0, 1, 0) == 400000);
  t.events.pop_back();  // rank 1's SEND_B: only F0's message left
  REQUIRE(WaitedMessageMs(t).size() == 1);
  CHECK(MeasuredCostModel(t, "skewed.json").TransferTime(0, 1, 0) == 0);
}

TEST_CASE("measured costs: the step's work comes back from its step events, and so does the step time",
          "[measured_costs]") {
  // 1F1B, K=2, M=4, tied ends swapped in 0.2 ms, the loss's all-reduce
  // 0.3 ms, clipping 0.1 ms and the optimizer 0.5 ms.
  StageCost c;
  c.forward = 1 * kMs;
  c.backward = 2 * kMs;
  CostModel costs = CostModel::Uniform(2, c, Link{kMs / 2, 0});
  StepCosts step;
  step.tied_exchange = kMs / 5;
  step.loss_allreduce = 3 * kMs / 10;
  step.clip = kMs / 10;
  step.optimizer = kMs / 2;
  costs.SetStep(step);
  const Schedule plan = Lower(Generate1F1B(2, 4));
  const SimResult run = Simulate(plan, costs);
  REQUIRE_FALSE(run.timeline.step_events.empty());
  const CostModel back = MeasuredCostModel(run.timeline, "run.json");
  CHECK(back.Step().tied_exchange == step.tied_exchange);
  CHECK(back.Step().loss_allreduce == step.loss_allreduce);
  CHECK(back.Step().norm_allreduce == 0);
  CHECK(back.Step().clip == step.clip);
  CHECK(back.Step().optimizer == step.optimizer);
  CHECK(Simulate(plan, back).makespan == run.makespan);
}

TEST_CASE("measured costs: a collective's time is the rank that waited least, a rank's own work the slowest's",
          "[measured_costs]") {
  Timeline t = TwoRanks(
      "1f1b", {Event(0, ActionKind::kForward, 0, 0, 0, kMs), Event(1, ActionKind::kForward, 1, 0, kMs, 2 * kMs),
               Event(1, ActionKind::kBackward, 1, 0, 2 * kMs, 4 * kMs),
               Event(0, ActionKind::kBackward, 0, 0, 4 * kMs, 6 * kMs)});
  // Rank 1 was done at 4 ms and waited in the all-reduce for rank 0 (done
  // at 6 ms): 2.4 ms there against rank 0's 0.4; the optimizer took 0.6 ms
  // on rank 0 and 0.9 on rank 1.
  t.step_events = {{0, "loss_allreduce", 6 * kMs, 6400000},
                   {0, "optimizer", 6400000, 7 * kMs},
                   {1, "loss_allreduce", 4 * kMs, 6400000},
                   {1, "optimizer", 6400000, 7300000}};
  const CostModel back = MeasuredCostModel(t, "measured.json");
  CHECK(back.Step().loss_allreduce == 400000);
  CHECK(back.Step().optimizer == 900000);
  CHECK(back.Step().clip == 0);
  // Without step events, no step work.
  t.step_events.clear();
  const StepCosts none = MeasuredCostModel(t, "measured.json").Step();
  CHECK(none.loss_allreduce + none.norm_allreduce + none.clip + none.optimizer + none.tied_exchange == 0);
}

}  // namespace pplab::measured_costs_test
