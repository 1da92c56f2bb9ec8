#include "tools/plan_costs.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <optional>
#include <tuple>
#include <utility>

#include "models/flops.h"
#include "models/tensor_parallel.h"
#include "schedules/error.h"

namespace pplab::cli {
namespace {

constexpr ActionKind kFitKinds[4] = {ActionKind::kForward, ActionKind::kBackward, ActionKind::kBackwardInput,
                                     ActionKind::kBackwardWeight};

// Least-squares slope through the origin of y against x.
double Slope(const std::vector<double>& x, const std::vector<double>& y) {
  double xy = 0, xx = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    xy += x[i] * y[i];
    xx += x[i] * x[i];
  }
  return xx > 0 ? xy / xx : 0;
}

// The least-squares (a, b) of y against a x + b z (no intercept), or none
// where x and z are proportional, to `tolerance` of their terms.
std::optional<std::pair<double, double>> TwoRegressors(const std::vector<double>& x, const std::vector<double>& z,
                                                       const std::vector<double>& y, double tolerance) {
  double xx = 0, xz = 0, zz = 0, xy = 0, zy = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    xx += x[i] * x[i];
    xz += x[i] * z[i];
    zz += z[i] * z[i];
    xy += x[i] * y[i];
    zy += z[i] * y[i];
  }
  const double det = xx * zz - xz * xz;
  if (!(det > tolerance * xx * zz)) return std::nullopt;
  return std::pair<double, double>{(xy * zz - zy * xz) / det, (zy * xx - xy * xz) / det};
}

// Least squares of y against a x + b z (no intercept), with a and b at
// least 0: where the unconstrained solution has a negative one (noise, or
// x and z nearly proportional), that one is 0 and the other is fitted
// alone.
std::pair<double, double> NonNegativeFit(const std::vector<double>& x, const std::vector<double>& z,
                                         const std::vector<double>& y) {
  const auto both = TwoRegressors(x, z, y, 1e-12);
  if (both && both->first >= 0 && both->second >= 0) return *both;
  const double a = Slope(x, y), b = Slope(z, y);
  // The one of the two single fits that leaves the smaller squared error.
  double ea = 0, eb = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    ea += (y[i] - a * x[i]) * (y[i] - a * x[i]);
    eb += (y[i] - b * z[i]) * (y[i] - b * z[i]);
  }
  return eb <= ea ? std::pair<double, double>{0, b} : std::pair<double, double>{a, 0};
}

// Least squares of y against a x + b z (no intercept) for two parts of
// one byte count, each scaled by its own factor; where the points cannot
// tell the parts apart (one point, or x and z proportional) or a factor
// comes out negative, one factor for both, fitted to x + z (at least 0).
std::pair<double, double> TwoScales(const std::vector<double>& x, const std::vector<double>& z,
                                    const std::vector<double>& y) {
  const auto both = TwoRegressors(x, z, y, 1e-9);
  if (both && both->first > 0 && both->second > 0) return *both;
  std::vector<double> sum(x.size());
  for (size_t i = 0; i < x.size(); ++i) sum[i] = x[i] + z[i];
  const double one = std::max(0.0, Slope(sum, y));
  return {one, one};
}

// A byte formula's scale: the least-squares slope, at least 0. Measured
// bytes below what the formula's exact parts hold (a tiny model's, say)
// would fit a negative scale, and bytes that shrink as microbatches grow.
double ByteScale(const std::vector<double>& x, const std::vector<double>& y) { return std::max(0.0, Slope(x, y)); }

}  // namespace

double StageForwardFlops(const LlamaConfig& c, const Partition& p, int stage, int mb, int seq_len) {
  // Per microbatch of mb sequences (models/flops.h); the embedding is a lookup: ~0.
  double flops = (p.End(stage) - p.Begin(stage)) * mb * LayerForwardFlops(c, seq_len);
  if (stage == p.NumStages() - 1) flops += mb * HeadForwardFlops(c, seq_len);
  return flops;
}

