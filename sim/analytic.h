// Closed-form bubble fractions of the schedule families, each in the
// convention of the paper it comes from.
#pragma once

#include <optional>
#include <string>

#include "schedules/schedule.h"
#include "sim/cost_model.h"

namespace pplab {

enum class BubbleConvention {
  kMakespan,  // 1 - sum(busy) / (K * makespan): GPipe, Megatron
  kSpan,      // worst rank's idle share of its own span: Zero Bubble paper
};

const char* ConventionName(BubbleConvention c);  // "makespan" / "span"

struct AnalyticBubble {
  double fraction = 0;
  BubbleConvention convention = BubbleConvention::kMakespan;
  std::string formula;  // e.g. "(K-1)/(M+K-1)"
};

// The family's closed form for `schedule` (recognised by its generator name)
// under `costs`, or std::nullopt when the family has none or its conditions
// do not hold. All forms assume every stage costs the same and communication
// is free:
//   gpipe, 1f1b:      (K-1)/(M+K-1)                         makespan
//   interleaved-1f1b: (K-1)/(vM+K-1)                        makespan
//   looped-bfs:       1 - vM/(v max(M,K) + min(M,K) - 1)    makespan
//   zb-h1 (M >= K, T_F = T_I = T_W):
//       (K-1)(T_F+T_I-T_W) / (M(T_F+T_I+T_W) + (K-1)(T_F+T_I-T_W))   span
//   zb-h2 (M >= 2K-1, T_F = T_I = T_W): 0                   span
//   zb-v (M >= 2K, T_F = T_I = T_W per stage): 0            span
//   interleaved-zb (M >= K, T_F = T_I = T_W per stage, so per stage times):
//       (K-1)(T_F+T_I-T_W) / (vM(T_F+T_I+T_W) + (K-1)(T_F+T_I-T_W))  span
//   dualpipev: no closed form is claimed (see docs/schedule-format.md)
std::optional<AnalyticBubble> AnalyticBubbleFor(const Schedule& schedule, const CostModel& costs);

}  // namespace pplab
