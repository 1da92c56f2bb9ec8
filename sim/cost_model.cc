#include "sim/cost_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "schedules/action_kinds.h"
#include "schedules/error.h"

namespace pplab {

using nlohmann::json;

CostModel CostModel::Uniform(int stages, const StageCost& stage, const Link& link) {
  CostModel m;
  m.stages_.assign(stages, stage);
  m.link_ = link;
  return m;
}

CostModel CostModel::FromStages(std::vector<StageCost> stages, const Link& link) {
  CostModel m;
  m.stages_ = std::move(stages);
  m.link_ = link;
  return m;
}

const StageCost& CostModel::Stage(StageId stage) const {
  if (stage < 0 || stage >= NumStages()) {
    throw Error("cost model has " + std::to_string(NumStages()) + " stages, no stage " + std::to_string(stage));
  }
  return stages_[stage];
}

void CostModel::SetStage(StageId stage, const StageCost& cost) {
  Stage(stage);  // throws for a stage the model does not have
  stages_[stage] = cost;
}

TimeNs CostModel::ComputeTime(const Action& action) const {
  const StageCost& c = Stage(action.stage);
  auto need = [&](const std::optional<TimeNs>& t, const char* what) {
    if (!t) {
      throw Error(origin_ + ": stage " + std::to_string(action.stage) + " has no " + std::string(what) + "_ms, which " +
                  FormatAction(action) + " needs");
    }
    return *t;
  };
  switch (action.kind) {
    case ActionKind::kOverlapFB: {
      // DualPipe's F&B: the two parts share the rank, so the pair takes the
      // longer of the two plus what running them together costs (or both,
      // one after the other, where the runtime runs them in turn), unless a
      // measured pair time is given.
      if (c.forward_backward) return *c.forward_backward;
      const ComputeParts parts = PartsOf(action);
      const TimeNs f = ComputeTime(parts.part[0]), b = ComputeTime(parts.part[1]);
      return (pairs_in_turn_ ? f + b : std::max(f, b)) + c.overlap_penalty;
    }
    case ActionKind::kForward:
      return need(c.forward, "forward");
    case ActionKind::kBackward:
      if (c.backward) return *c.backward;
      return need(c.backward_input, "backward_input") + need(c.backward_weight, "backward_weight");
    case ActionKind::kBackwardInput:
      if (c.backward_input) return *c.backward_input;
      if (c.backward_weight) return std::max<TimeNs>(0, need(c.backward, "backward") - *c.backward_weight);
      return need(c.backward, "backward") / 2;
    case ActionKind::kBackwardWeight:
      if (c.backward_weight) return *c.backward_weight;
      if (c.backward_input) return std::max<TimeNs>(0, need(c.backward, "backward") - *c.backward_input);
      return need(c.backward, "backward") - need(c.backward, "backward") / 2;
    default:
      return 0;
  }
}

std::optional<Spread> CostModel::SpreadOf(const Action& action) const {
  const StageCost& c = Stage(action.stage);
  switch (action.kind) {
    case ActionKind::kForward:
      return c.forward_spread;
    case ActionKind::kBackward:
      if (c.backward_spread || c.backward) return c.backward_spread;
      // B as I + W: the parts' spreads added.
      if (c.backward_input_spread && c.backward_weight_spread) {
        return Spread{c.backward_input_spread->p10 + c.backward_weight_spread->p10,
                      c.backward_input_spread->p90 + c.backward_weight_spread->p90};
      }
      return std::nullopt;
    case ActionKind::kBackwardInput:
    case ActionKind::kBackwardWeight: {
      const std::optional<Spread>& own =
          action.kind == ActionKind::kBackwardInput ? c.backward_input_spread : c.backward_weight_spread;
      if (own || !c.backward || !c.backward_spread || *c.backward <= 0) return own;
      // A part of a measured B (a zero-bubble plan costed from a profile of
      // whole B's): B's spread scaled by the part's share of it, so the
      // plan's step varies as the 1F1B plan's of the same file does.
      const double share = static_cast<double>(ComputeTime(action)) / static_cast<double>(*c.backward);
      return Spread{static_cast<TimeNs>(std::llround(static_cast<double>(c.backward_spread->p10) * share)),
                    static_cast<TimeNs>(std::llround(static_cast<double>(c.backward_spread->p90) * share))};
    }
    case ActionKind::kReduceGrad:
      if (c.reduce_grad) return c.reduce_grad_spread;
      return std::nullopt;
    default:
      return std::nullopt;
  }
}

bool CostModel::HasSpread() const {
  for (const StageCost& c : stages_) {
    if (c.forward_spread || c.backward_spread || c.backward_input_spread || c.backward_weight_spread ||
        (c.reduce_grad && c.reduce_grad_spread)) {
      return true;
    }
  }
  return step_.optimizer_spread || step_.clip_spread || step_.loss_allreduce_spread || step_.norm_allreduce_spread ||
         step_.tied_exchange_spread || step_.copy_exchange_spread;
}

bool CostModel::Graphed() const {
  return std::any_of(stages_.begin(), stages_.end(), [](const StageCost& c) { return c.graph_slot_bytes.has_value(); });
}

TimeNs DrawFromSpread(TimeNs median, const Spread& sp, double u) {
  // Each half is uniform: 0.4 of the mass lies between the median and p10
  // (or p90), so the half spans 1.25 times that distance.
  const double m = static_cast<double>(median);
  const double width = static_cast<double>(u < 0.5 ? median - sp.p10 : sp.p90 - median);
  const double t = m + (std::clamp(u, 0.0, 1.0) - 0.5) / 0.4 * width;
  return std::max<TimeNs>(0, std::llround(t));
}

TimeNs CostModel::SampleComputeTime(const Action& action, double u) const {
  const TimeNs median = ComputeTime(action);
  if (!IsCompute(action.kind) || action.kind == ActionKind::kOverlapFB) return median;
  const std::optional<Spread> sp = SpreadOf(action);
  if (!sp) return median;
  if (sp->p10 > median || median > sp->p90) {
    const std::string kind = action.kind == ActionKind::kForward         ? "forward"
                             : action.kind == ActionKind::kBackward      ? "backward"
                             : action.kind == ActionKind::kBackwardInput ? "backward_input"
                                                                         : "backward_weight";
    throw Error(origin_ + ": stage " + std::to_string(action.stage) + ": " + kind + "_p10_ms <= the " + kind +
                " time <= " + kind + "_p90_ms must hold, got " + json(NsToMs(sp->p10)).dump() + ", " +
                json(NsToMs(median)).dump() + ", " + json(NsToMs(sp->p90)).dump());
  }
  return DrawFromSpread(median, *sp, u);
}

TimeNs CostModel::SampleCollectiveTime(const Action& action, double u) const {
  const TimeNs median = CollectiveTime(action);
  const std::optional<Spread> sp =
      action.kind == ActionKind::kReduceGrad && dp_.degree > 1 ? SpreadOf(action) : std::nullopt;
  return sp ? DrawFromSpread(median, *sp, u) : median;
}

namespace {

// A ring collective over `dp` that moves `share` of `bytes` through every link.
TimeNs RingTime(double share, Bytes bytes, const DataParallel& dp) {
  const double moved = share * static_cast<double>(bytes);
  TimeNs t = dp.link.latency;
  if (dp.link.bandwidth_gbps > 0 && moved > 0) t += static_cast<TimeNs>(std::llround(moved / dp.link.bandwidth_gbps));
  return t;
}

}  // namespace

TimeNs RingAllReduceTime(Bytes bytes, const DataParallel& dp) {
  if (dp.degree <= 1) return 0;
  return RingTime(2.0 * (dp.degree - 1) / dp.degree, bytes, dp);
}

TimeNs RingAllGatherTime(Bytes bytes, const DataParallel& dp) {
  if (dp.degree <= 1) return 0;
  return RingTime(static_cast<double>(dp.degree - 1) / dp.degree, bytes, dp);
}

TimeNs CostModel::CollectiveTime(const Action& action) const {
  const KindCost rule = InfoOf(action.kind).cost;
  if (dp_.degree <= 1 || (rule != KindCost::kAllReduce && rule != KindCost::kAllGather)) return 0;
  const StageCost& c = Stage(action.stage);
  if (action.kind == ActionKind::kReduceGrad && c.reduce_grad) return *c.reduce_grad;  // measured
  // A ring all-reduce moves 2(D-1)/D of the buffer through every link; an
  // all-gather half of that.
  if (rule == KindCost::kAllReduce) return RingAllReduceTime(c.param_bytes, dp_);
  return RingAllGatherTime(c.param_bytes, dp_);
}

double CostModel::TransferTimeNs(RankId from, RankId to, Bytes bytes) const {
  const auto it = links_.find({from, to});
  const Link& link = it == links_.end() ? link_ : it->second;
  double t = static_cast<double>(link.latency);
  if (link.bandwidth_gbps > 0 && bytes > 0) t += static_cast<double>(bytes) / link.bandwidth_gbps;
  return t;
}

TimeNs CostModel::TransferTime(RankId from, RankId to, Bytes bytes) const {
  // Saturated, not wrapped, past int64 (1e15 bytes at 1e-6 GB/s is 1e21
  // ns): the simulator refuses such costs before it runs (its overflow check
  // takes TransferTimeNs).
  const double t = TransferTimeNs(from, to, bytes);
  return t >= 9e18 ? std::numeric_limits<TimeNs>::max() / 2 : static_cast<TimeNs>(std::llround(t));
}

void CostModel::CheckDevices(int ranks, const std::string& schedule_name) const {
  if (!devices_.empty() && static_cast<int>(devices_.size()) != ranks) {
    throw Error(origin_ + ": field 'devices' names " + std::to_string(devices_.size()) + " ranks but schedule '" +
                schedule_name + "' has " + std::to_string(ranks));
  }
  // A link of a rank the plan lacks would go unused, unseen.
  for (const auto& [pair, link] : links_) {
    if (pair.first >= ranks || pair.second >= ranks) {
      throw Error(origin_ + ": field 'links' links rank " + std::to_string(pair.first) + " to rank " +
                  std::to_string(pair.second) + ", but schedule '" + schedule_name + "' has ranks 0 to " +
                  std::to_string(ranks - 1));
    }
  }
  if (device_slots_.empty()) return;
  if (!devices_.empty()) {
    const int used = *std::max_element(devices_.begin(), devices_.end()) + 1;
    if (static_cast<int>(device_slots_.size()) > used) {
      throw Error(origin_ + ": field 'device_slots' has " + std::to_string(device_slots_.size()) +
                  " entries, but 'devices' names devices 0 to " + std::to_string(used - 1) +
                  " (give one entry per device id)");
    }
  }
  for (RankId r = 0; r < ranks; ++r) {
    const int device = devices_.empty() ? r : devices_[r];
    if (device >= static_cast<int>(device_slots_.size())) {
      throw Error(origin_ + ": field 'device_slots' has " + std::to_string(device_slots_.size()) +
                  " entries, but rank " + std::to_string(r) + " is on device " + std::to_string(device) +
                  " (give one entry per device id)");
    }
  }
}

void CostModel::CheckStages(int stages, const std::string& schedule_name) const {
  if (NumStages() != stages) {
    throw Error(origin_ + ": cost model has " + std::to_string(NumStages()) + " stages but schedule '" + schedule_name +
                "' has " + std::to_string(stages));
  }
}

}  // namespace pplab
