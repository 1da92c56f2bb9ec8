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
                                     const std::vector<LinkProfile>& links, double overhead_ms,
                                     const StepProfile& step);

// Reads what PackRankProfile wrote: the stages into `stages` and the links
// and overhead into `result` where `first_replica` (the first data-parallel
// replica stands for all), the step's work into `result.step` always.
void UnpackRankProfile(const std::vector<int64_t>& words, bool first_replica, std::map<StageId, StageProfile>& stages,
                       ProfileResult& result);

}  // namespace pplab
