// The last step's timeline as one process gathers it (runtime/train/rank_timelines.h):
// every action, an overlapped F&B's backward part included, comes back on
// rank 0 with the step shifted to start at 0.
#include "runtime/train/rank_timelines.h"

#include <catch2/catch.hpp>

#include "schedules/generators.h"

namespace pplab {

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
  GatherLastStep(schedule, 0, nullptr, options, 1, events, 4096, summary);
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
}

}  // namespace pplab
