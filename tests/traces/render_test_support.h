// What the render tests share (render_svg_test.cpp, render_memory_test.cpp,
// render_text_test.cpp): a hand-made 1F1B timeline, with and without the
// bytes it holds, a simulated one, and a substring count.
#pragma once

#include <string>

#include "schedules/action_kinds.h"
#include "schedules/schedule.h"
#include "sim/simulator.h"

namespace pplab {

inline TimelineEvent Event(RankId rank, ActionKind kind, StageId stage, MicrobatchId mb, double start_ms,
                           double end_ms) {
  return TimelineEvent{rank, Action{kind, stage, mb}, MsToNs(start_ms), MsToNs(end_ms)};
}

// 1F1B on 2 ranks with 2 microbatches, F = 1 ms and B = 2 ms, free comms.
// Makespan 9 ms; busy 6 ms per rank, so bubble = 1 - 12 / (2 * 9) = 33.3%.
inline Timeline Tiny1F1B() {
  Timeline t;
  t.name = "tiny";
  t.source = "simulated";
  t.ranks = 2;
  const ActionKind F = ActionKind::kForward;
  const ActionKind B = ActionKind::kBackward;
  t.events = {Event(0, F, 0, 0, 0, 1), Event(0, F, 0, 1, 1, 2), Event(0, B, 0, 0, 4, 6), Event(0, B, 0, 1, 7, 9),
              Event(1, F, 1, 0, 1, 2), Event(1, B, 1, 0, 2, 4), Event(1, F, 1, 1, 4, 5), Event(1, B, 1, 1, 5, 7)};
  return t;
}

// Tiny1F1B with the bytes each rank holds: rank 0 peaks at 2 MB (at 2 ms),
// rank 1 at 1 MB (first at 2 ms, again at 5 ms).
inline Timeline TinyWithMemory() {
  Timeline t = Tiny1F1B();
  t.memory = {{0, MsToNs(1), 1000000}, {0, MsToNs(2), 2000000}, {1, MsToNs(2), 1000000}, {1, MsToNs(4), 0},
              {0, MsToNs(6), 1000000}, {1, MsToNs(5), 1000000}, {1, MsToNs(7), 0},       {0, MsToNs(9), 0}};
  return t;
}

inline size_t CountOf(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t pos = text.find(needle); pos != std::string::npos; pos = text.find(needle, pos + 1)) ++n;
  return n;
}

// A timeline of `s` simulated with F 1 ms, B 2 ms and W 0.8 ms per stage.
inline Timeline Simulated(const Schedule& s) {
  StageCost c;
  c.forward = MsToNs(1);
  c.backward = MsToNs(2);
  c.backward_weight = MsToNs(0.8);
  return Simulate(s, CostModel::Uniform(s.stages, c, {})).timeline;
}

}  // namespace pplab
