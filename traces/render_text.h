// Compact terminal picture of a Timeline, for logs, CLI output and test
// failure messages.
//
// Output, every line ending in '\n':
//   <name> [<source>]: makespan X ms, bubble Y%, 1 cell = Z ms
//   r0 |0F1F....0BBB..1BBB|
//   r1 |..0F0BBB1F1BBB....|
//   legend: F forward, B backward, . idle; a box starts with its microbatch
// "(unnamed)" stands for an empty name and " [<source>]" is left out when the
// source is empty; X and Z have 3 decimals, Y (Summarize's bubble_fraction in
// percent) has 1. Rank labels are padded to a common width.
//
// Convention for the cells of a rank's row:
//   - Cell c covers [c, c+1) * makespan / cells (exact integer arithmetic).
//   - It belongs to the compute event of that rank that overlaps it the most;
//     ties go to the event earlier in timeline.events. A cell no compute event
//     overlaps is idle: '.'.
//   - Each maximal run of cells belonging to one event starts with the
//     event's label and fills the rest with its kind letter (F, B, I, W; X for
//     an OVERLAP_F_B). The label is the microbatch ("12"); where a rank
//     computes several stages (v > 1) it is the action's own text form
//     "<stage><letter><microbatch>" ("3F12"; an OVERLAP_F_B is labelled by its
//     forward part, "3X12").
//   - No digit is dropped: the picture uses `columns` cells when every event
//     with a non-zero duration then gets a run long enough for its label and
//     one kind letter (which keeps adjacent labels apart), and otherwise as many cells
//     as that takes, wrapped into bands of `columns` cells. A wrapped picture
//     prints, before each band, a scale line with the band's start and end in
//     ms. Past kMaxTextCells cells per rank (or kMaxTextPictureCells in all)
//     the picture stops widening; a label that then does not fit is replaced
//     by '+', and the legend says so and counts the actions too short to own
//     a cell at all.
//   - Where the timeline holds memory samples (Timeline::memory, the
//     "activation bytes" counter) and show_memory is set, each band has one
//     more row per rank under the ranks' rows, "m<r> |...|": each cell the
//     most bytes the rank held during it (what it held coming in, and every
//     sample inside), as a digit 1-9, the ninths of the largest such value
//     over all ranks rounded up, or '.' for none (0 or less). A sample at
//     or past the makespan counts in the last cell. A last line names the
//     scale: "memory: m<r> rows ..., 9 = X MB" (10^6 bytes, 3 decimals).
//   - The legend line follows the rows.
// Communication events are not drawn. Events whose rank lies outside
// [0, timeline.ranks) are ignored; ranks with no events give all-idle rows.
// A timeline with no ranks has no rows and no legend.
#pragma once

#include <string>

#include "traces/timeline.h"

namespace pplab {

// How far RenderText widens a picture: at most this many cells per rank, and
// this many over all ranks (never fewer than `columns` per rank).
constexpr int kMaxTextCells = 1 << 16;
constexpr long long kMaxTextPictureCells = 1LL << 22;

// `columns` < 1 is treated as 1. With a zero makespan every cell is idle
// (and no memory row is drawn).
std::string RenderText(const Timeline& timeline, int columns, bool show_memory = true);

}  // namespace pplab
