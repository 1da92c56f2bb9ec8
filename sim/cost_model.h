// CostModel: what each action costs, in time and bytes.
//
// Per stage: the time of F, B, I and W for one microbatch, the bytes of
// activations an F keeps until its B or I, the bytes of the weight-gradient
// stash an I keeps until its W, and the bytes of one message sent to a
// neighbouring stage. Links between ranks: latency plus bytes / bandwidth,
// with per-rank-pair overrides. The JSON form is specified in
// docs/cost-model.md.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "schedules/action.h"
#include "schedules/units.h"
#include "sim/precision.h"
#include "sim/profile_meta.h"

namespace pplab {

// Bounds on what a cost model accepts, so that sums over millions of actions
// stay far inside int64 nanoseconds and bytes.
constexpr double kMaxActionMs = 1e7;        // one action, or one message latency: ~2.8 hours
constexpr double kMaxBytes = 1e15;          // one activation stash or message: 1 PB
constexpr double kMinBandwidthGbps = 1e-6;  // 1 kB/s; 0 means infinite
constexpr long long kMaxStages = 1 << 20;

// The spread of one action's time over repeated runs: its 10th and 90th
// percentiles (the median is the cost-model time itself). A time without a
// spread never varies. See DrawFromSpread.
struct Spread {
  TimeNs p10 = 0;
  TimeNs p90 = 0;
};

// One draw of a time whose median is `median` and whose spread is `spread`,
// at quantile u in [0, 1]: the distribution is uniform on [lo, median] and
// on [median, hi] with half the mass each, placed so that its 10th, 50th and
// 90th percentiles are p10, the median and p90 (lo = median - 1.25 (median -
// p10), at least 0; hi = median + 1.25 (p90 - median)). The caller checks
// p10 <= median <= p90.
TimeNs DrawFromSpread(TimeNs median, const Spread& spread, double u);

struct StageCost {
  // Times of one microbatch; a missing B is I + W, a missing I is B - W and a
  // missing W is B - I (or B / 2 when only B is given).
  std::optional<TimeNs> forward, backward, backward_input, backward_weight;
  Bytes activation_bytes = 0;   // held from the start of F to the end of B/I
  Bytes weight_grad_bytes = 0;  // held from the end of I to the end of W
  // Temporaries of a compute action of this stage: bytes it allocates above
  // what it holds, alive only while it runs (e.g. the logits' gradient of
  // the last stage's B). Counted in the peak, not in what is held after.
  Bytes workspace_bytes = 0;
  // The same for F alone and for B, I and W alone, where they differ (the
  // last stage's B holds the logits' gradient, its F does not); unset:
  // workspace_bytes. An I, which keeps its weight products' tensors for W
  // while it frees the activations, may have its own, and so may a W, which
  // makes only the weights' products; unset: B's. WorkspaceOf resolves them.
  std::optional<Bytes> forward_workspace_bytes, backward_workspace_bytes, backward_input_workspace_bytes,
      backward_weight_workspace_bytes;
  Bytes WorkspaceOf(ActionKind kind) const {
    if (kind == ActionKind::kBackwardInput && backward_input_workspace_bytes) return *backward_input_workspace_bytes;
    if (kind == ActionKind::kBackwardWeight && backward_weight_workspace_bytes) return *backward_weight_workspace_bytes;
    const std::optional<Bytes>& own = kind == ActionKind::kForward ? forward_workspace_bytes : backward_workspace_bytes;
    return own.value_or(workspace_bytes);
  }
  // The activations a recomputed stage rebuilds in its B or I
  // (sim/recompute.h): held while a B or I runs, above what it holds before
  // (then, after an I, kept for W as weight_grad_bytes). 0 for a stage that
  // keeps its activations from F.
  Bytes recomputed_bytes = 0;
  Bytes message_bytes = 0;  // one activation or gradient sent to a neighbour
  // The stage's inputs for one microbatch as the stage holds them (a
  // received activation, with what travels beside it): what F keeps until
  // B or I when the stage's activations are recomputed (sim/recompute.h).
  // Unset: message_bytes on every stage but the first, whose inputs are the
  // batch's tokens (0).
  std::optional<Bytes> input_bytes;
  // Whether activation_bytes was measured with the stage's input received
  // from another rank, so that it holds its own copy of the input (true),
  // or handed over on the rank, shared with the previous stage's outputs
  // (false). When a plan feeds the stage the other way, F holds
  // input_bytes less or more (`pplab profile` says which). Unset: taken as
  // it is.
  std::optional<bool> activation_includes_input;
  // The stage's input gradients of one microbatch as the executor holds
  // them, before a cast to the wire's dtype (MessageMemory). Unset:
  // message_bytes.
  std::optional<Bytes> input_grad_bytes;
  // Weight copies the stage's compute keeps for the rest of the step once
  // made (bf16 autocast's cache of cast weights on a GPU), held from the
  // stage's first compute action until the step's actions end.
  Bytes cast_weight_bytes = 0;
  // With CUDA graphs (a profile taken with --cuda-graphs): what one slot of
  // the stage holds, its graphs' pool and its static tensors
  // (runtime/exec/graphed_stage.h). A graphed stage keeps one slot per
  // microbatch in flight, the most it has held at once, each from the F
  // that first needs it to the end of the run; activation_bytes and the
  // workspaces are then what a replay allocates outside the pools. Unset:
  // the stage runs eagerly. A graphed stage runs whole backwards only (no I
  // and W) and is not recomputed.
  std::optional<Bytes> graph_slot_bytes;
  // What one SEND_F of this stage holds on its rank beyond the rank's own
  // activations, while the transport keeps the message (MessageMemory): a
  // copy of the outputs (bf16 on the wire; Gloo before 2026-11-27), or
  // nothing where the transport sends a view of outputs the stage keeps
  // until B (MessageMemory::sent_view says what the view holds after B).
  // Measured by `pplab profile`; unset: message_bytes.
  std::optional<Bytes> forward_send_bytes;
  // On a device its rank shares past the slots: the share of the action's
  // time it keeps its slot busy, in (0, 1]. The slot frees that share
  // into the action, for the next rank queued on it, while the action
  // itself runs to its end (the rest is waiting: a CPU rank's
  // tensor-parallel collectives, whose waits sleep and leave the cores to
  // other processes). Unset: 1, the whole action. Measured by `pplab
  // profile` on a CPU; index 0..3: F, B, I, W (DeviceShareOf).
  std::optional<double> device_share[4];
  double DeviceShareOf(ActionKind kind) const {
    const int k = kind == ActionKind::kForward          ? 0
                  : kind == ActionKind::kBackward       ? 1
                  : kind == ActionKind::kBackwardInput  ? 2
                  : kind == ActionKind::kBackwardWeight ? 3
                                                        : -1;
    return k >= 0 && device_share[k] ? *device_share[k] : 1.0;
  }
  // OVERLAP_F_B whose forward part is on this stage: its measured time
  // (forward_backward_ms) when given, else max(F, backward part) plus
  // overlap_penalty (the cost of running both at once).
  std::optional<TimeNs> forward_backward;
  TimeNs overlap_penalty = 0;
  // The stage's parameter (and gradient) bytes: what REDUCE_GRAD all-reduces
  // and UNSHARD all-gathers across the data-parallel replicas.
  Bytes param_bytes = 0;
  // Optional spreads of F, B, I and W (forward_p10_ms/forward_p90_ms, ...),
  // drawn from by `simulate --samples`; none: the time never varies.
  std::optional<Spread> forward_spread, backward_spread, backward_input_spread, backward_weight_spread;
  // The measured time of this stage's REDUCE_GRAD over the data-parallel
  // replicas (reduce_grad_ms, `pplab profile --dp`), which replaces the ring
  // formula when given, and its spread.
  std::optional<TimeNs> reduce_grad;
  std::optional<Spread> reduce_grad_spread;
};

struct Link {
  TimeNs latency = 0;
  double bandwidth_gbps = 0;  // gigabytes per second (= bytes per ns); 0 = infinite
};

// The data-parallel group every pipeline rank belongs to: D replicas joined
// by `link`, over which REDUCE_GRAD, UNSHARD and RESHARD run.
struct DataParallel {
  int degree = 1;  // D; 1 = no replicas, the per-stage collectives cost nothing
  Link link;
};

// A ring all-reduce of `bytes` over `dp`: 2(D-1)/D * bytes / bandwidth +
// latency; 0 when D = 1.
TimeNs RingAllReduceTime(Bytes bytes, const DataParallel& dp);
// A ring all-gather (or reduce-scatter) of `bytes` in all over `dp`:
// (D-1)/D * bytes / bandwidth + latency, half an all-reduce's bytes; 0 when
// D = 1.
TimeNs RingAllGatherTime(Bytes bytes, const DataParallel& dp);

// How the runtime's transport holds message buffers, for the memory model
// (docs/cost-model.md, "Message buffers"); `message_memory` in the file,
// written by `pplab profile`. Without it messages hold no memory.
struct MessageMemory {
  enum class SentFreed {
    kStepEnd,                // the transport frees a sent message at the step's end (Gloo)
    kNextSendAfterDelivery,  // at the rank's first SEND after the message arrived (NCCL)
  };
  enum class ReceivePosted {
    kAtUse,           // a receive's buffer is allocated when the message is waited for (Gloo from a GPU;
                      // Gloo before 2026-11-27)
    kOneActionAhead,  // when posted: at the start of the compute action before its consumer (NCCL, Gloo)
  };
  SentFreed sent_freed = SentFreed::kStepEnd;
  ReceivePosted receive_posted = ReceivePosted::kAtUse;
  // Whether a send's buffer is the sender's tensors themselves (a view:
  // Gloo on the CPU, NCCL) rather than a copy elsewhere (Gloo's host copy
  // of GPU tensors): a SEND_F's outputs then stay held by the message after
  // B releases them, until it is freed (docs/cost-model.md).
  bool sent_view = false;
};

// Work done once per step after a rank's last action (docs/cost-model.md):
// the all-reduces of the loss (for logging) and of the gradient norm (for
// clipping) over the pipeline ranks, which start when every rank is done,
// then clipping and the optimizer step, on each rank. 0 = none.
// Each may carry a spread (KIND_p10_ms / KIND_p90_ms), drawn from by
// `simulate --samples`.
// Before them, with tied embeddings (a model whose LM head is its
// embedding), the two ranks that hold a pipeline's first and last stage
// exchange that weight's gradient: `tied_exchange` on both, once each is
// done (nothing where one rank holds both). Before that, a plan of two
// copies of the model (dualpipe) sums each part's gradients over its
// copies: every two ranks that hold copies of each other's stages exchange
// them, `copy_exchange` on both, once each is done.
struct StepCosts {
  TimeNs loss_allreduce = 0;
  TimeNs norm_allreduce = 0;
  TimeNs clip = 0;
  TimeNs optimizer = 0;
  TimeNs tied_exchange = 0;
  TimeNs copy_exchange = 0;
  std::optional<Spread> loss_allreduce_spread, norm_allreduce_spread, clip_spread, optimizer_spread,
      tied_exchange_spread, copy_exchange_spread;
};

class CostModel {
 public:
  // Uniform model: every one of `stages` stages costs `stage`; every link is
  // `link`.
  static CostModel Uniform(int stages, const StageCost& stage, const Link& link);
  // One entry per stage; every link is `link`.
  static CostModel FromStages(std::vector<StageCost> stages, const Link& link);
  // Parses the JSON form; errors name `origin` and the field.
  static CostModel FromJson(const std::string& text, const std::string& origin);
  std::string ToJson() const;

