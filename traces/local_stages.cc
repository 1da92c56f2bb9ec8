#include "traces/local_stages.h"

#include <algorithm>

namespace pplab {

LocalStages::LocalStages(const Timeline& timeline) {
  per_rank_.resize(std::max(0, timeline.ranks));
  for (const TimelineEvent& e : timeline.events) {
    if (e.rank < 0 || e.rank >= timeline.ranks) continue;
    for (const Action& part : PartsOf(e.action)) per_rank_[e.rank].push_back(part.stage);
  }
  for (std::vector<StageId>& stages : per_rank_) {
    std::sort(stages.begin(), stages.end());
    stages.erase(std::unique(stages.begin(), stages.end()), stages.end());
    max_per_rank_ = std::max(max_per_rank_, static_cast<int>(stages.size()));
  }
}

int LocalStages::IndexOf(RankId rank, StageId stage) const {
  if (rank < 0 || rank >= static_cast<int>(per_rank_.size())) return 0;
  const std::vector<StageId>& stages = per_rank_[rank];
  const auto it = std::lower_bound(stages.begin(), stages.end(), stage);
  return it != stages.end() && *it == stage ? static_cast<int>(it - stages.begin()) : 0;
}

}  // namespace pplab
