#include "tools/plan_grid.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <string>
#include <thread>

#include "models/tensor_parallel.h"
#include "schedules/error.h"

namespace pplab::cli {

// The threads of a --gpus search: `given`, or the machine's cores.
int SearchThreads(int given) {
  if (given > 0) return given;
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

// The tensor-parallel sizes --gpus searches: `given`, or 1, 2, 4, 8, ...
// up to a node's GPUs (8 without --gpus-per-node) and N, where the model
// splits.
std::vector<int> TensorParallelSizes(const LlamaConfig& config, int gpus, int gpus_per_node, std::optional<int> given) {
  if (given) {
    // A --tp the GPUs or the model cannot take is named as such (the grid
    // search would only say that no K x D x T fits).
    if (*given < 1 || gpus % *given != 0) {
      throw Error("--tp " + std::to_string(*given) + " does not divide --gpus " + std::to_string(gpus));
    }
    if (const std::string why = WhyNoTensorParallel(config, *given); !why.empty()) {
      throw Error("--tp " + std::to_string(*given) + ": the model's " + why);
    }
    return {*given};
  }
  std::vector<int> sizes;
  const int most = std::min(gpus, gpus_per_node > 0 ? gpus_per_node : 8);
  for (int T = 1; T <= most; T *= 2) {
    if (gpus % T == 0 && WhyNoTensorParallel(config, T).empty()) sizes.push_back(T);
  }
  return sizes;
}

// --gpus N: every K x D x T = N (T from TensorParallelSizes, K dividing N / T
// and at most the model's layers, D dividing the global batch), each
// searched as --ranks K --dp D --tp T, merged into one ranking; ties are
// marked on it. The grids are searched on `threads` threads, each taking
// the next grid not yet taken, and merged in grid order: the ranking is the
// same for any number of threads.
PlanSearchResult SearchGpus(PlanSearchOptions search, int gpus, const std::vector<int>& tps, int threads) {
  PlanSearchResult merged;
  const size_t top = search.sample_top;
  search.sample_top = 0;
  search.throw_when_none_fits = false;
  std::vector<PlanSearchOptions> layouts;
  std::string grids;
  for (int T : tps) {
    for (int K = 1; K <= gpus / T; ++K) {
      const int D = gpus / T / K;
      if (gpus % (K * T) != 0 || K > search.config.num_hidden_layers || search.global_batch % D != 0) continue;
      if (search.sequence_parallel && !WhyNoSequenceParallel(search.seq_len, T).empty()) continue;
      layouts.push_back(search);
      layouts.back().ranks = K;
      layouts.back().dp = D;
      layouts.back().tp = T;
      grids += (grids.empty() ? "" : ", ") + std::to_string(K) + "x" + std::to_string(D) +
               (T > 1 ? "x" + std::to_string(T) : "");
    }
  }
  std::vector<PlanSearchResult> results(layouts.size());
  std::vector<std::exception_ptr> errors(layouts.size());
  std::atomic<size_t> next{0};
  const auto work = [&] {
    for (size_t i = next++; i < layouts.size(); i = next++) {
      try {
        results[i] = SearchPlans(layouts[i]);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  };
  std::vector<std::thread> pool;
  const size_t workers = std::min(layouts.size(), static_cast<size_t>(std::max(threads, 1)));
  for (size_t i = 1; i < workers; ++i) pool.emplace_back(work);
  work();  // this thread is one of them
  for (std::thread& t : pool) t.join();
  for (size_t i = 0; i < layouts.size(); ++i) {
    if (errors[i]) std::rethrow_exception(errors[i]);
    PlanSearchResult& r = results[i];
    merged.simulated += r.simulated;
    merged.skipped += r.skipped;
    if (merged.first_rule_broken.empty()) merged.first_rule_broken = r.first_rule_broken;
    for (const auto& [name, n] : r.costed_by_family) merged.costed_by_family[name] += n;
    for (const auto& [name, why] : r.ruled_out_by_family) {
      if (merged.ruled_out_by_family[name].empty()) merged.ruled_out_by_family[name] = why;
    }
    merged.over_memory += r.over_memory;
    if (merged.too_large == 0) merged.too_large_why = r.too_large_why;
    merged.too_large += r.too_large;
    merged.refit_starts += r.refit_starts;
    merged.refitted += r.refitted;
    merged.refit_simulations += r.refit_simulations;
    if (r.smallest_memory) {
      merged.smallest_memory = std::min(merged.smallest_memory.value_or(*r.smallest_memory), *r.smallest_memory);
    }
    for (PlanCandidate& c : r.fitting) merged.fitting.push_back(std::move(c));
  }
  if (merged.simulated == 0 && merged.too_large > 0) throw Error(TooLargeText(merged));
  if (grids.empty() || merged.simulated == 0) {
    throw Error("--gpus " + std::to_string(gpus) + ": no K x D x T = " + std::to_string(gpus) +
                " fits the model's layers and divides --global-batch " + std::to_string(search.global_batch));
  }
  if (merged.fitting.empty()) {
    // K x D = N ranks hold, each, the state of 1 / K of the parameters at
    // 8 + 8 / D bytes a parameter (sharded) or 16: at least 16 / N bytes a
    // parameter of the model, at K = N.
    throw Error("no plan fits in " + MemoryLimitText(search) + " on any K x D (x T) of " + grids + ": " +
                SmallestMemoryText(merged, search) +
                ModelStateHint(search.config, search.memory_per_rank, 1, false, gpus, "GPUs"));
  }
  RankCandidates(merged.fitting);
  search.sample_top = top;
  if (CostsHaveSpreads(search)) MarkTies(search, merged.fitting);
  return merged;
}

}  // namespace pplab::cli
