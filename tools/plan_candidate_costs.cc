#include "tools/plan_candidate_costs.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "models/tensor_parallel.h"
#include "schedules/error.h"

namespace pplab::cli {
namespace {

// Nanoseconds of a fitted or analytic time: int64 holds about 290 years,
// and a time past that (an analytic rate far too low) is refused rather
// than wrapped to a negative time that would rank its candidate first.
TimeNs Ns(double x) {
  if (!(x < 4e18)) {
    throw OverflowError("plan: an action's time comes to " + std::to_string(x / 3.15576e16) +
                        " years, beyond the simulator's clock (is --flops-per-second in FLOP/s, not TFLOP/s?)");
  }
  return static_cast<TimeNs>(std::llround(std::max(0.0, x)));
}

// A byte count of a stage, under the same bound (a microbatch of 4096
// sequences of 131072 tokens' logits came to 4.6e18 bytes, once reported
// as 146 years).
Bytes ByteSize(double x) {
  if (!(x < 4e18)) {
    throw OverflowError("plan: a stage's bytes come to " + std::to_string(x / 1e18) +
                        " EB, beyond the 2^62 bytes pplab counts (microbatches too large)");
  }
  return static_cast<Bytes>(std::llround(std::max(0.0, x)));
}

// One rank's shapes: its share of the model under tensor parallelism.
LlamaConfig RankShape(const PlanSearchOptions& o) { return TensorParallelShare(o.config, o.tp); }

// Where the ranks sit when nodes hold o.gpus_per_node GPUs
// (PlanSearchOptions::gpus_per_node): world rank (d K + k) T + t, as train
// numbers them (runtime/train/worker_setup.h), on node ((d K + k) T + t) / G.
int64_t NodeOf(const PlanSearchOptions& o, int64_t replica, int64_t tp_rank, int64_t rank) {
  return ((replica * o.ranks + rank) * o.tp + tp_rank) / o.gpus_per_node;
}
// Nodes only grow with d and with t, so the first and last member decide.
bool DpSpansNodes(const PlanSearchOptions& o) {
  for (int t = 0; t < o.tp; ++t) {
    for (int k = 0; k < o.ranks; ++k) {
      if (NodeOf(o, 0, t, k) != NodeOf(o, o.dp - 1, t, k)) return true;
    }
  }
  return false;
}
bool TpSpansNodes(const PlanSearchOptions& o) {
  for (int d = 0; d < o.dp; ++d) {
    for (int k = 0; k < o.ranks; ++k) {
      if (NodeOf(o, d, 0, k) != NodeOf(o, d, o.tp - 1, k)) return true;
    }
  }
  return false;
}
// The links of the data-parallel and the tensor-parallel rings.
Link DpLink(const PlanSearchOptions& o) { return o.gpus_per_node > 0 && !DpSpansNodes(o) ? o.link : o.dp_link; }
Link TpLink(const PlanSearchOptions& o) { return o.gpus_per_node > 0 && TpSpansNodes(o) ? o.dp_link : o.tp_link; }

// The region entries' weight products in the order a backward meets them:
// the head's (last stage), then each layer's MLP and attention, last layer
// first.
std::vector<TimeNs> RegionProducts(const LlamaConfig& shape, const Partition& p, int s, TimeNs weights) {
  const double linear = static_cast<double>(StageLinearParams(shape, p, s));
  const double h = shape.hidden_size;
  const double attention = h * (shape.QDim() + 2.0 * shape.KvDim()), mlp = 2.0 * h * shape.intermediate_size;
  const auto share = [&](double params) { return Ns(static_cast<double>(weights) * params / linear); };
  std::vector<TimeNs> out;
  if (s == p.NumStages() - 1) out.push_back(share(static_cast<double>(shape.vocab_size) * h));
  for (int l = p.Begin(s); l < p.End(s); ++l) {
    out.push_back(share(mlp));
    out.push_back(share(attention));
  }
  return out;
}
// What a backward's region entries add to its compute: in each, the gather
// `gather` (0: none) overlaps the input's gradient (the region's products'
// time again), and the sum `sum` the weights' products.
TimeNs ExposedEntries(const std::vector<TimeNs>& products, TimeNs gather, TimeNs sum) {
  TimeNs exposed = 0;
  for (const TimeNs w : products) exposed += std::max(w, gather) + std::max(w, sum) - 2 * w;
  return exposed;
}
// What W's gathers add to its products: gather i + 1 is queued when the
// products of region i - 1 are, behind gather i on the stream; region i's
// products wait for its gather.
TimeNs ExposedPrefetchedGathers(const std::vector<TimeNs>& products, TimeNs gather) {
  TimeNs gathered = 0, computed = 0, previous = 0, work = 0;  // previous: region i - 1's products done
  for (const TimeNs w : products) {
    gathered = std::max(gathered, previous) + gather;
    previous = computed;
    computed = std::max(computed, gathered) + w;
    work += w;
  }
  return computed - work;
}

}  // namespace

TensorParallelTimes TensorParallelCost(const PlanSearchOptions& o, const Partition& p, int s, int mb, TimeNs weights) {
  if (o.tp <= 1) return {};
  const int P = p.NumStages(), layers = p.End(s) - p.Begin(s);
  const double values = static_cast<double>(mb) * o.seq_len * o.config.hidden_size;
  const DataParallel ring{o.tp, TpLink(o)};
  const Bytes e = ByteSize(ActivationElementBytes(o.precision) * values), fp32 = ByteSize(4 * values);
  const bool head = s == P - 1, embedding = s == 0;
  const std::vector<TimeNs> products = RegionProducts(RankShape(o), p, s, weights);
  TensorParallelTimes t;
  if (!o.sequence_parallel) {
    const TimeNs sum = RingAllReduceTime(fp32, ring);
    t.forward = 2 * layers * RingAllReduceTime(e, ring) + (embedding ? sum : 0);
    t.backward_input = (2 * layers + (head ? 1 : 0)) * sum;
    t.backward = ExposedEntries(products, 0, sum);
    return t;
  }
  const TimeNs gather = RingAllGatherTime(e, ring);
  const TimeNs half32 = RingAllGatherTime(fp32, ring);  // a reduce-scatter moves what an all-gather does
  const int regions = 2 * layers;
  const TimeNs exits = regions * gather + (embedding ? half32 : 0);  // the exits' and the embedding's, blocking
  t.forward = regions * 2 * gather + (head ? gather : 0) + (embedding ? half32 : 0);
  t.backward_input = exits + regions * half32 + (head ? half32 : 0);
  t.backward_weight = ExposedPrefetchedGathers(products, gather);
  t.backward = exits + ExposedEntries(products, gather, half32);
  return t;
}

namespace {

// Messages between pipeline ranks that any replica puts on two nodes take
// the network between nodes. Every generator's messages go between
// neighbouring ranks or between the last and the first (a wrap-around).
void PlaceOnNodes(const PlanSearchOptions& o, CostModel& m) {
  if (o.gpus_per_node <= 0) return;
  for (RankId a = 0; a < o.ranks; ++a) {
    const RankId b = (a + 1) % o.ranks;
    if (a == b) continue;
    bool crosses = false;
    for (int64_t d = 0; d < o.dp && !crosses; ++d) {
      for (int64_t t = 0; t < o.tp && !crosses; ++t) crosses = NodeOf(o, d, t, a) != NodeOf(o, d, t, b);
    }
    if (!crosses) continue;
    m.SetLinkOverride(a, b, o.dp_link);
    m.SetLinkOverride(b, a, o.dp_link);
  }
}

// The step's work with the sharded optimizer (train --shard-optimizer):
// each replica updates 1 / D of the parameters, then the replicas sum them
// back, an all-reduce of the rank's fp32 parameters after the update, which
// nothing overlaps (the ring formula over dp_link, when that is costed).
StepCosts ShardedStep(const PlanSearchOptions& o, StepCosts step, int64_t rank_params) {
  if (!o.shard_optimizer || o.dp < 2) return step;
  const TimeNs gather = o.cost_data_parallel ? RingAllReduceTime(4 * rank_params, DataParallel{o.dp, DpLink(o)}) : 0;
  // The profile's spread goes with its median: the p10 and p90 left
  // unscaled were above the scaled median, which the cost file written
  // (--cost-out) then refused to be read with.
  const auto sharded = [&](TimeNs t) { return t / o.dp + gather; };
  step.optimizer = sharded(step.optimizer);
  if (step.optimizer_spread)
    step.optimizer_spread = Spread{sharded(step.optimizer_spread->p10), sharded(step.optimizer_spread->p90)};
  return step;
}

// With tied embeddings, the exchange of that weight's fp32 gradient (a
// tensor-parallel rank's share of it) between the first stage's rank (0)
// and the last one's (K - 1 in every plan that puts them apart) over their
// link; the simulator runs it only where a plan does put them apart.
void AddTiedExchange(const PlanSearchOptions& o, CostModel& m) {
  if (!o.config.tie_word_embeddings || o.ranks < 2) return;
  StepCosts step = m.Step();
  step.tied_exchange = m.TransferTime(0, o.ranks - 1, 4 * EmbeddingParams(RankShape(o)));
  m.SetStep(step);
}

// With two copies of the model (dualpipe), the exchange that sums each
// part's gradients over its copies: a rank sends its stages' fp32 gradients
// (the largest rank's `rank_params`) to the rank holding the other copies,
// over their link, and receives as much.
void AddCopyExchange(const PlanSearchOptions& o, CostModel& m, int copies, int64_t rank_params) {
  if (copies < 2 || o.ranks < 2) return;
  StepCosts step = m.Step();
  step.copy_exchange = m.TransferTime(0, o.ranks - 1, 4 * rank_params);
  m.SetStep(step);
}

}  // namespace

CostModel CandidateCosts(const PlanSearchOptions& o, const Partition& p, int copies, int mb, const CostModel* verbatim,
                         int64_t rank_params) {
  if (verbatim != nullptr) {
    // Like the fitted candidates: one replica's pipeline, with the profile's
    // per-step work, and its data-parallel all-reduce when that is costed.
    CostModel m = *verbatim;
    // A plan gives each rank a device of its own, and every candidate the
    // same links: a profile taken with ranks sharing one device (each action
    // timed alone, in turns) is used as if they did not, like the fits.
    m.SetDevices({});
    m.SetDeviceSlots({});
    m.SetLinks(o.link);
    // A REDUCE_GRAD the profile measured is of its own number of replicas.
    const bool measured_here = m.DataParallelGroup().degree == o.dp;
    m.SetDataParallel(DataParallel{});
    if (o.cost_data_parallel && o.dp > 1) {
      for (StageId s = 0; s < m.NumStages(); ++s) {
        StageCost c = m.Stage(s);
        if (c.param_bytes == 0) c.param_bytes = 4 * StageParams(o.config, p, s % p.NumStages());
        if (!measured_here) {
          c.reduce_grad.reset();
          c.reduce_grad_spread.reset();
        }
        m.SetStage(s, c);
      }
      m.SetDataParallel(DataParallel{o.dp, DpLink(o)});
    }
    m.SetStep(ShardedStep(o, m.Step(), rank_params));
    PlaceOnNodes(o, m);
    AddTiedExchange(o, m);
    return m;
  }
  const int P = p.NumStages();
  const CostFit& f = o.fit;
  const LlamaConfig shape = RankShape(o);  // the rank's share of each stage
  // The ranks the positions are split over outside the split regions.
  const int positions = o.sequence_parallel ? o.tp : 1;
  const TimeCoefficients times = f.At(mb);
  std::vector<StageCost> stages(P * copies);
  for (int st = 0; st < P * copies; ++st) {
    const int s = st % P;
    StageCost& c = stages[st];
    const double flops = StageForwardFlops(shape, p, s, mb, o.seq_len);
    const double units = StageFixedUnits(p, s);
    // Kind k's time of the stage before any collective plan adds.
    const auto fitted = [&](int k) { return Ns(times.ns_per_flop[k] * flops + times.fixed_ns_per_unit[k] * units); };
    const TimeNs weights = fitted(3);
    // A fit of a profile --tp holds its collectives already (CostFit).
    const TensorParallelTimes tp =
        f.tensor_parallel > 1 ? TensorParallelTimes{} : TensorParallelCost(o, p, s, mb, weights);
    c.forward = fitted(0) + tp.forward;
    c.backward = fitted(1) + tp.backward;
    c.backward_input = fitted(2) + tp.backward_input;
    c.backward_weight = weights + tp.backward_weight;
    const ActivationParts activations =
        StageActivationParts(shape, p, s, mb, o.seq_len, o.precision, {positions, o.fused_attention});
    c.activation_bytes = ByteSize(f.Activations(activations));
    if (f.graph_slot_scale) {
      c.graph_slot_bytes = ByteSize(*f.graph_slot_scale * (activations.layers + activations.head + activations.exact));
    }
    c.weight_grad_bytes = ByteSize(f.weight_grad_scale * StageWeightGradBytes(shape, p, s, mb, o.seq_len, o.precision));
    // The temporaries: one factor for every kind (StageWorkspaceBytes is
    // the backward's parts at 1), and each kind's own where the profile
    // measured them.
    const ActivationLayout layout{positions, o.fused_attention};
    const WorkspaceParts backward = StageBackwardWorkspaceParts(shape, p, s, mb, o.seq_len, o.precision, layout);
    c.workspace_bytes = ByteSize(f.workspace_scale * backward.Scaled(1));
    if (f.kind_workspace_fitted[0]) {
      const WorkspaceParts forward = StageForwardWorkspaceParts(shape, p, s, mb, o.seq_len, o.precision, layout);
      c.forward_workspace_bytes = ByteSize(forward.Scaled(f.kind_workspace_scale[0], f.kind_head_workspace_scale[0]));
    }
    if (f.kind_workspace_fitted[1]) {
      c.backward_workspace_bytes = ByteSize(backward.Scaled(f.kind_workspace_scale[1], f.kind_head_workspace_scale[1]));
    }
    if (f.kind_workspace_fitted[2]) {
      c.backward_input_workspace_bytes =
          ByteSize(backward.Scaled(f.kind_workspace_scale[2], f.kind_head_workspace_scale[2]));
    }
    c.backward_weight_workspace_bytes =
        ByteSize(f.weight_workspace_scale * StageWeightWorkspaceBytes(shape, p, s, o.precision));
    c.message_bytes = ByteSize(f.message_scale * MessageBytes(o.config, mb, o.seq_len, o.precision) / positions);
    if (f.messages) {
      c.forward_send_bytes = ByteSize(f.forward_send_share * static_cast<double>(c.message_bytes));
      // The input gradient (mb, seq_len, hidden) as the executor holds it: fp32.
      c.input_grad_bytes = ByteSize(4.0 * mb * o.seq_len * o.config.hidden_size / positions);
    }
    c.input_bytes = ByteSize(StageInputBytes(o.config, s, mb, o.seq_len, positions));
    c.param_bytes = 4 * TensorParallelStageParams(o.config, p, s, o.tp);  // fp32 gradients, what REDUCE_GRAD sums
    c.cast_weight_bytes = ByteSize(f.cast_bytes_per_param * static_cast<double>(StageLinearParams(shape, p, s)));
    std::optional<Spread>* spreads[4] = {&c.forward_spread, &c.backward_spread, &c.backward_input_spread,
                                         &c.backward_weight_spread};
    const TimeNs medians[4] = {*c.forward, *c.backward, *c.backward_input, *c.backward_weight};
    for (int k = 0; k < 4; ++k) {
      if (!f.has_spread[k]) continue;
      const double t = static_cast<double>(medians[k]);
      *spreads[k] = Spread{Ns(t * (1 - f.spread_low[k])), Ns(t * (1 + f.spread_high[k]))};
    }
  }
  CostModel m = CostModel::FromStages(std::move(stages), o.link);
  m.SetOrigin("plan cost estimate");
  m.SetMessages(f.messages);
  m.SetPairsInTurn(f.pairs_in_turn);
  if (o.cost_data_parallel && o.dp > 1) m.SetDataParallel(DataParallel{o.dp, DpLink(o)});
  PlaceOnNodes(o, m);
  StepCosts step;
  step.loss_allreduce = f.loss_allreduce;
  step.norm_allreduce = f.norm_allreduce;
  step.clip = Ns(f.clip_ns_per_param * static_cast<double>(rank_params));
  step.optimizer = Ns(f.optimizer_ns_per_param * static_cast<double>(rank_params));
  m.SetStep(ShardedStep(o, step, rank_params));
  AddCopyExchange(o, m, copies, rank_params);
  AddTiedExchange(o, m);
  return m;
}

const CostModel* VerbatimProfile(const PlanSearchOptions& o, const GeneratorInfo& gen, int v,
                                 const Partition& partition, int mb) {
  if (v != 1 || gen.copies != 1) return nullptr;
  for (const CostModel* profile : o.profiles) {
    const std::optional<ProfileMeta> meta = profile->Profile();
    if (meta && o.tp == meta->tensor_parallel && (o.sequence_parallel && o.tp > 1) == meta->sequence_parallel &&
        partition.NumStages() == profile->NumStages() && meta->ranks == o.ranks &&
        partition.ToString() == meta->partition && mb == meta->microbatch_size) {
      return profile;
    }
  }
  return nullptr;
}

}  // namespace pplab::cli
