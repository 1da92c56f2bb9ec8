// The last step's timeline as one process gathers it (runtime/train/rank_timelines.h):
// every action, an overlapped F&B's backward part included, comes back on
// rank 0 with the step shifted to start at 0.
#include "runtime/train/rank_timelines.h"

#include <catch2/catch.hpp>

#include "schedules/generators.h"

namespace pplab::rank_timelines_test {

TEST_CASE("the last step's events come back on rank 0, every field, shifted to start at 0", "[trainer]") {
  const Schedule schedule = GenerateGPipe(1, 2);
  Action overlap{ActionKind::kOverlapFB, 0, 1};
  overlap.overlap_kind = ActionKind::kBackwardInput;
  overlap.overlap_stage = 0;
  overlap.overlap_microbatch = 0;
  const std::vector<TimelineEvent> events = {
      {0, Action{ActionKind::kForward, 0, 0}, 5000, 7000},
      {0, overlap, 7500, 9100},
      {0, Action{ActionKind::kBackward, 0, 1}, 9100, 12000},
  };
  TrainerOptions options;
  TrainSummary summary;
  GatherLastStep(schedule, 0, nullptr, options, 1, events, {}, {}, 4096, summary);
  const Timeline& t = summary.last_step;
  CHECK(t.name == schedule.name);
  CHECK(t.source == "measured");
  CHECK(t.ranks == 1);
  REQUIRE(t.events.size() == events.size());
  for (size_t i = 0; i < events.size(); ++i) {
    INFO("event " << i);
    CHECK(t.events[i].rank == 0);
    CHECK(t.events[i].action == events[i].action);
    CHECK(t.events[i].start == events[i].start - 5000);
    CHECK(t.events[i].end == events[i].end - 5000);
  }
  CHECK(t.events[1].action.overlap_kind == ActionKind::kBackwardInput);
  CHECK(t.events[1].action.overlap_microbatch == 0);
  CHECK(summary.peak_activation_bytes.empty());  // peaks only with a memory meter
  CHECK(t.memory.empty());
  CHECK(t.step_events.empty());  // none timed
}

TEST_CASE("the bytes held after each action come back as the rank's memory samples, at the actions' ends",
          "[trainer]") {
  const Schedule schedule = GenerateGPipe(1, 2);
  const std::vector<TimelineEvent> events = {
      {0, Action{ActionKind::kForward, 0, 0}, 5000, 7000},
      {0, Action{ActionKind::kRecvB, 0, 0}, 6000, 6000},  // none measured: its buffer arrives meanwhile
      {0, Action{ActionKind::kForward, 0, 1}, 7000, 9000},
      {0, Action{ActionKind::kBackward, 0, 0}, 9000, 12000},
  };
  TrainerOptions options;
  TrainSummary summary;
  GatherLastStep(schedule, 0, nullptr, options, 1, events, {100, std::nullopt, 200, -20}, {}, 4096, summary);
  const std::vector<MemorySample>& m = summary.last_step.memory;
  REQUIRE(m.size() == 3);
  CHECK((m[0].rank == 0 && m[0].time == 2000 && m[0].bytes == 100));
  CHECK((m[1].time == 4000 && m[1].bytes == 200));
  CHECK((m[2].time == 7000 && m[2].bytes == -20));  // the step freed more than it made
}

TEST_CASE("the step's work after the actions comes back as the rank's step events, shifted with the actions",
          "[trainer]") {
  const Schedule schedule = GenerateGPipe(1, 1);
  const std::vector<TimelineEvent> events = {{0, Action{ActionKind::kForward, 0, 0}, 5000, 7000},
                                             {0, Action{ActionKind::kBackward, 0, 0}, 7000, 11000}};
  const std::vector<StepEvent> steps = {{0, "tied_exchange", 11000, 11500},
                                        {0, "loss_allreduce", 11500, 13000},
                                        {0, "no_such_work", 13000, 13100},  // not in the trace format: dropped
                                        {0, "clip", 13100, 13200},
                                        {0, "optimizer", 13200, 16000}};
  TrainerOptions options;
  TrainSummary summary;
  GatherLastStep(schedule, 0, nullptr, options, 1, events, {}, steps, 0, summary);
  const Timeline& t = summary.last_step;
  REQUIRE(t.step_events.size() == 4);
  const char* names[] = {"tied_exchange", "loss_allreduce", "clip", "optimizer"};
  const TimeNs starts[] = {6000, 6500, 8100, 8200}, ends[] = {6500, 8000, 8200, 11000};
  for (size_t i = 0; i < 4; ++i) {
    INFO("step event " << i);
    CHECK(t.step_events[i].rank == 0);
    CHECK(t.step_events[i].name == names[i]);
    CHECK(t.step_events[i].start == starts[i]);
    CHECK(t.step_events[i].end == ends[i]);
  }
  CHECK(t.Makespan() == 11000);  // the step's time: its work after the actions included
}

}  // namespace pplab::rank_timelines_test
