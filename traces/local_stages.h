// Local stages: which of its rank's stages an event works on.
//
// With v > 1 stages per rank (interleaved, looped BFS, zb-v, dualpipev) a
// picture has to tell a rank's stages apart. The local index of stage s on
// rank r is its position among the stages r computes in the timeline, in
// ascending stage order: 0 for the lowest. It is read from the events alone,
// so simulated and measured timelines (which carry no placement) agree.
#pragma once

#include <vector>

#include "traces/timeline.h"

namespace pplab {

class LocalStages {
 public:
  // Collects the stages of every compute event (both parts of an
  // OVERLAP_F_B) of ranks in [0, timeline.ranks).
  explicit LocalStages(const Timeline& timeline);
  // Position of `stage` among rank `rank`'s stages; 0 for a rank or stage
  // the timeline does not show.
  int IndexOf(RankId rank, StageId stage) const;
  // The most stages any one rank computes (0 for no compute events).
  int MaxPerRank() const { return max_per_rank_; }

 private:
  std::vector<std::vector<StageId>> per_rank_;  // sorted, unique
  int max_per_rank_ = 0;
};

}  // namespace pplab
