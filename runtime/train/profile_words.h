// One rank's profile as int64 words, for the gather to rank 0
// (runtime/train/profile.cc): its stages, its links, its executor overhead
// and its step's work. Doubles travel bit for bit.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "runtime/train/profile.h"

namespace pplab {

std::vector<int64_t> PackRankProfile(const std::map<StageId, StageProfile>& stages,
                                     const std::vector<LinkProfile>& links, const ActionOverhead& overhead,
                                     const StepProfile& step);

// Reads what PackRankProfile wrote: the stages into `stages` and the links
// and overhead into `result` where `stands_for_all` (the first data-parallel
// replica's first tensor-parallel rank stands for all), the step's work into `result.step` always.
void UnpackRankProfile(const std::vector<int64_t>& words, bool stands_for_all, std::map<StageId, StageProfile>& stages,
                       ProfileResult& result);

}  // namespace pplab
