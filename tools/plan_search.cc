#include "tools/plan_search.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <optional>
#include <set>
#include <tuple>

#include "models/tensor_parallel.h"
#include "schedules/error.h"
#include "schedules/generators.h"
#include "schedules/lowering.h"
#include "sim/recompute.h"
#include "sim/simulator.h"
#include "sim/zb_auto.h"
#include "tools/plan_candidate_costs.h"
#include "traces/figures.h"

namespace pplab::cli {
namespace {

std::vector<int> Divisors(int n) {
  std::vector<int> out;
  for (int d = 1; d <= n; ++d) {
    if (n % d == 0) out.push_back(d);
  }
  return out;
}

// The schedule simulated for a candidate: with the data-parallel
// all-reduce costed, a REDUCE_GRAD after each stage's last B or W, as
// `train --dp` inserts them.
Schedule Simulated(const PlanSearchOptions& o, const Schedule& schedule) {
  return o.cost_data_parallel && o.dp > 1 ? AddReduceGrad(schedule) : schedule;
}

// `costs` with every stage recomputed, or as they are.
CostModel Recomputed(const CostModel& costs, bool recompute) {
  if (!recompute) return costs;
  std::set<StageId> all;
  for (StageId s = 0; s < costs.NumStages(); ++s) all.insert(s);
  return WithRecompute(costs, all);
}

// What a candidate's costings with and without recomputation share: the
// parameters each rank holds (its stages as `placement` puts them) and the
// stage costs before recomputation.
struct CandidateBase {
  std::vector<int64_t> params;
  CostModel costs;
};
CandidateBase BaseCosts(const PlanSearchOptions& o, const GeneratorInfo& gen, const std::vector<RankId>& placement,
                        const Partition& partition, int mb, const CostModel* verbatim) {
  CandidateBase base;
  base.params = RankParams(o.config, partition, placement, o.ranks, o.tp);
  base.costs =
      CandidateCosts(o, partition, gen.copies, mb, verbatim, *std::max_element(base.params.begin(), base.params.end()));
  return base;
}

// Costs one candidate of family `name` from its `base`: `lowered` is its
// lowered schedule (unused for zb-auto, which searches its order here for
// these costs and, as its activation limit on each rank, the room beside
// that rank's model state). Null when zb-auto finds no order that fits;
// otherwise the candidate, whose peak memory may exceed the limit (the
// caller decides).
std::optional<PlanCandidate> CostCandidate(const PlanSearchOptions& o, const std::string& name, const Schedule& lowered,
                                           const Partition& partition, const CandidateBase& base,
                                           const std::string& method, int M, int v, bool recompute, bool verbatim) {
  const GeneratorInfo& gen = FindGenerator(name);
  const int mb = o.global_batch / (o.dp * M);
  const std::vector<int64_t>& params = base.params;
  const CostModel costs = Recomputed(base.costs, recompute);
  // fp32 weights, gradients and AdamW's two moments: 16 bytes per parameter,
  // in bf16 runs too (fp32 master weights and optimizer state).
  std::vector<Bytes> memory(o.ranks, 0);
  for (RankId r = 0; r < o.ranks; ++r) {
    memory[r] =
        static_cast<Bytes>(std::ceil(StateBytesPerParameter(o.dp, o.shard_optimizer) * static_cast<double>(params[r])));
  }
  const Schedule* schedule = &lowered;
  Schedule searched;
  if (gen.needs_costs) {
    AutoOptions limits;
    for (RankId r = 0; r < o.ranks; ++r) limits.activation_limit.push_back(o.memory_per_rank - memory[r]);
    try {
      searched = Lower(GenerateAuto({o.ranks, M, 0}, costs, limits));
    } catch (const Error&) {
      return std::nullopt;
    }
    schedule = &searched;
  }
  const SimResult sim = Simulate(Simulated(o, *schedule), costs);
  PlanCandidate c;
  c.ranks = o.ranks;
  c.dp = o.dp;
  c.tp = o.tp;
  c.sequence_parallel = o.sequence_parallel && o.tp > 1;
  c.schedule = name;
  c.microbatches = M;
  c.virtual_stages = v;
  c.stages = o.ranks * v;
  c.partition_method = method;
  c.partition = partition;
  c.microbatch_size = mb;
  c.step_time = sim.makespan;
  c.bubble_fraction = sim.bubble_fraction;
  c.rank_peaks.assign(o.ranks, 0);
  for (const RankMetrics& r : sim.per_rank) {
    c.rank_peaks[r.rank] = memory[r.rank] + r.peak_activation_bytes;
    if (&r == &sim.per_rank.front() || c.rank_peaks[r.rank] > c.peak_memory) {
      c.peak_memory = c.rank_peaks[r.rank];
      c.peak_rank = r.rank;
      c.model_state = memory[r.rank];
      c.peak_parts = r.peak_parts;
    }
  }
  c.tokens_per_second =
      sim.makespan > 0 ? static_cast<double>(o.global_batch) * o.seq_len / (static_cast<double>(sim.makespan) * 1e-9)
                       : 0;
  c.measured_costs = verbatim;
  c.recompute = recompute;
  if (gen.needs_costs) c.searched = std::move(searched);
  return c;
}

// The "compute" partition with fewer layers on the ranks over memory: each
// such rank's limit is one layer below what it holds, the least loaded of
// the others takes the layer (PartitionByCompute's limits), and the
// candidate is costed again, until every rank fits. A limit only falls, so
// this ends within the model's layers; null when a rank over memory holds
// one layer a stage already. One copy of the model (not dualpipe).
std::optional<PlanCandidate> FitByLayerLimits(const PlanSearchOptions& o, const PlanCandidate& start,
                                              int& simulations) {
  const Schedule lowered = CandidateSchedule(start);
  const std::vector<RankId>& placement = lowered.placement;
  std::vector<int> limit(o.ranks, o.config.num_hidden_layers);
  while (true) {
    const Partition p = PartitionByCompute(o.config, placement, o.seq_len, limit);
    std::optional<PlanCandidate> c =
        CostCandidate(o, start.schedule, lowered, p,
                      BaseCosts(o, FindGenerator(start.schedule), placement, p, start.microbatch_size, nullptr),
                      "fitted", start.microbatches, start.virtual_stages, start.recompute, false);
    ++simulations;
    if (!c) return std::nullopt;
    if (c->peak_memory <= o.memory_per_rank) return c;
    std::vector<int> layers(o.ranks, 0), stages(o.ranks, 0);
    for (size_t s = 0; s < placement.size(); ++s) {
      layers[placement[s]] += p.End(static_cast<int>(s)) - p.Begin(static_cast<int>(s));
      ++stages[placement[s]];
    }
    int room = 0;
    for (RankId r = 0; r < o.ranks; ++r) {
      if (c->rank_peaks[r] > o.memory_per_rank) {
        if (layers[r] == stages[r]) return std::nullopt;
        limit[r] = layers[r] - 1;
      }
      room += limit[r];
    }
    if (room < o.config.num_hidden_layers) return std::nullopt;
  }
}

// The over-memory candidates faster than the best that fits, fastest first,
// refitted (FitByLayerLimits): one start per family, M, v and
// recomputation, at most kRefitStarts, of the families with one copy of
// the model whose order does not depend on the costs (not dualpipe or
// zb-auto). The refitted candidates that fit join the others.
void Refit(const PlanSearchOptions& o, std::vector<PlanCandidate>& over, PlanSearchResult& result) {
  RankCandidates(over);
  TimeNs best = std::numeric_limits<TimeNs>::max();
  for (const PlanCandidate& c : result.fitting) best = std::min(best, c.step_time);
  std::set<std::tuple<std::string, int, int, bool>> tried;
  for (const PlanCandidate& start : over) {
    if (start.step_time >= best || result.refit_starts >= kRefitStarts) break;
    const GeneratorInfo& gen = FindGenerator(start.schedule);
    if (gen.copies != 1 || gen.needs_costs) continue;
    // With every rank over the limit, no rank can take a layer.
    if (*std::min_element(start.rank_peaks.begin(), start.rank_peaks.end()) > o.memory_per_rank) continue;
    if (!tried.insert({start.schedule, start.microbatches, start.virtual_stages, start.recompute}).second) continue;
    ++result.refit_starts;
    std::optional<PlanCandidate> fitted;
    try {
      fitted = FitByLayerLimits(o, start, result.refit_simulations);
    } catch (const OverflowError&) {
      continue;  // a partition whose stage came past int64: none that fits
    }
    if (!fitted) continue;
    const bool known = std::any_of(result.fitting.begin(), result.fitting.end(), [&](const PlanCandidate& c) {
      return c.schedule == fitted->schedule && c.microbatches == fitted->microbatches &&
             c.virtual_stages == fitted->virtual_stages && c.recompute == fitted->recompute &&
             c.partition.layer_begin == fitted->partition.layer_begin;
    });
    if (known) continue;  // a named partition that fits already
    ++result.refitted;
    best = std::min(best, fitted->step_time);
    result.fitting.push_back(std::move(*fitted));
  }
}

}  // namespace

void RankCandidates(std::vector<PlanCandidate>& candidates) {
  const auto micros = [](TimeNs t) { return (t + 500) / 1000; };
  std::stable_sort(candidates.begin(), candidates.end(), [&micros](const PlanCandidate& a, const PlanCandidate& b) {
    const TimeNs x = micros(a.step_time), y = micros(b.step_time);
    return x != y ? x < y : a.peak_memory < b.peak_memory;
  });
}

bool CostsHaveSpreads(const PlanSearchOptions& o) {
  return o.fit.AnySpread() ||
         std::any_of(o.profiles.begin(), o.profiles.end(), [](const CostModel* p) { return p->HasSpread(); });
}

CandidateModel CandidateCostModel(const PlanSearchOptions& options, const PlanCandidate& c) {
  PlanSearchOptions o = options;
  o.ranks = c.ranks;
  o.dp = c.dp;
  o.tp = c.tp;
  o.sequence_parallel = c.sequence_parallel;
  CandidateModel model;
  model.schedule = Simulated(o, CandidateSchedule(c));
  const GeneratorInfo& gen = FindGenerator(c.schedule);
  model.costs = Recomputed(
      BaseCosts(o, gen, model.schedule.placement, c.partition, c.microbatch_size,
                c.measured_costs ? VerbatimProfile(o, gen, c.virtual_stages, c.partition, c.microbatch_size) : nullptr)
          .costs,
      c.recompute);
  return model;
}

void MarkTies(const PlanSearchOptions& options, std::vector<PlanCandidate>& ranked) {
  const size_t n = std::min(ranked.size(), options.sample_top);
  for (size_t i = 0; i < n; ++i) {
    const CandidateModel model = CandidateCostModel(options, ranked[i]);
    ranked[i].samples = SampleStepTime(model.schedule, model.costs, kTieSamples, kTieSeed);
  }
  for (size_t i = 1; i < n; ++i) {
    ranked[i].tie = StepTimesTie(*ranked[0].samples, *ranked[i].samples);
    ranked[0].tie = ranked[0].tie || ranked[i].tie;
  }
}

namespace {

// Passes over `n` candidates whose costs overflow (OverflowError).
void TooLarge(const OverflowError& e, int n, PlanSearchResult& result) {
  if (result.too_large == 0) result.too_large_why = e.what();
  result.too_large += n;
}

// One layout's candidates (o.sequence_parallel as it is), added to
// `result`: every family in `names`, v, M and partition, then Refit.
void SearchLayout(const PlanSearchOptions& o, const std::vector<std::string>& names, PlanSearchResult& result) {
  const std::vector<int> ms = Divisors(o.global_batch / o.dp);
  const int L = o.config.num_hidden_layers;

  std::vector<PlanCandidate> over;  // over memory, for Refit
  for (const std::string& name : names) {
    const GeneratorInfo& gen = FindGenerator(name);
    result.costed_by_family[name] += 0;
    std::string& ruled_out = result.ruled_out_by_family[name];
    std::vector<int> vs = {gen.default_virtual};
    if (gen.accepts_virtual) vs = {1, 2, 4};
    for (int v : vs) {
      const int S = o.ranks * v;
      const int P = S / gen.copies;  // parts of the model
      if (P > L) {                   // every part needs a layer
        result.skipped += static_cast<int>(ms.size());
        if (ruled_out.empty()) {
          ruled_out = "its " + std::to_string(P) + " parts (K x v" + (gen.copies > 1 ? " / copies" : "") +
                      ") need a layer each, the model has " + std::to_string(L);
        }
        continue;
      }
      // "parameters" depends only on P, "compute" on where the generator
      // places the stages too; each is dropped when it repeats one before.
      std::vector<std::pair<std::string, Partition>> partitions = {{"uniform", PartitionUniform(o.config, P)}};
      const auto add = [&partitions](const std::string& method, const Partition& p) {
        for (const auto& [_, q] : partitions) {
          if (q.layer_begin == p.layer_begin) return;
        }
        partitions.push_back({method, p});
      };
      add("parameters", PartitionByParameters(o.config, P));
      if (gen.copies == 1) {
        // The placement does not depend on M (2K meets the M rules); a v the
        // family refuses skips every M below anyway.
        std::optional<std::vector<RankId>> placement = LoopPlacement(o.ranks, S);
        if (!gen.needs_costs) {
          try {
            placement = Generate(name, {o.ranks, 2 * o.ranks, gen.accepts_virtual ? v : 0}).placement;
          } catch (const Error&) {
            placement.reset();
          }
        }
        if (placement) add("compute", PartitionByCompute(o.config, *placement, o.seq_len));
      }
      for (int M : ms) {
        Schedule schedule;
        if (!gen.needs_costs) {
          try {
            schedule = Lower(Generate(name, {o.ranks, M, gen.accepts_virtual ? v : 0}));
          } catch (const Error& e) {
            ++result.skipped;  // a rule of the family (e.g. M % K == 0)
            if (result.first_rule_broken.empty()) result.first_rule_broken = e.what();
            if (ruled_out.empty()) ruled_out = e.what();
            continue;
          }
        }
        const int mb = o.global_batch / (o.dp * M);
        for (const auto& [method, partition] : partitions) {
          const CostModel* verbatim = VerbatimProfile(o, gen, v, partition, mb);
          std::optional<CandidateBase> base;
          try {
            base = BaseCosts(o, gen, gen.needs_costs ? LoopPlacement(o.ranks, S) : schedule.placement, partition, mb,
                             verbatim);
          } catch (const OverflowError& e) {
            TooLarge(e, static_cast<int>(o.recompute.size()), result);
            continue;
          }
          for (const bool recompute : o.recompute) {
            std::optional<PlanCandidate> c;
            try {
              c = CostCandidate(o, name, schedule, partition, *base, method, M, v, recompute, verbatim != nullptr);
            } catch (const OverflowError& e) {
              TooLarge(e, 1, result);
              continue;
            }
            ++result.simulated;
            ++result.costed_by_family[name];
            if (c) result.smallest_memory = std::min(result.smallest_memory.value_or(c->peak_memory), c->peak_memory);
            if (!c || c->peak_memory > o.memory_per_rank) {
              ++result.over_memory;  // zb-auto without an order that fits counts here too
              if (c && !gen.needs_costs) over.push_back(std::move(*c));
              continue;
            }
            result.fitting.push_back(std::move(*c));
          }
        }
      }
    }
  }
  Refit(o, over, result);
}

}  // namespace

// Whether the search runs a generator that searches its order (zb-auto).
static bool ZbAutoSearched(const PlanSearchOptions& o) {
  for (const std::string& name : GeneratorNames(o.schedules)) {
    if (FindGenerator(name).needs_costs) return true;
  }
  return false;
}

std::string MemoryLimitText(const PlanSearchOptions& o) {
  const std::string limit = std::to_string(o.memory_per_rank) + " bytes";
  if (o.memory_headroom_percent <= 0) return "--memory-per-rank " + limit;
  return "--memory-per-rank " + std::to_string(o.memory_given) + " bytes less --memory-headroom " +
         Fixed(o.memory_headroom_percent, 1) + " % (" + limit + ")";
}

std::string TooLargeText(const PlanSearchResult& result) {
  return "plan: every one of the " + std::to_string(result.too_large) +
         " candidates is too large to cost (times or bytes past what int64 holds); the first: " + result.too_large_why;
}

std::string SmallestMemoryText(const PlanSearchResult& result, const PlanSearchOptions& o) {
  const std::string n = std::to_string(result.simulated) + " candidates";
  const std::string too_large = result.too_large == 0
                                    ? ""
                                    : "; " + std::to_string(result.too_large) +
                                          " more were too large to cost, the first: " + result.too_large_why;
  if (!result.smallest_memory) {
    return "none of the " + n + " has a peak to compare (zb-auto, searched alone, found no order under the limit)" +
           too_large;
  }
  // zb-auto's orders are searched under the limit given, so none is among
  // these figures, and a higher limit may fit one below them.
  return "the smallest peak memory per rank of " + n + " is " + std::to_string(*result.smallest_memory) + " bytes" +
         (ZbAutoSearched(o) ? " (not counting zb-auto, which searches an order under the limit itself)" : "") +
         too_large;
}

PlanSearchResult SearchPlans(const PlanSearchOptions& o) {
  if (o.ranks < 1 || o.dp < 1 || o.global_batch < 1 || o.seq_len < 1) {
    throw Error("plan: --ranks, --dp, --global-batch and --seq-len must be positive");
  }
  if (o.seq_len > o.config.max_position_embeddings) {
    throw Error("--seq-len " + std::to_string(o.seq_len) + " exceeds the model's max_position_embeddings " +
                std::to_string(o.config.max_position_embeddings) + " (train would refuse it)");
  }
  if (o.tp < 1) throw Error("plan: --tp must be positive");
  if (const std::string why = WhyNoTensorParallel(o.config, o.tp); !why.empty()) {
    throw Error("--tp " + std::to_string(o.tp) + ": the model's " + why);
  }
  if (const std::string why = WhyNoSequenceParallel(o.seq_len, o.sequence_parallel ? o.tp : 1); !why.empty()) {
    throw Error("--sequence-parallel: " + why + " (--tp)");
  }
  if (o.global_batch % o.dp != 0) {
    throw Error("--global-batch " + std::to_string(o.global_batch) + " is not a multiple of --dp " +
                std::to_string(o.dp));
  }
  // Each generator once, by its own name: a repeat would cost every
  // candidate twice and rank copies side by side.
  std::vector<std::string> names = o.schedules.empty() ? std::vector<std::string>{} : GeneratorNames(o.schedules);
  if (names.empty()) {
    for (const GeneratorInfo& g : Generators()) {
      // Graphed stages run whole backwards: no plan that splits them.
      if (!(o.cuda_graphs && g.split_backward)) names.push_back(g.name);
    }
  }
  if (o.cuda_graphs) {
    for (const std::string& name : names) {
      if (FindGenerator(name).split_backward) {
        throw Error("--schedules " + name + ": the profiles ran as CUDA graphs (--cuda-graphs), which run " +
                    "whole backwards, and " + name + " splits B into I and W");
      }
    }
    if (o.recompute == std::vector<bool>{true}) {
      throw Error(std::string("--recompute all: the profiles ran as CUDA graphs (--cuda-graphs), whose slots ") +
                  "keep each microbatch's activations: recomputing saves nothing");
    }
    if (o.tp > 1) {
      throw Error("--tp " + std::to_string(o.tp) + ": the profiles ran as CUDA graphs (--cuda-graphs), " +
                  "which train runs without tensor parallelism");
    }
  }
  for (const CostModel* profile : o.profiles) {
    const std::optional<ProfileMeta> meta = profile->Profile();
    if (meta && meta->precision != o.precision) {
      // Its measured bytes and the formulas' would count different element sizes.
      throw Error(std::string("plan: --precision ") + PrecisionName(o.precision) + ", but the profile " +
                  profile->Origin() + " was measured in " + PrecisionName(meta->precision));
    }
  }
  PlanSearchResult result;
  // With T > 1, each candidate without and (where T divides the sequence)
  // with sequence parallelism when both are searched.
  std::vector<bool> layouts = {o.sequence_parallel && o.tp > 1};
  if (o.search_sequence_parallel && o.tp > 1) {
    layouts = {false};
    if (WhyNoSequenceParallel(o.seq_len, o.tp).empty()) layouts.push_back(true);
  }
  for (const bool sequence_parallel : layouts) {
    PlanSearchOptions layout = o;
    layout.sequence_parallel = sequence_parallel;
    if (o.cuda_graphs) layout.recompute = {false};  // --recompute auto: the graphs keep the activations
    SearchLayout(layout, names, result);
  }
  const int L = o.config.num_hidden_layers;
  if (!o.throw_when_none_fits) {
    RankCandidates(result.fitting);
    return result;
  }
  // Every candidate too large to cost: the first one's reason (a rate in
  // the wrong unit, most likely).
  if (result.simulated == 0 && result.too_large > 0) throw Error(TooLargeText(result));
  if (result.simulated == 0) {
    // Where schedule rules ruled candidates out, the first says which (the
    // layers alone were blamed: dualpipe's even M of at least 2K read as
    // "4 layers allow no schedule").
    throw Error("plan: no candidate to cost: " +
                (result.first_rule_broken.empty()
                     ? "the model's " + std::to_string(L) + " layers allow no schedule on " + std::to_string(o.ranks) +
                           " ranks with these options"
                     : "no schedule on " + std::to_string(o.ranks) + " ranks fits both the model's " +
                           std::to_string(L) +
                           " layers and its own rules for these microbatch counts (divisors of --global-batch / "
                           "--dp), e.g. " +
                           result.first_rule_broken));
  }
  if (result.fitting.empty()) {
    // Where the model state alone does not fit, recomputation cannot help.
    const std::string state = ModelStateHint(o.config, o.memory_per_rank, o.dp, o.shard_optimizer, o.ranks * o.tp,
                                             o.tp > 1 ? "ranks (K x T)" : "pipeline ranks");
    throw Error("no plan fits in " + MemoryLimitText(o) + ": " + SmallestMemoryText(result, o) + state +
                (state.empty() && o.recompute == std::vector<bool>{false} && !o.cuda_graphs
                     ? " (--recompute auto also costs every candidate with its activations recomputed)"
                     : ""));
  }
  RankCandidates(result.fitting);
  if (CostsHaveSpreads(o)) MarkTies(o, result.fitting);
  return result;
}

int64_t MinRanksForModelState(const LlamaConfig& config, Bytes memory_per_rank, int dp, bool shard_optimizer) {
  const double params = static_cast<double>(ModelParams(config));
  const double bytes = StateBytesPerParameter(dp, shard_optimizer) * params;
  return memory_per_rank > 0 ? static_cast<int64_t>(std::ceil(bytes / static_cast<double>(memory_per_rank))) : 0;
}

std::string ModelStateHint(const LlamaConfig& config, Bytes memory_per_rank, int dp, bool shard_optimizer, int ranks,
                           const std::string& what) {
  const int64_t need = MinRanksForModelState(config, memory_per_rank, dp, shard_optimizer);
  if (need <= ranks) return "";
  // 8 + 8 / D sharded: 10.67 at D = 3, which read "10" (and 10 would need fewer ranks).
  const double per_parameter = StateBytesPerParameter(dp, shard_optimizer);
  const std::string bytes = per_parameter == std::floor(per_parameter)
                                ? std::to_string(static_cast<int64_t>(per_parameter))
                                : Fixed(per_parameter, 2);
  return "; the model's weights, gradients and AdamW moments alone (" + bytes + " bytes a parameter) need at least " +
         std::to_string(need) + " " + what + " of this memory" +
         (what == "pipeline ranks" && need > config.num_hidden_layers
              ? ", more than its " + std::to_string(config.num_hidden_layers) + " layers can be split into"
              : std::string());
}

std::string TrainPartition(const PlanCandidate& c) {
  return c.partition_method == "fitted" ? c.partition.ToString() : c.partition_method;
}

Schedule CandidateSchedule(const PlanCandidate& c) {
  if (FindGenerator(c.schedule).needs_costs) return c.searched;
  const bool takes_v = FindGenerator(c.schedule).accepts_virtual;
  return Lower(Generate(c.schedule, {c.ranks, c.microbatches, takes_v ? c.virtual_stages : 0}));
}

Bytes ParseByteSize(const std::string& text, const std::string& flag) {
  size_t used = 0;
  double x = 0;
  try {
    // A decimal number (stod also reads hex, "inf" and "nan": 0x10 was 16 bytes).
    const size_t digit = text.find_first_not_of("+-");
    if (digit == std::string::npos || digit > 1 ||
        !(std::isdigit(static_cast<unsigned char>(text[digit])) || text[digit] == '.') ||
        text.find_first_of("xX") != std::string::npos) {
      throw Error("not decimal");
    }
    x = std::stod(text, &used);
  } catch (const std::exception&) {
    throw Error(flag + ": '" + text + "' is not a size like 8GiB, 500MB or 1e9");
  }
  std::string unit = text.substr(used);
  unit.erase(0, std::min(unit.size(), unit.find_first_not_of(' ')));
  std::transform(unit.begin(), unit.end(), unit.begin(), [](unsigned char ch) { return std::tolower(ch); });
  if (!unit.empty() && unit.back() == 'b') unit.pop_back();
  static const std::pair<const char*, double> kUnits[] = {
      {"", 1},           {"k", 1e3},           {"m", 1e6},
      {"g", 1e9},        {"t", 1e12},          {"ki", 1024.0},
      {"mi", 1048576.0}, {"gi", 1073741824.0}, {"ti", 1099511627776.0}};
  for (const auto& [name, scale] : kUnits) {
    if (unit == name) {
      const double bytes = x * scale;
      if (!std::isfinite(bytes) || bytes < 1 || bytes > kMaxBytes) {
        throw Error(flag + ": '" + text + "' must be a size from 1 byte to 1e15 bytes");
      }
      return static_cast<Bytes>(std::llround(bytes));
    }
  }
  throw Error(flag + ": unknown unit in '" + text + "' (use B, kB, MB, GB, TB, KiB, MiB, GiB, TiB)");
}

}  // namespace pplab::cli