  // Resolved times of F, B, I, W and OVERLAP_F_B (see StageCost); 0 for
  // other kinds; throws pplab::Error when the model cannot
  // give the time an action needs, naming the stage and the missing field.
  TimeNs ComputeTime(const Action& action) const;
  // One draw of the time of an F, B, I or W whose stage gives that kind a
  // spread, at quantile u in [0, 1]: DrawFromSpread with the median
  // ComputeTime(action). Without a spread, and for other kinds,
  // ComputeTime(action). Throws pplab::Error, naming the stage and fields,
  // unless p10 <= median <= p90.
  TimeNs SampleComputeTime(const Action& action, double u) const;
  // The spread SampleComputeTime draws `action` from (F, B, I, W, and
  // REDUCE_GRAD with a measured time), or none. An I or W without its own
  // whose time comes from a B with one takes B's scaled by its share of B;
  // a B without its own, made of I and W with theirs, their sum.
  std::optional<Spread> SpreadOf(const Action& action) const;
  // Whether any stage or per-step cost carries a spread.
  bool HasSpread() const;
  // Whether any stage ran as CUDA graphs (StageCost::graph_slot_bytes).
  bool Graphed() const;
  const StageCost& Stage(StageId stage) const;
  // Replaces stage `stage`'s costs; throws pplab::Error for a stage the
  // model does not have.
  void SetStage(StageId stage, const StageCost& cost);
  int NumStages() const { return static_cast<int>(stages_.size()); }
  // Time of a per-stage collective (REDUCE_GRAD, UNSHARD, RESHARD) of
  // `action`'s stage over the data-parallel group, from the kind table's
  // cost rule:
  //   all-reduce (ring): 2(D-1)/D * param_bytes / bandwidth + latency
  //   all-gather:         (D-1)/D * param_bytes / bandwidth + latency
  //   free: 0; and 0 for any of them when D = 1.
  // A stage's measured reduce_grad_ms replaces the all-reduce formula.
  TimeNs CollectiveTime(const Action& action) const;
  // One draw of a collective's time: a REDUCE_GRAD with a measured time and
  // a spread is drawn as SampleComputeTime draws; others are CollectiveTime.
  TimeNs SampleCollectiveTime(const Action& action, double u) const;
  const DataParallel& DataParallelGroup() const { return dp_; }
  void SetDataParallel(const DataParallel& dp) { dp_ = dp; }
  // Time from the start of a send of `bytes` on from -> to until arrival.
  TimeNs TransferTime(RankId from, RankId to, Bytes bytes) const;
  // The same in floating point, unrounded and unsaturated (the simulator's
  // check that a plan's costs fit int64 adds these up).
  double TransferTimeNs(RankId from, RankId to, Bytes bytes) const;
  // Throws pplab::Error unless the model covers exactly `stages` stages.
  void CheckStages(int stages, const std::string& schedule_name) const;

