// The rules each generator states, written out independently of the
// generators so tests can enumerate the plans that must exist.
#pragma once

#include <algorithm>

#include "schedules/generators.h"
#include "sim/zb_auto.h"

namespace pplab {

inline bool FamilyAccepts(const GeneratorInfo& g, int ranks, int microbatches, int virtual_stages) {
  if (!g.accepts_virtual && virtual_stages != g.default_virtual) return false;
  if (g.name == "interleaved-1f1b") return virtual_stages >= 2 && microbatches % ranks == 0;
  if (g.name == "interleaved-zb") return microbatches % std::max(1, microbatches / ranks) == 0;
  if (g.name == "dualpipev") return microbatches >= 2 * ranks;
  if (g.name == "dualpipe") return ranks % 2 == 0 && microbatches % 2 == 0 && microbatches >= 2 * ranks;
  return true;
}

// Costs for generators that search with a cost model (zb-auto) when a test
// has none of its own: F = 1000, I = 1500, W = 500 ns per stage, 300 ns per
// message, so the search has unequal costs and communication to weigh.
inline CostModel GridCosts(int stages) {
  StageCost c;
  c.forward = 1000;
  c.backward = 2000;
  c.backward_weight = 500;
  c.activation_bytes = 100;
  c.weight_grad_bytes = 10;
  return CostModel::Uniform(stages, c, Link{300, 0});
}

// What `pplab simulate -s <g>` builds (before lowering): Generate(), or for
// a generator that needs costs, GenerateAuto with `costs` (GridCosts when
// null) and its default memory limit.
inline Schedule GenerateForTest(const GeneratorInfo& g, const GeneratorOptions& options,
                                const CostModel* costs = nullptr) {
  if (!g.needs_costs) return Generate(g.name, options);
  return GenerateWithCosts(g.name, options, costs != nullptr ? *costs : GridCosts(options.ranks));
}

}  // namespace pplab
