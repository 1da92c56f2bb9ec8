// SVG picture of a Timeline: the rank × time figure of pipeline-parallelism
// papers, one lane per rank (rank 0 at the top) and one box per compute event.
//
// Contract shared by both renderers:
//   - Time runs on the x axis from 0 to the makespan (Timeline::Makespan(), the
//     latest compute end), scaled linearly onto the plot area; a zero makespan
//     draws every box with zero width at the left edge.
//   - Each compute event (F, B, I, W) is exactly one `<rect class="<KIND>">`
//     (e.g. class="F"); no other element uses those classes. It is labelled
//     with its microbatch number when wide enough, and carries a `<title>`
//     tooltip "<EventName> <start>-<end> ms". An OVERLAP_F_B is drawn as one
//     split box: its `<rect class="OVERLAP_F_B">` overlaid by a forward-coloured
//     upper half (class "OVERLAP_F_B-F") and a backward-coloured lower half
//     (class "OVERLAP_F_B-B").
//   - Where a rank computes several stages (v > 1: interleaved, looped BFS,
//     zb-v, dualpipev), each of its stages gets a shade of the kind's colour:
//     the kind's colour for the rank's lowest stage, lighter for each higher
//     one (local_stages.h), so every (kind, local stage) has its own fill.
//     The legend then has one row per local stage ("1st stage of a rank:",
//     ...) with swatches of class "swatch-<local index>".
//   - Events whose rank lies outside [0, timeline.ranks) are not drawn.
//   - The summary "makespan X ms, bubble Y%" comes from Summarize(): makespan
//     in ms with 3 decimals, bubble_fraction in percent with 1 decimal.
//   - Below the legend, the idle split of each timeline (traces/explain.h):
//     one `<text class="idle-split">` heading, then one per rank ("rank r
//     idle X: warm-up .., cool-down .., imbalance .. (sS ..), comm ..,
//     shared device .."), ms with 3 decimals; left out for a timeline
//     where a rank runs two compute actions at once.
//   - Where a timeline holds memory samples (Timeline::memory, the
//     "activation bytes" counter of simulate and of train --measure-memory)
//     and show_memory is set, its block has one memory row per rank under
//     the lanes, labelled "mem r": the bytes held as a step curve, one
//     `<path class="memory">` each, 0 at the row's bottom and the largest
//     sample of every timeline drawn at its top, so stacked blocks compare
//     by height. Before a rank's first sample it holds 0; after its last, the
//     last value up to the plot's end. A negative sample draws as 0. The
//     row's `<title>` and a `<text class="memory-peak">` give the rank's
//     peak in MB (10^6 bytes, 2 decimals) and when it is first reached; the
//     legend adds the scale ("activation bytes, row height = X MB").
//   - Text is XML-escaped; numbers use fixed precision and are formatted
//     without the C locale, so the same input gives the same bytes.
#pragma once

#include <string>
#include <vector>

#include "traces/timeline.h"

namespace pplab {

struct SvgOptions {
  std::string title;        // first line of the title, e.g. "1f1b  K=4  M=8"; may be empty
  int width_px = 1200;      // total width of the picture in px (at least the rank labels plus 1 px of plot)
  bool show_comm = false;   // also draw SEND as a thin line to the receiving lane, RECV as a thin wait bar
  bool show_memory = true;  // draw each rank's memory row where the timeline has memory samples
};

// One timeline: the title line, then the summary line, lanes, a time axis in
// ms and a legend of the kinds present.
std::string RenderSvg(const Timeline& timeline, const SvgOptions& options);

// Several timelines stacked on one shared time axis (0 to the largest
// makespan), e.g. a simulated timeline above a measured one. Each block is
// headed by "<label>: <name>" and its own summary, where the label is
// labels[i] when given and non-empty, else the timeline's source. Null
// pointers are skipped (with their labels). Every block uses the same
// ns-to-px scale, so equal durations draw equal widths.
std::string RenderSvgStack(const std::vector<const Timeline*>& timelines, const SvgOptions& options,
                           const std::vector<std::string>& labels = {});

}  // namespace pplab