  const StepCosts& Step() const { return step_; }
  void SetStep(const StepCosts& step) { step_ = step; }

  // How messages hold memory (MessageMemory); unset: they hold none.
  const std::optional<MessageMemory>& Messages() const { return messages_; }
  void SetMessages(const std::optional<MessageMemory>& messages) { messages_ = messages; }

  // The device each rank computes on, devices[r] for rank r, when ranks
  // share devices (several pipeline ranks on one GPU); empty: every rank has
  // its own. A device runs one compute action at a time.
  // Whether an OVERLAP_F_B without a measured time costs its two parts one
  // after the other (F + B: pplab's executor runs them in turn, on the CPU
  // and, for now, on a GPU; its profiles say so) rather than at once
  // (max(F, B), DualPipe's two-stream overlap). JSON "overlapped_pairs":
  // "in_turn" or "at_once" (the default).
  bool PairsInTurn() const { return pairs_in_turn_; }
  void SetPairsInTurn(bool in_turn) { pairs_in_turn_ = in_turn; }
  const std::vector<int>& Devices() const { return devices_; }
  void SetDevices(std::vector<int> devices) { devices_ = std::move(devices); }
  // How many compute actions device d runs at once, DeviceSlots()[d] for
  // device id d (`device_slots` in the file); empty: 1 for every device. A
  // GPU has 1 (its kernels time-slice); a CPU host whose C cores are shared
  // by ranks of T threads each has C / T (docs/cost-model.md).
  const std::vector<int>& DeviceSlots() const { return device_slots_; }
  void SetDeviceSlots(std::vector<int> slots) { device_slots_ = std::move(slots); }
  // Throws pplab::Error unless Devices() is empty or names one device per
  // rank of a schedule of `ranks` ranks, and DeviceSlots() is empty or
  // covers every device id the ranks use.
  void CheckDevices(int ranks, const std::string& schedule_name) const;

