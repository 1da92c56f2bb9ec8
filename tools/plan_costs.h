// The planner's cost estimates from a model's shapes (docs/planning.md):
// FLOPs of a stage per microbatch, and how they and the bytes
// (tools/stage_bytes.h) turn into a cost model, analytically or fitted to a
// profile. Used by the plan search
// (tools/plan_search.h); no LibTorch.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "models/llama_config.h"
#include "models/partition.h"
#include "sim/cost_model.h"
#include "sim/precision.h"
#include "tools/stage_bytes.h"

namespace pplab::cli {

// A stage's forward FLOPs per microbatch of `mb` sequences of `seq_len`
// tokens, from the model's shapes (docs/planning.md). Its bytes:
// tools/stage_bytes.h.
double StageForwardFlops(const LlamaConfig& c, const Partition& p, int stage, int mb, int seq_len);
// The units of a stage's fixed time per microbatch (StageFixedUnits): its
// decoder layers, and half a layer each for the embedding (first stage) and
// the head (last stage). What an action costs whatever its microbatch size
// (kernel launches, a collective's latency) grows with them.
double StageFixedUnits(const Partition& p, int stage);

// A stage's F, B, I and W per microbatch: ns per forward FLOP, plus ns per
// fixed unit (StageFixedUnits).
struct TimeCoefficients {
  double ns_per_flop[4] = {0, 0, 0, 0};        // F, B, I, W
  double fixed_ns_per_unit[4] = {0, 0, 0, 0};  // F, B, I, W
  bool HasFixed() const;
};

// How FLOPs and shape-derived bytes turn into a cost model: the times'
// coefficients, and scale factors for the byte estimates.
struct CostFit {
  // The coefficients (analytic, or one profile's: no fixed time), used
  // where `ranges` is empty.
  double ns_per_flop[4] = {0, 0, 0, 0};  // F, B, I, W
  // Profiles at several microbatch sizes (FitProfiles): one fit of the two
  // terms for each pair of neighbouring sizes, smallest first.
  struct SizeRange {
    int from = 0, to = 0;  // microbatch sizes, from < to
    TimeCoefficients times;
  };
  std::vector<SizeRange> ranges;
  // The coefficients for microbatches of `mb` sequences: the range that
  // holds mb (the lower one at a size two share), the first below the
  // smallest size, the last above the largest; without ranges, ns_per_flop.
  TimeCoefficients At(int mb) const;
  // Scale factors of the byte formulas: the layers' and the head's parts
  // of the activations (ActivationParts) and the others.
  double activation_scale = 1, head_activation_scale = 1;
  double weight_grad_scale = 1, message_scale = 1, workspace_scale = 1;
  // The layers' part of each kind's temporaries (WorkspaceParts: F, B and
  // I, in that order; the head's part below), from profiles
  // that measured them on a stage before the last; fitted: whether any did
  // (else the kind is costed with the one workspace_scale, as before).
  std::array<double, 3> kind_workspace_scale = {1, 1, 1};
  std::array<bool, 3> kind_workspace_fitted = {false, false, false};
  // The head's part of each kind's temporaries, from the last stages whose
  // head part is the larger (1 where none measured it). Under --tp 2 the
  // small preset's last stage took 1.5 times the formula's two
  // vocabulary-wide fp32 buffers in B: a plan of another partition put its
  // last rank's peak 9 % low with the head taken as it is.
  std::array<double, 3> kind_head_workspace_scale = {1, 1, 1};
  // W's temporaries (StageWeightWorkspaceBytes), from profiles that measured
  // them in bf16 (the formula is 0 in fp32); fitted: whether any did.
  double weight_workspace_scale = 1;
  bool weight_workspace_fitted = false;
  // How the profiled runtime runs an OVERLAP_F_B's parts (CostModel::
  // PairsInTurn): in turn where any profile says so.
  bool pairs_in_turn = false;
  // The activation bytes of a stage's parts, scaled.
  double Activations(const ActivationParts& parts) const {
    return activation_scale * parts.layers + head_activation_scale * parts.head + parts.exact;
  }
  // The profile's spread of F, B, I and W relative to the median: a
  // candidate's stage of time t gets p10 = t (1 - spread_low), p90 = t (1 +
  // spread_high). has_spread[k]: the profile gave kind k a spread.
  bool has_spread[4] = {false, false, false, false};
  double spread_low[4] = {0, 0, 0, 0}, spread_high[4] = {0, 0, 0, 0};
  bool AnySpread() const { return has_spread[0] || has_spread[1] || has_spread[2] || has_spread[3]; }
  // The step's work after the actions (a profile's; 0 without one): the
  // optimizer and clipping scale with the parameters of the rank that holds
  // most, the loss and norm all-reduces are taken as measured.
  double optimizer_ns_per_param = 0, clip_ns_per_param = 0;
  TimeNs loss_allreduce = 0, norm_allreduce = 0;
  // How the profile's transport held message buffers (none: analytic), and
  // what a forward send holds as a share of its message (1: a copy; 0: the
  // outputs themselves), over the stages whose send the profile measured.
  std::optional<MessageMemory> messages;
  double forward_send_share = 1;
  // Bytes of kept weight casts per Linear weight parameter of a stage
  // (StageLinearParams): a profile's measure (bf16: 2, on the CPU as on a
  // GPU), or analytic costs' 2 in bf16; 0 in fp32.
  double cast_bytes_per_param = 0;
  // Profiles taken with --cuda-graphs: what a stage's graph slot holds
  // (StageCost::graph_slot_bytes) as a share of its activations' formula,
  // the layers', the head's and the exact parts at 1 (a slot's pool holds
  // the activations, the temporaries and the static tensors); unset for
  // eager profiles.
  std::optional<double> graph_slot_scale;
  // The tensor-parallel ranks whose collectives the fitted times hold: a
  // profile --tp T is fitted to one rank's share of each stage, its
  // collectives included, and plan then costs that T (and its sequence
  // parallelism) alone, adding no collectives of its own. 1: whole layers,
  // to which plan adds the collectives of whatever T it costs.
  int tensor_parallel = 1;
  bool sequence_parallel = false;
};
// Analytic: F = FLOPs / flops_per_second, B = 2F, I = W = F, bytes as
// estimated; in bf16 each stage keeps one bf16 copy of its Linear weights
// for the step (2 bytes a parameter), as pplab's runtime does.
CostFit AnalyticFit(double flops_per_second, Precision precision);
// Least squares (over the profile's stages) of each measured time and byte
// count against the same formulas, in the profile's precision, and each
// kind's relative spread: sum over stages of (median - p10) / sum of medians
// (and likewise p90), and the step's work: its optimizer and clip times
// over the parameters of the profile's largest rank (stage s on rank s mod
// K), its all-reduces as they are. A profile of T tensor-parallel ranks
// (meta.tensor_parallel) is fitted against one rank's share
// (TensorParallelShare), its sequence share under sequence parallelism.
// `profiled` must carry a profile meta; `config` is the meta's config.
//
// Several profiles of one configuration (model shape, seq_len, precision,
// attention, T and layout; the caller checks) are fitted together, every
// stage of each a point. With two or more microbatch sizes among them, for
// each pair of neighbouring sizes, on the points of those two, each of F, B,
// I and W is fitted as a time per fixed unit plus a time per FLOP (two
// regressors, no intercept; CostFit::ranges), so that what does not shrink
// with the microbatch carries to other sizes, and a time per token that
// grows with the microbatch (caches) is followed piece by piece; a negative
// coefficient is set to 0 and the other fitted alone. With one size, the
// time per FLOP alone (through the origin, ns_per_flop): the two cannot be
// told apart there. Bytes are fitted through the origin over all points;
// the activations in two factors, the layers' and the head's, fitted
// together to what each stage measured beyond the held part (least
// squares of two regressors; where the points cannot tell them apart, a
// single stage or stages all alike, one factor for both);
// the step's work is the profiles' mean (the loss and norm all-reduces over
// the profiles of more than one process, which measured them).
CostFit FitProfiles(const std::vector<const CostModel*>& profiled, const LlamaConfig& config);
CostFit FitProfile(const CostModel& profiled, const LlamaConfig& config);

// Parameters per rank, stage s (of placement.size()) holding model part
// s mod P of the P-part partition; with `tp` > 1, one tensor-parallel
// rank's share of them (TensorParallelStageParams).
std::vector<int64_t> RankParams(const LlamaConfig& config, const Partition& p, const std::vector<RankId>& placement,
                                int ranks, int tp = 1);

}  // namespace pplab::cli
