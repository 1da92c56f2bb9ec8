// The rules each generator states, written out independently of the
// generators so tests can enumerate the plans that must exist.
#pragma once

#include <algorithm>

#include "schedules/generators.h"

namespace pplab {

inline bool FamilyAccepts(const GeneratorInfo& g, int ranks, int microbatches, int virtual_stages) {
  if (!g.accepts_virtual && virtual_stages != g.default_virtual) return false;
  if (g.name == "interleaved-1f1b") return virtual_stages >= 2 && microbatches % ranks == 0;
  if (g.name == "interleaved-zb") return microbatches % std::max(1, microbatches / ranks) == 0;
  if (g.name == "dualpipev") return microbatches >= 2 * ranks;
  return true;
}

}  // namespace pplab