  void SetLinkOverride(RankId from, RankId to, const Link& link) { links_[{from, to}] = link; }
  // Every link becomes `link`: the default, and no per-pair override left.
  void SetLinks(const Link& link) {
    link_ = link;
    links_.clear();
  }
  const Link& DefaultLink() const { return link_; }
  // Free-form metadata carried through the JSON file (e.g. the model and
  // partition a profile was measured on).
  std::string meta_json = "null";
  // The profile meta when meta.source is "pplab profile" (checked at load).
  std::optional<ProfileMeta> Profile() const { return ParseProfileMeta(meta_json, NumStages(), origin_); }
  // Where the model came from ("--f-time/--b-time flags" or a file name), for
  // errors.
  const std::string& Origin() const { return origin_; }
  void SetOrigin(std::string origin) { origin_ = std::move(origin); }

 private:
  static CostModel FromJsonDoc(const std::string& text, const std::string& origin);
  std::string origin_ = "cost model";
  std::vector<StageCost> stages_;
  Link link_;
  std::map<std::pair<RankId, RankId>, Link> links_;
  DataParallel dp_;
  std::vector<int> devices_;
  bool pairs_in_turn_ = false;
  std::vector<int> device_slots_;
  StepCosts step_;
  std::optional<MessageMemory> messages_;
};

}  // namespace pplab
