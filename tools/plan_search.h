// Plan search: every schedule family, microbatch count, stages per rank and
// partition for a model on K pipeline ranks (times D replicas), costed in the
// simulator, filtered by memory per rank and ranked by predicted step time.
// Cost and memory formulas are documented in docs/planning.md.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "models/llama_config.h"
#include "models/partition.h"
#include "schedules/schedule.h"
#include "sim/cost_model.h"
#include "sim/simulator.h"
#include "sim/step_samples.h"
#include "tools/plan_costs.h"
#include "tools/plan_search_options.h"

namespace pplab::cli {

// The fewest ranks of `memory_per_rank` bytes that hold the model state
// alone (weights, gradients and AdamW moments at StateBytesPerParameter over
// `dp` replicas), before any activation: what a plan needs at least.
int64_t MinRanksForModelState(const LlamaConfig& config, Bytes memory_per_rank, int dp, bool shard_optimizer);
// "; the model's weights, ... at least N <what>" when `ranks` hold less than
// the model state, else "": the hint under "no plan fits".
std::string ModelStateHint(const LlamaConfig& config, Bytes memory_per_rank, int dp, bool shard_optimizer, int ranks,
                           const std::string& what);

// Whether the costs carry spreads (the fit's or the profile's), so that
// candidates can tie (MarkTies).
bool CostsHaveSpreads(const PlanSearchOptions& options);

// The draws behind `plan`'s ties: fixed, so that a plan is reproducible.
// 100 samples put p10 and p90 on the 10th and 90th smallest step times.
constexpr int kTieSamples = 100;
constexpr std::uint64_t kTieSeed = 1;

struct PlanCandidate {
  int ranks = 1;                   // K
  int dp = 1;                      // D
  int tp = 1;                      // T
  bool sequence_parallel = false;  // with T > 1
  std::string schedule;
  int microbatches = 0;    // M
  int virtual_stages = 1;  // v = S / K
  int stages = 0;          // S
  // "uniform", "parameters" or "compute"; "fitted" for layers moved from
  // one of those until it fits (Refit in plan_search.cc), which train takes
  // as the layer list (TrainPartition).
  std::string partition_method;
  Partition partition;
  int microbatch_size = 0;  // sequences per microbatch, G / (D M)
  TimeNs step_time = 0;     // predicted makespan of one step
  double bubble_fraction = 0;
  Bytes peak_memory = 0;          // max over ranks of weights, grads, AdamW moments and activations
  std::vector<Bytes> rank_peaks;  // the same, by rank
  // The rank of that peak, its model state (weights, gradients, AdamW
  // moments) and what the rest of its peak is (Simulate's peak_parts).
  RankId peak_rank = 0;
  Bytes model_state = 0;
  MemoryParts peak_parts;
  double tokens_per_second = 0;  // G seq_len / step time
  bool measured_costs = false;   // the profile's stage costs were used verbatim
  bool recompute = false;        // every stage's activations recomputed (train --recompute all)
  // The sampled step time (SampleStepTime, kTieSamples with kTieSeed), for
  // the candidates sampled (see PlanSearchOptions::sample_top); else null.
  std::optional<StepTimeSamples> samples;
  // Sampled and within the noise of the best (StepTimesTie with the first
  // candidate); the first is a tie when any other is.
  bool tie = false;
  // zb-auto only: the lowered order it searched for this candidate's costs
  // and memory (other families are regenerated from their name).
  Schedule searched;
};

struct PlanSearchResult {
  std::vector<PlanCandidate> fitting;  // within memory, best first
  int simulated = 0;                   // candidates costed
  int skipped = 0;                     // ruled out by a generator rule or too few layers
  std::string first_rule_broken;       // the first generator rule's message among them ("" when none was)
  // Per family searched: candidates costed, and why the first was ruled out
  // (its rule, or too few layers); for naming a family --schedules asked
  // for that gave no candidate.
  std::map<std::string, int> costed_by_family;
  std::map<std::string, std::string> ruled_out_by_family;
  int over_memory = 0;
  // Candidates whose times or bytes came past what pplab counts (int64: a
  // microbatch too large), passed over; the first one's message, which a
  // search that costs nothing else reports.
  int too_large = 0;
  std::string too_large_why;
  // Least peak memory seen, for the "no plan fits" message; none when every
  // candidate was a zb-auto that found no order under the limit.
  std::optional<Bytes> smallest_memory;
  // Refitting (docs/planning.md, "Partitions that fit"): the over-memory
  // candidates whose layers were moved, how many of them came to fit, and
  // the simulations that took (not counted in `simulated`).
  int refit_starts = 0;
  int refitted = 0;
  int refit_simulations = 0;
};

// At most this many over-memory candidates a search refits: the fastest,
// one per family, M, v and recomputation.
constexpr int kRefitStarts = 8;

// "--memory-per-rank B bytes", or with a headroom "--memory-per-rank B
// bytes less --memory-headroom P % (L bytes)": the limit a candidate must
// fit, as no-fit messages name it.
std::string MemoryLimitText(const PlanSearchOptions& o);

// "plan: every one of the N candidates is too large to cost ...; the
// first: WHY", for a search whose every candidate overflowed.
std::string TooLargeText(const PlanSearchResult& result);

// "the smallest peak memory per rank of N candidates is B bytes", for the
// "no plan fits" errors, with what zb-auto adds to it where `o` searches it
// (its orders are searched under the limit, so none is among the figures).
std::string SmallestMemoryText(const PlanSearchResult& result, const PlanSearchOptions& o);

// What `train --partition` takes for the candidate's layers: its method's
// name, or for "fitted" the layers per stage ("3,2,2,1").
std::string TrainPartition(const PlanCandidate& candidate);

// Searches; throws pplab::Error for bad options, and "no plan fits" (naming
// the smallest peak memory seen) when every candidate is over the limit.
PlanSearchResult SearchPlans(const PlanSearchOptions& options);

// Best first: by predicted step time to the microsecond, then by lower peak
// memory (stable). (Fitted costs round to the nanosecond: two plans whose
// times differ by a few ns are a tie, and the leaner one goes first.)
void RankCandidates(std::vector<PlanCandidate>& candidates);

// Simulates the first options.sample_top candidates of `ranked` (best
// first) kTieSamples times each with kTieSeed (their `samples`) and marks
// those whose step time ties with the first's (StepTimesTie). SearchPlans
// calls it when the costs carry spreads. Each candidate is costed with its
// own K and D (options.ranks and options.dp are replaced by the candidate's).
void MarkTies(const PlanSearchOptions& options, std::vector<PlanCandidate>& ranked);

// What a ranked candidate was simulated with: its schedule as simulated
// (with each stage's REDUCE_GRAD where the data-parallel all-reduce is
// costed) and its cost model. Simulate(schedule, costs) gives its step time
// again (`plan --trace`, `--svg`).
struct CandidateModel {
  Schedule schedule;
  CostModel costs;
};
CandidateModel CandidateCostModel(const PlanSearchOptions& options, const PlanCandidate& candidate);

// The lowered schedule of a candidate (on its own K), as `pplab train --plan`
// reads it.
Schedule CandidateSchedule(const PlanCandidate& candidate);

// "8GiB", "500MB", "1e9", "123": bytes (k/M/G/T powers of 1000, Ki/Mi/Gi/Ti of
// 1024, optional trailing B). Throws pplab::Error naming `flag`.
Bytes ParseByteSize(const std::string& text, const std::string& flag);

}  // namespace pplab::cli
