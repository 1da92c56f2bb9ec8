// pplab plan --gpus N: every K x D x T = N searched, on several threads,
// and merged into one ranking (tools/plan_search.h). No LibTorch.
#pragma once

#include <optional>
#include <vector>

#include "models/llama_config.h"
#include "tools/plan_search.h"

namespace pplab::cli {

// The threads of a --gpus search: `given`, or the machine's cores.
int SearchThreads(int given);

// The tensor-parallel sizes --gpus searches: `given`, or 1, 2, 4, 8, ...
// up to a node's GPUs (8 without --gpus-per-node) and N, where the model
// splits.
std::vector<int> TensorParallelSizes(const LlamaConfig& config, int gpus, int gpus_per_node, std::optional<int> given);

// --gpus N: every K x D x T = N (T from TensorParallelSizes, K dividing N / T
// and at most the model's layers, D dividing the global batch), each
// searched as --ranks K --dp D --tp T, merged into one ranking; ties are
// marked on it. The grids are searched on `threads` threads, each taking
// the next grid not yet taken, and merged in grid order: the ranking is the
// same for any number of threads.
PlanSearchResult SearchGpus(PlanSearchOptions search, int gpus, const std::vector<int>& tps, int threads);

}  // namespace pplab::cli
