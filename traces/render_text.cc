#include "traces/render_text.h"

#include <algorithm>
#include <charconv>
#include <vector>

#include "schedules/action_kinds.h"

namespace pplab {
namespace {

// std::to_chars ignores the C locale, so the output does not depend on LC_NUMERIC.
std::string Fixed(double value, int decimals) {
  char buf[128];
  const auto r = std::to_chars(buf, buf + sizeof buf, value, std::chars_format::fixed, decimals);
  return r.ec == std::errc() ? std::string(buf, r.ptr) : std::string("0");
}

}  // namespace

std::string RenderText(const Timeline& timeline, int columns) {
  columns = std::max(1, columns);
  const TimelineSummary summary = Summarize(timeline);
  const TimeNs makespan = summary.makespan;
  const int ranks = std::max(0, timeline.ranks);

  std::string out = timeline.name.empty() ? "(unnamed)" : timeline.name;
  if (!timeline.source.empty()) out += " [" + timeline.source + "]";
  out += ": makespan " + Fixed(NsToMs(makespan), 3) + " ms, bubble " + Fixed(100.0 * summary.bubble_fraction, 1) +
         "%, 1 cell = " + Fixed(NsToMs(makespan) / columns, 3) + " ms\n";

  // Times are multiplied by `columns` so that cell c is exactly
  // [c * makespan, (c + 1) * makespan) and overlaps compare without rounding.
  const TimeNs cols = columns;
  std::vector<std::vector<int>> owner(ranks, std::vector<int>(columns, -1));
  std::vector<std::vector<TimeNs>> best(ranks, std::vector<TimeNs>(columns, 0));
  for (int i = 0; i < static_cast<int>(timeline.events.size()); ++i) {
    const TimelineEvent& e = timeline.events[i];
    if (!IsCompute(e.action.kind) || e.rank < 0 || e.rank >= ranks || makespan <= 0) continue;
    const TimeNs start = e.start * cols;
    const TimeNs end = e.end * cols;
    const TimeNs first = std::clamp<TimeNs>(start / makespan, 0, cols - 1);
    const TimeNs last = std::clamp<TimeNs>(end / makespan, 0, cols - 1);
    for (TimeNs c = first; c <= last; ++c) {
      const TimeNs overlap = std::min(end, (c + 1) * makespan) - std::max(start, c * makespan);
      if (overlap > best[e.rank][c]) {
        best[e.rank][c] = overlap;
        owner[e.rank][c] = i;
      }
    }
  }

  const size_t label_width = 1 + std::to_string(std::max(0, ranks - 1)).size();
  for (RankId r = 0; r < ranks; ++r) {
    std::string label = "r" + std::to_string(r);
    label.resize(label_width, ' ');
    std::string row(columns, '.');
    for (int c = 0; c < columns; ++c) {
      const int i = owner[r][c];
      if (i < 0) continue;
      const Action& a = timeline.events[i].action;
      const bool run_start = c == 0 || owner[r][c - 1] != i;
      const bool run_single = run_start && (c + 1 == columns || owner[r][c + 1] != i);
      row[c] = run_start && !run_single ? static_cast<char>('0' + (a.microbatch % 10 + 10) % 10) : InfoOf(a.kind).letter;
    }
    out += label + " |" + row + "|\n";
  }
  return out;
}

}  // namespace pplab
