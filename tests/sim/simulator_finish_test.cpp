// The step's work after its actions (sim/simulator_finish.cc): clip, the
// optimizer and the all-reduces per rank, the tied embeddings' exchange and
// the exchange between two copies of the model.
#include <algorithm>
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "schedules/generators.h"
#include "schedules/lowering.h"
#include "sim/simulator.h"

namespace pplab::simulator_finish_test {
namespace {

// F = 1 us, B = 2 us.
StageCost OneTwo() {
  StageCost c;
  c.forward = 1000;
  c.backward = 2000;
  return c;
}

}  // namespace

TEST_CASE("per-step costs: clip and optimizer follow each rank's last action, all-reduces wait for every rank",
          "[sim][step]") {
  // GPipe K=2 M=2, F=1, B=2, free comms: rank 0 ends at 9, rank 1 at 7.
  const StageCost c = OneTwo();
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
  const StageCost c = OneTwo();
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

TEST_CASE("two copies of the model: each pair of ranks holding copies of each other's stages swaps their gradients",
          "[sim][step]") {
  const StageCost c = OneTwo();
  CostModel costs = CostModel::Uniform(8, c, Link{});
  // DualPipe K=4: rank r holds part r of copy 0 and part 3 - r of copy 1, so
  // ranks 0 and 3, and 1 and 2, hold each other's copies.
  const Schedule dual = Lower(Generate("dualpipe", {4, 8, 0}));
  const SimResult base = Simulate(dual, costs);
  std::vector<TimeNs> done(4, 0);
  for (const TimelineEvent& e : base.timeline.events) done[e.rank] = std::max(done[e.rank], e.end);
  StepCosts step;
  step.copy_exchange = 700;
  costs.SetStep(step);
  const SimResult r = Simulate(dual, costs);
  REQUIRE(r.timeline.step_events.size() == 4);
  for (const StepEvent& e : r.timeline.step_events) {
    CHECK(e.name == "copy_exchange");
    const RankId partner = 3 - e.rank;
    CHECK(e.start == std::max(done[e.rank], done[partner]));
    CHECK(e.end == e.start + 700);
  }
  CHECK(r.makespan == std::max(std::max(done[0], done[3]), std::max(done[1], done[2])) + 700);
  // Before the tied exchange and the all-reduces, which start after it.
  step.loss_allreduce = 100;
  costs.SetStep(step);
  const SimResult both = Simulate(dual, costs);
  CHECK(both.makespan == r.makespan + 100);
  // One pipeline has no copies: nothing to swap.
  CostModel one = CostModel::Uniform(4, c, Link{});
  StepCosts exchange;
  exchange.copy_exchange = 700;
  one.SetStep(exchange);
  for (const StepEvent& e : Simulate(Lower(Generate1F1B(4, 8)), one).timeline.step_events) {
    CHECK(e.name != "copy_exchange");
  }
  // The cost file carries it, and leaves it out when 0.
  CHECK(CostModel::FromJson(costs.ToJson(), "t").Step().copy_exchange == 700);
  CHECK(CostModel::Uniform(2, c, Link{}).ToJson().find("copy_exchange") == std::string::npos);
}

}  // namespace pplab::simulator_finish_test
