#include "traces/diff.h"

#include <catch2/catch.hpp>
#include <map>
#include <string>

#include "schedules/error.h"
#include "schedules/generators.h"
#include "schedules/lowering.h"
#include "sim/simulator.h"

namespace pplab::diff_test {
namespace {

// Simulated timeline of `name` with F = 1 ms and B = 2 ms per stage, free comms.
Timeline Simulated(const std::string& name, int ranks, int microbatches) {
  const Schedule s = Lower(Generate(name, {ranks, microbatches, 0}));
  StageCost c;
  c.forward = MsToNs(1);
  c.backward = MsToNs(2);
  return Simulate(s, CostModel::Uniform(s.stages, c, Link{})).timeline;
}

size_t CountComm(const Timeline& t) {
  size_t n = 0;
  for (const TimelineEvent& e : t.events) n += IsComm(e.action.kind);
  return n;
}

}  // namespace

TEST_CASE("diff of a trace with itself has no deviation and no drift", "[diff]") {
  const Timeline t = Simulated("1f1b", 2, 4);
  const TimelineDiff d = DiffTimelines(t, t, {});
  CHECK(d.matched_compute == 2 * 4 * 2);  // K ranks x M microbatches x (F, B)
  CHECK(d.only_predicted == 0);
  CHECK(d.only_measured == 0);
  CHECK(d.predicted.makespan == MsToNs(15));  // (M+K-1)(f+b)
  CHECK(d.measured.makespan == d.predicted.makespan);
  CHECK(d.threshold == MsToNs(15) / 20);  // 5% of the predicted makespan
  CHECK_FALSE(d.first_drift);
  REQUIRE(d.top_start.size() == 10);
  for (const ActionDeviation& a : d.top_start) CHECK(a.StartDelta() == 0);
  for (const ActionDeviation& a : d.top_duration) CHECK(a.DurationDelta() == 0);
}

namespace {

// `t` with every action and step event `ms` later.
Timeline Later(const Timeline& t, double ms) {
  Timeline out = t;
  for (TimelineEvent& e : out.events) {
    e.start += MsToNs(ms);
    e.end += MsToNs(ms);
  }
  for (StepEvent& e : out.step_events) {
    e.start += MsToNs(ms);
    e.end += MsToNs(ms);
  }
  return out;
}

}  // namespace

TEST_CASE("diff shifts both timelines so their first compute starts at 0", "[diff]") {
  const Timeline t = Simulated("gpipe", 2, 3);
  const TimelineDiff d = DiffTimelines(t, Later(t, 100), {});
  CHECK(d.measured.makespan == d.predicted.makespan);
  CHECK_FALSE(d.first_drift);
  CHECK(d.top_start.front().StartDelta() == 0);
}

TEST_CASE("diff's step times run from the step's start, its actions are compared from the first compute", "[diff]") {
  // A measured step that posts a receive at 0 and starts its first compute
  // 0.5 ms later: that launch is the step's too, as stats reads it.
  const Timeline t = Simulated("gpipe", 2, 3);
  Timeline measured = Later(t, 0.5);
  TimelineEvent posted;
  posted.rank = 1;
  posted.action = {ActionKind::kRecvF, 1, 0};
  posted.start = 0;
  posted.end = MsToNs(1.5);
  measured.events.push_back(posted);
  const TimelineDiff d = DiffTimelines(t, measured, {});
  CHECK(d.measured.makespan == t.Makespan() + MsToNs(0.5));
  CHECK(d.predicted.makespan == t.Makespan());
  CHECK(d.top_start.front().StartDelta() == 0);  // the actions line up
  CHECK_FALSE(d.first_drift);
}

TEST_CASE("diff shifts the step events (optimizer, all-reduces) with the actions", "[diff]") {
  Timeline t = Simulated("gpipe", 2, 3);
  REQUIRE(t.Makespan() == MsToNs(12));  // (M+K-1)(f+b)
  for (RankId r = 0; r < 2; ++r) t.step_events.push_back({r, "optimizer", MsToNs(12), MsToNs(14)});
  const TimelineDiff d = DiffTimelines(t, Later(t, 100), {});
  CHECK(d.predicted.makespan == MsToNs(14));  // the step ends with the optimizer
  CHECK(d.measured.makespan == MsToNs(14));
}

TEST_CASE("diff names the shifted action as the first drift with its delta", "[diff]") {
  const Timeline t = Simulated("1f1b", 2, 4);
  // Delay rank 1's third compute action by 3 ms, and everything after it on rank 1.
  Timeline measured = t;
  int compute_seen = 0;
  bool shifting = false;
  Action delayed;
  TimeNs delayed_start = 0;
  for (TimelineEvent& e : measured.events) {
    if (e.rank != 1) continue;
    if (!shifting && IsCompute(e.action.kind) && ++compute_seen == 3) {
      shifting = true;
      delayed = e.action;
      delayed_start = e.start;
    }
    if (shifting) {
      e.start += MsToNs(3);
      e.end += MsToNs(3);
    }
  }
  REQUIRE(shifting);
  const TimelineDiff d = DiffTimelines(t, measured, {});
  REQUIRE(d.first_drift);
  CHECK(d.first_drift->rank == 1);
  CHECK(d.first_drift->action == delayed);
  CHECK(d.first_drift->predicted_start == delayed_start);
  CHECK(d.first_drift->StartDelta() == MsToNs(3));
  CHECK(d.top_start.front().StartDelta() == MsToNs(3));
  CHECK(d.top_duration.front().DurationDelta() == 0);  // shifted, not stretched
  // A threshold above the shift sees no drift.
  DiffOptions loose;
  loose.threshold = MsToNs(3);
  CHECK_FALSE(DiffTimelines(t, measured, loose).first_drift);
}

TEST_CASE("diff counts SEND/RECV present on one side only", "[diff]") {
  const Timeline t = Simulated("1f1b", 2, 4);
  Timeline compute_only = t;
  compute_only.events.clear();
  for (const TimelineEvent& e : t.events) {
    if (IsCompute(e.action.kind)) compute_only.events.push_back(e);
  }
  const TimelineDiff d = DiffTimelines(t, compute_only, {});
  CHECK(d.only_predicted == CountComm(t));
  CHECK(d.only_predicted == 2 * 4 * 2);  // one SEND and one RECV per message, M messages each way
  CHECK(d.only_measured == 0);
  CHECK(d.matched_compute == 16);
  // By kind: M of each of the four, one per microbatch and direction.
  using Counts = std::map<std::string, size_t>;
  CHECK(d.only_predicted_kinds == Counts{{"RECV_B", 4}, {"RECV_F", 4}, {"SEND_B", 4}, {"SEND_F", 4}});
  CHECK(d.only_measured_kinds.empty());
}

TEST_CASE("diff counts a collective on one side only by its kind, not as a SEND/RECV", "[diff]") {
  const Timeline t = Simulated("1f1b", 2, 4);
  Timeline reduced = t;
  // A data-parallel simulation's REDUCE_GRAD, one per stage, after the step.
  for (StageId s = 0; s < 2; ++s) {
    Action a;
    a.kind = ActionKind::kReduceGrad;
    a.stage = s;
    reduced.events.push_back({s, a, reduced.events.back().end, reduced.events.back().end + 1000});
  }
  const TimelineDiff d = DiffTimelines(t, reduced, {});
  CHECK(d.only_measured == 2);
  CHECK(d.only_measured_kinds == std::map<std::string, size_t>{{"REDUCE_GRAD", 2}});
  CHECK(d.only_predicted == 0);
}

TEST_CASE("diff refuses timelines of different plans", "[diff]") {
  const Timeline a = Simulated("1f1b", 2, 4);
  CHECK_THROWS_WITH(DiffTimelines(a, Simulated("zb-h1", 2, 4), {}, "sim.json", "real.json"),
                    Catch::Contains("sim.json and real.json do not run the same compute actions") &&
                        Catch::Contains("rank 0 0B0") && Catch::Contains("only in real.json, e.g. rank 0 0I0"));
  CHECK_THROWS_WITH(DiffTimelines(a, Simulated("1f1b", 4, 4), {}, "sim.json", "real.json"),
                    Catch::Contains("sim.json has 2 ranks but real.json has 4"));
  Timeline empty = a;
  empty.events.clear();
  CHECK_THROWS_WITH(DiffTimelines(a, empty, {}, "sim.json", "real.json"),
                    Catch::Contains("real.json has no compute action"));
}

TEST_CASE("diff takes each rank's largest held bytes on each side, none where a side has no sample", "[diff]") {
  Timeline predicted = Simulated("1f1b", 2, 4);
  Timeline measured = predicted;
  measured.source = "measured";
  predicted.memory = {{0, 0, 100}, {0, 10, 300}, {0, 20, 0}, {1, 5, 50}};
  measured.memory = {{0, 3, 330}, {0, 9, 10}};
  const TimelineDiff d = DiffTimelines(predicted, measured, {});
  REQUIRE(d.predicted_held.size() == 2);
  REQUIRE(d.measured_held.size() == 2);
  CHECK(d.predicted_held[0] == std::optional<Bytes>(300));
  CHECK(d.predicted_held[1] == std::optional<Bytes>(50));
  CHECK(d.measured_held[0] == std::optional<Bytes>(330));
  CHECK_FALSE(d.measured_held[1].has_value());
  // A sample below 0 (a step that freed more than it made) is still the largest when it is the only one.
  measured.memory = {{1, 0, -20}};
  CHECK(LargestHeldBytes(measured)[1] == std::optional<Bytes>(-20));
  CHECK_FALSE(LargestHeldBytes(measured)[0].has_value());
}

}  // namespace pplab::diff_test
