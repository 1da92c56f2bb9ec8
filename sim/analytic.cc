#include "sim/analytic.h"

#include <algorithm>

#include "schedules/error.h"
#include "schedules/generators.h"
#include "schedules/lowering.h"

namespace pplab {
namespace {

bool UniformStages(const CostModel& costs, int stages, bool split) {
  if (costs.NumStages() < stages || stages < 1) return false;
  const Action f0{ActionKind::kForward, 0, 0};
  for (StageId s = 1; s < stages; ++s) {
    const Action f{ActionKind::kForward, s, 0};
    if (costs.ComputeTime(f) != costs.ComputeTime(f0)) return false;
    for (ActionKind k : {ActionKind::kBackward, ActionKind::kBackwardInput, ActionKind::kBackwardWeight}) {
      if (!split && k != ActionKind::kBackward) continue;
      if (split && k == ActionKind::kBackward) continue;
      if (costs.ComputeTime({k, s, 0}) != costs.ComputeTime({k, 0, 0})) return false;
    }
  }
  return true;
}

// Equal times, up to the nanosecond that splitting a time by v stages, or a
// B into I and W, rounds (1/3 ms is 333 333 ns, its I and W 333 333 and
// 333 334).
bool Same(TimeNs a, TimeNs b) { return a - b <= 1 && b - a <= 1; }

// Whether `schedule` is what generator `name` emits for its K, M and v (a
// file may carry a family's name without its order).
bool IsGenerated(const Schedule& schedule, int v) {
  try {
    const Schedule generated = Generate(schedule.name, {schedule.ranks, schedule.microbatches, v});
    return generated.placement == schedule.placement && generated.programs == StripComm(schedule).programs;
  } catch (const Error&) {
    return false;  // not a generator's name, or options it refuses
  }
}

}  // namespace

const char* ConventionName(BubbleConvention c) { return c == BubbleConvention::kMakespan ? "makespan" : "span"; }

std::optional<AnalyticBubble> AnalyticBubbleFor(const Schedule& schedule, const CostModel& costs) {
  const double K = schedule.ranks, M = schedule.microbatches;
  const int v = schedule.StagesPerRank();
  const std::string& name = schedule.name;
  const bool split = name == "zb-h1" || name == "zb-h2" || name == "zb-v" || name == "interleaved-zb";
  if (v == 0 || !UniformStages(costs, schedule.stages, split)) return std::nullopt;
  // A step that costs nothing has no bubble to speak of.
  const Action f0{ActionKind::kForward, 0, 0};
  if (costs.ComputeTime(f0) + costs.ComputeTime({split ? ActionKind::kBackwardInput : ActionKind::kBackward, 0, 0}) +
          (split ? costs.ComputeTime({ActionKind::kBackwardWeight, 0, 0}) : 0) ==
      0) {
    return std::nullopt;
  }
  if (!IsGenerated(schedule, v)) return std::nullopt;
  if ((name == "gpipe" || name == "1f1b") && v == 1) {
    return AnalyticBubble{(K - 1) / (M + K - 1), BubbleConvention::kMakespan, "(K-1)/(M+K-1)"};
  }
  if (name == "interleaved-1f1b") {
    return AnalyticBubble{(K - 1) / (v * M + K - 1), BubbleConvention::kMakespan, "(K-1)/(v*M+K-1)"};
  }
  if (name == "looped-bfs") {
    const double slots = v * std::max(M, K) + std::min(M, K) - 1;
    return AnalyticBubble{1 - v * M / slots, BubbleConvention::kMakespan, "1 - v*M/(v*max(M,K)+min(M,K)-1)"};
  }
  if (name == "zb-v" && v == 2 && M >= 2 * K) {
    const TimeNs f = costs.ComputeTime({ActionKind::kForward, 0, 0});
    const TimeNs i = costs.ComputeTime({ActionKind::kBackwardInput, 0, 0});
    const TimeNs w = costs.ComputeTime({ActionKind::kBackwardWeight, 0, 0});
    if (Same(f, i) && Same(i, w)) return AnalyticBubble{0.0, BubbleConvention::kSpan, "0"};
    return std::nullopt;
  }
  if (name == "interleaved-zb" && M >= K) {
    // ZB-H1's bubble at 1/v of the stage time: every rank's own span holds
    // (K-1) stage-steps of T_F + T_I - T_W; measured here in stage times.
    const TimeNs f = costs.ComputeTime({ActionKind::kForward, 0, 0});
    const TimeNs i = costs.ComputeTime({ActionKind::kBackwardInput, 0, 0});
    const TimeNs w = costs.ComputeTime({ActionKind::kBackwardWeight, 0, 0});
    if (!Same(f, i) || !Same(i, w)) return std::nullopt;
    const double bubble = (K - 1) * static_cast<double>(f + i - w);
    return AnalyticBubble{bubble / (v * M * static_cast<double>(f + i + w) + bubble), BubbleConvention::kSpan,
                          "(K-1)(F+I-W) / (vM(F+I+W) + (K-1)(F+I-W))"};
  }
  if (split && v == 1) {
    const TimeNs f = costs.ComputeTime({ActionKind::kForward, 0, 0});
    const TimeNs i = costs.ComputeTime({ActionKind::kBackwardInput, 0, 0});
    const TimeNs w = costs.ComputeTime({ActionKind::kBackwardWeight, 0, 0});
    if (!Same(f, i) || !Same(i, w)) return std::nullopt;
    if (name == "zb-h1" && M >= K) {
      const double bubble = (K - 1) * static_cast<double>(f + i - w);
      return AnalyticBubble{bubble / (M * static_cast<double>(f + i + w) + bubble), BubbleConvention::kSpan,
                            "(K-1)(F+I-W) / (M(F+I+W) + (K-1)(F+I-W))"};
    }
    if (name == "zb-h2" && M >= 2 * K - 1) return AnalyticBubble{0.0, BubbleConvention::kSpan, "0"};
  }
  return std::nullopt;
}

}  // namespace pplab
