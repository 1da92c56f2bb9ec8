// Compact terminal picture of a Timeline, for logs, CLI output and test
// failure messages.
//
// Output, every line ending in '\n':
//   <name> [<source>]: makespan X ms, bubble Y%, 1 cell = Z ms
//   r0 |0FF1FF2FF.....0BBBB1BBBB|
//   r1 |.0FF1FF2FF...0BBBB1BBBB.|
// "(unnamed)" stands for an empty name and " [<source>]" is left out when the
// source is empty; X and Z have 3 decimals, Y (Summarize's bubble_fraction in
// percent) has 1. Rank labels are padded to a common width.
//
// Convention for the `columns` cells of a rank's row:
//   - Cell c covers [c, c+1) * makespan / columns (exact integer arithmetic).
//   - It belongs to the compute event of that rank that overlaps it the most;
//     ties go to the event earlier in timeline.events. A cell no compute event
//     overlaps is idle: '.'.
//   - Each maximal run of cells belonging to one event shows the last digit of
//     its microbatch in its first cell and the kind letter (F, B, I or W; X for
//     an overlapped OVERLAP_F_B) in
//     the others. A run of a single cell shows only the kind letter, so the
//     kind stays readable when an event is narrower than two cells.
// Communication events are not drawn. Events whose rank lies outside
// [0, timeline.ranks) are ignored; ranks with no events give all-idle rows.
#pragma once

#include <string>

#include "traces/timeline.h"

namespace pplab {

// `columns` < 1 is treated as 1. With a zero makespan every cell is idle.
std::string RenderText(const Timeline& timeline, int columns);

}  // namespace pplab