CostFit AnalyticFit(double flops_per_second, Precision precision) {
  if (!(flops_per_second > 0) || !std::isfinite(flops_per_second)) {
    throw Error("--flops-per-second must be a positive number");
  }
  CostFit f;
  const double ns = 1e9 / flops_per_second;
  f.ns_per_flop[0] = ns;
  f.ns_per_flop[1] = 2 * ns;
  f.ns_per_flop[2] = ns;
  f.ns_per_flop[3] = ns;
  // The stages cast their Linear weights through autocast's cache once a
  // step and keep the copies to its end (docs/runtime.md, "Precision").
  f.cast_bytes_per_param = precision == Precision::kBf16 ? 2 : 0;
  // pplab's executor runs an overlapped F&B's parts one after the other.
  f.pairs_in_turn = true;
  return f;
}

double StageFixedUnits(const Partition& p, int stage) {
  return (p.End(stage) - p.Begin(stage)) + (stage == 0 ? 0.5 : 0.0) + (stage == p.NumStages() - 1 ? 0.5 : 0.0);
}

CostFit FitProfiles(const std::vector<const CostModel*>& profiles, const LlamaConfig& config) {
  if (profiles.empty()) throw Error("plan: no profile to fit");
  CostFit f;
  std::vector<double> flops, units, act_layers, act_head, wgrad, msg, work;
  std::vector<double> time[4], act_y, wgrad_y, msg_y, work_y, wwork, wwork_y, slot, slot_y;
  std::vector<double> kind_work[3], kind_work_y[3];  // F, B, I: the layers' formula and the measure
  std::vector<double> kind_head[3], kind_head_y[3];  // the same of the head, where it makes the peak
  std::vector<int> sizes, size_of;                   // the sizes seen; each point's
  double median[4] = {0, 0, 0, 0}, low[4] = {0, 0, 0, 0}, high[4] = {0, 0, 0, 0};
  double sent = 0, held = 0, cast = 0, stage_params = 0;
  double optimizer = 0, clip = 0, loss_allreduce = 0, norm_allreduce = 0;
  int grouped = 0;  // profiles that measured the step's all-reduces
  for (const CostModel* profiled : profiles) {
    const std::optional<ProfileMeta> meta = profiled->Profile();
    if (!meta) throw Error(profiled->Origin() + ": not a profile (meta.source is not \"pplab profile\")");
    const Partition p = MakePartition(config, profiled->NumStages(), meta->partition);
    // One tensor-parallel rank's share of each stage (the whole layers at T = 1).
    const int T = meta->tensor_parallel;
    const int positions = meta->sequence_parallel ? T : 1;
    const LlamaConfig shape = TensorParallelShare(config, T);
    const int mb = meta->microbatch_size;
    if (std::find(sizes.begin(), sizes.end(), mb) == sizes.end()) sizes.push_back(mb);
    f.tensor_parallel = T;
    f.sequence_parallel = meta->sequence_parallel;
    for (int s = 0; s < profiled->NumStages(); ++s) {
      size_of.push_back(mb);
      flops.push_back(StageForwardFlops(shape, p, s, mb, meta->seq_len));
      units.push_back(StageFixedUnits(p, s));
      const ActivationParts parts =
          StageActivationParts(shape, p, s, mb, meta->seq_len, meta->precision, {positions, meta->attention == "sdpa"});
      act_layers.push_back(parts.layers);
      act_head.push_back(parts.head);
      wgrad.push_back(StageWeightGradBytes(shape, p, s, mb, meta->seq_len, meta->precision));
      msg.push_back(MessageBytes(config, mb, meta->seq_len, meta->precision) / positions);
      const StageCost& c = profiled->Stage(s);
      act_y.push_back(static_cast<double>(c.activation_bytes) - parts.exact);
      if (c.graph_slot_bytes) {
        slot.push_back(parts.layers + parts.head + parts.exact);
        slot_y.push_back(static_cast<double>(*c.graph_slot_bytes));
      }
      wgrad_y.push_back(static_cast<double>(c.weight_grad_bytes));
      msg_y.push_back(static_cast<double>(c.message_bytes));
      const ActivationLayout layout{positions, meta->attention == "sdpa"};
      const WorkspaceParts forward_work =
          StageForwardWorkspaceParts(shape, p, s, mb, meta->seq_len, meta->precision, layout);
      const WorkspaceParts backward_work =
          StageBackwardWorkspaceParts(shape, p, s, mb, meta->seq_len, meta->precision, layout);
      // Profiles that did not measure it (before 2026-11) keep the formula's
      // (StageWorkspaceBytes: the backward's parts at 1).
      if (c.workspace_bytes > 0) {
        work.push_back(backward_work.Scaled(1));
        work_y.push_back(static_cast<double>(c.workspace_bytes));
      }
      // Each kind's temporaries on the stages without the head, whose
      // layers' part alone makes the peak.
      const std::pair<const WorkspaceParts*, const std::optional<Bytes>*> kinds[3] = {
          {&forward_work, &c.forward_workspace_bytes},
          {&backward_work, &c.backward_workspace_bytes},
          {&backward_work, &c.backward_input_workspace_bytes}};
      for (int k = 0; k < 3; ++k) {
        const auto& [parts, measured] = kinds[k];
        if (*measured && parts->layers > 0 && parts->head == 0) {
          kind_work[k].push_back(parts->layers);
          kind_work_y[k].push_back(static_cast<double>(**measured));
        }
        if (*measured && parts->head > parts->layers) {
          kind_head[k].push_back(parts->head);
          kind_head_y[k].push_back(static_cast<double>(**measured));
        }
      }
      const double weight_work = StageWeightWorkspaceBytes(shape, p, s, meta->precision);
      if (c.backward_weight_workspace_bytes && weight_work > 0) {
        wwork.push_back(weight_work);
        wwork_y.push_back(static_cast<double>(*c.backward_weight_workspace_bytes));
      }
      for (int k = 0; k < 4; ++k) {
        const Action a{kFitKinds[k], s, 0};
        const TimeNs t = profiled->ComputeTime(a);
        time[k].push_back(static_cast<double>(t));
        // Relative spreads, weighted by the medians (long stages count more).
        const std::optional<Spread> sp = profiled->SpreadOf(a);
        if (!sp) continue;
        f.has_spread[k] = true;
        median[k] += static_cast<double>(t);
        low[k] += static_cast<double>(std::max<TimeNs>(0, t - sp->p10));
        high[k] += static_cast<double>(std::max<TimeNs>(0, sp->p90 - t));
      }
      if (c.forward_send_bytes) {
        sent += static_cast<double>(c.message_bytes);
        held += static_cast<double>(*c.forward_send_bytes);
      }
      cast += static_cast<double>(c.cast_weight_bytes);
      stage_params += static_cast<double>(StageLinearParams(shape, p, s));
    }
    // The step's work: the slowest rank's optimizer and clip (the profile
    // keeps those) over the parameters of the largest rank.
    std::vector<RankId> placement(profiled->NumStages());
    for (int s = 0; s < profiled->NumStages(); ++s) placement[s] = s % std::max(1, meta->ranks);
    const std::vector<int64_t> params = RankParams(config, p, placement, std::max(1, meta->ranks), T);
    const double largest = static_cast<double>(*std::max_element(params.begin(), params.end()));
    const StepCosts& step = profiled->Step();
    if (largest > 0) {
      optimizer += static_cast<double>(step.optimizer) / largest;
      clip += static_cast<double>(step.clip) / largest;
    }
    // A one-process profile has no group: its all-reduces are 0, not
    // measured, and count for nothing.
    if (step.loss_allreduce > 0 || step.norm_allreduce > 0) {
      loss_allreduce += static_cast<double>(step.loss_allreduce);
      norm_allreduce += static_cast<double>(step.norm_allreduce);
      ++grouped;
    }
  }
  // A time per FLOP is fitted to the stages' times: a profile whose every
  // forward (or backward) took no time has nothing to fit.
  for (int k = 0; k < 2; ++k) {
    if (std::all_of(time[k].begin(), time[k].end(), [](double t) { return t <= 0; })) {
      std::string files;
      for (const CostModel* profiled : profiles) files += (files.empty() ? "" : ", ") + profiled->Origin();
      throw Error(files + ": every stage's " + (k == 0 ? "forward" : "backward") +
                  " takes 0 ms; plan fits its time per FLOP to a profile's measured times");
    }
  }
  std::sort(sizes.begin(), sizes.end());
  for (size_t i = 0; i + 1 < sizes.size(); ++i) {
    CostFit::SizeRange range;
    range.from = sizes[i];
    range.to = sizes[i + 1];
    // The points of the range's two sizes.
    std::vector<double> u, x, y[4];
    for (size_t j = 0; j < size_of.size(); ++j) {
      if (size_of[j] != range.from && size_of[j] != range.to) continue;
      u.push_back(units[j]);
      x.push_back(flops[j]);
      for (int k = 0; k < 4; ++k) y[k].push_back(time[k][j]);
    }
    for (int k = 0; k < 4; ++k) {
      const auto [per_unit, per_flop] = NonNegativeFit(u, x, y[k]);
      range.times.fixed_ns_per_unit[k] = per_unit;
      range.times.ns_per_flop[k] = per_flop;
    }
    f.ranges.push_back(range);
  }
  for (int k = 0; k < 4; ++k) {
    f.ns_per_flop[k] = Slope(flops, time[k]);
    if (median[k] > 0) {
      f.spread_low[k] = std::min(1.0, low[k] / median[k]);
      f.spread_high[k] = high[k] / median[k];
    }
  }
  const double n = static_cast<double>(profiles.size());
  f.optimizer_ns_per_param = optimizer / n;
  f.clip_ns_per_param = clip / n;
  if (grouped > 0) {
    f.loss_allreduce = std::llround(loss_allreduce / grouped);
    f.norm_allreduce = std::llround(norm_allreduce / grouped);
  }
  std::tie(f.activation_scale, f.head_activation_scale) = TwoScales(act_layers, act_head, act_y);
  f.weight_grad_scale = ByteScale(wgrad, wgrad_y);
  if (!slot.empty()) f.graph_slot_scale = ByteScale(slot, slot_y);
  f.message_scale = ByteScale(msg, msg_y);
  if (!work.empty()) f.workspace_scale = ByteScale(work, work_y);
  for (int k = 0; k < 3; ++k) {
    if (!kind_head[k].empty()) f.kind_head_workspace_scale[k] = ByteScale(kind_head[k], kind_head_y[k]);
    if (kind_work[k].empty()) continue;
    f.kind_workspace_scale[k] = ByteScale(kind_work[k], kind_work_y[k]);
    f.kind_workspace_fitted[k] = true;
  }
  if (!wwork.empty()) {
    f.weight_workspace_scale = ByteScale(wwork, wwork_y);
    f.weight_workspace_fitted = true;
  }
  // How the transport held its buffers: the same for every profile of one
  // device kind (the caller checks the devices agree).
  f.messages = profiles.front()->Messages();
  for (const CostModel* profiled : profiles) f.pairs_in_turn = f.pairs_in_turn || profiled->PairsInTurn();
  if (sent > 0) f.forward_send_share = held / sent;
  if (stage_params > 0) f.cast_bytes_per_param = cast / stage_params;
  return f;
}

CostFit FitProfile(const CostModel& profiled, const LlamaConfig& config) { return FitProfiles({&profiled}, config); }

bool TimeCoefficients::HasFixed() const {
  return std::any_of(std::begin(fixed_ns_per_unit), std::end(fixed_ns_per_unit), [](double t) { return t > 0; });
}

TimeCoefficients CostFit::At(int mb) const {
  if (ranges.empty()) {
    TimeCoefficients t;
    std::copy(std::begin(ns_per_flop), std::end(ns_per_flop), t.ns_per_flop);
    return t;
  }
  for (const SizeRange& r : ranges) {
    if (mb <= r.to) return r.times;
  }
  return ranges.back().times;
}

std::vector<int64_t> RankParams(const LlamaConfig& config, const Partition& p, const std::vector<RankId>& placement,
                                int ranks, int tp) {
  std::vector<int64_t> params(ranks, 0);
  for (size_t s = 0; s < placement.size(); ++s) {
    params[placement[s]] += TensorParallelStageParams(config, p, static_cast<int>(s) % p.NumStages(), tp);
  }
  return params;
}

}  // namespace pplab::cli
