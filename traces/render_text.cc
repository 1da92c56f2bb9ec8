#include "traces/render_text.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "schedules/action_kinds.h"
#include "traces/figures.h"
#include "traces/local_stages.h"

namespace pplab {
namespace {

// A time in the unit a picture's cells read well in: ms, or us or ns where
// a cell is shorter than 10 us or 10 ns (a cell of 0.4 us read "0.000 ms").
struct TimeUnit {
  double per_ms;
  const char* name;
};
TimeUnit UnitFor(double cell_ms) {
  if (cell_ms >= 0.01 || cell_ms <= 0) return {1.0, "ms"};
  if (cell_ms >= 1e-5) return {1e3, "us"};
  return {1e6, "ns"};
}
std::string Time(double ms, const TimeUnit& unit) { return Fixed(ms * unit.per_ms, 3) + " " + unit.name; }

// owner[r][c]: index in timeline.events of the compute event owning cell c of
// rank r, -1 for idle. Times are multiplied by `cells` so that cell c is
// exactly [c * makespan, (c + 1) * makespan) and overlaps compare without
// rounding.
std::vector<std::vector<int>> Owners(const Timeline& timeline, TimeNs makespan, TimeNs cells) {
  const int ranks = std::max(0, timeline.ranks);
  std::vector<std::vector<int>> owner(ranks, std::vector<int>(cells, -1));
  std::vector<std::vector<TimeNs>> best(ranks, std::vector<TimeNs>(cells, 0));
  for (int i = 0; i < static_cast<int>(timeline.events.size()); ++i) {
    const TimelineEvent& e = timeline.events[i];
    if (!IsCompute(e.action.kind) || e.rank < 0 || e.rank >= ranks || makespan <= 0) continue;
    // Times in units of makespan / cells: 128-bit, as in CellOf.
    const __int128 start = static_cast<__int128>(e.start) * cells;
    const __int128 end = static_cast<__int128>(e.end) * cells;
    const auto first = static_cast<TimeNs>(std::clamp<__int128>(start / makespan, 0, cells - 1));
    const auto last = static_cast<TimeNs>(std::clamp<__int128>(end / makespan, 0, cells - 1));
    for (TimeNs c = first; c <= last; ++c) {
      // At most one cell, `makespan` units: it fits.
      const auto overlap = static_cast<TimeNs>(std::min<__int128>(end, static_cast<__int128>(c + 1) * makespan) -
                                               std::max<__int128>(start, static_cast<__int128>(c) * makespan));
      if (overlap > best[e.rank][c]) {
        best[e.rank][c] = overlap;
        owner[e.rank][c] = i;
      }
    }
  }
  return owner;
}

// The cell of a time: floor(t cells / makespan), clamped to the picture (a
// 128-bit product: a time of up to 2^63 ns times 2^16 cells fits).
TimeNs CellOf(TimeNs t, TimeNs makespan, TimeNs cells) {
  const __int128 c = static_cast<__int128>(std::max<TimeNs>(0, t)) * cells / makespan;
  return static_cast<TimeNs>(std::min<__int128>(c, cells - 1));
}

// Each rank's memory row (render_text.h): per cell, the most bytes held
// during it, as '.' or a digit 1-9 in ninths of `top`, the largest over all
// ranks' cells, which it also returns. `makespan` > 0.
std::vector<std::string> MemoryRows(const Timeline& timeline, TimeNs makespan, TimeNs cells, Bytes& top) {
  const int ranks = std::max(0, timeline.ranks);
  const std::vector<std::vector<MemorySample>> by_rank = MemoryByRank(timeline);
  std::vector<std::vector<Bytes>> most(ranks, std::vector<Bytes>(cells, 0));
  top = 0;
  for (RankId r = 0; r < ranks; ++r) {
    const std::vector<MemorySample>& samples = by_rank[r];
    Bytes held = 0;
    size_t i = 0;
    for (TimeNs c = 0; c < cells; ++c) {
      Bytes v = held;
      for (; i < samples.size() && CellOf(samples[i].time, makespan, cells) <= c; ++i) {
        held = samples[i].bytes;
        v = std::max(v, held);
      }
      most[r][c] = std::max<Bytes>(0, v);
      top = std::max(top, most[r][c]);
    }
  }
  std::vector<std::string> rows(ranks, std::string(cells, '.'));
  for (RankId r = 0; r < ranks; ++r) {
    for (TimeNs c = 0; c < cells; ++c) {
      const Bytes v = most[r][c];
      if (v <= 0) continue;
      const long double ninths = 9.0L * static_cast<long double>(v) / static_cast<long double>(top);
      rows[r][c] = static_cast<char>('0' + std::clamp(static_cast<int>(std::ceil(ninths - 1e-12L)), 1, 9));
    }
  }
  return rows;
}

}  // namespace

std::string RenderText(const Timeline& timeline, int columns, bool show_memory) {
  columns = std::max(1, columns);
  const TimelineSummary summary = Summarize(timeline);
  const TimeNs makespan = summary.makespan;
  const int ranks = std::max(0, timeline.ranks);
  const int n = static_cast<int>(timeline.events.size());

  // Labels: the microbatch, or "<stage><letter><microbatch>" where a rank
  // computes several stages; `need` is the run length that shows it whole.
  const bool with_stage = LocalStages(timeline).MaxPerRank() > 1;
  std::vector<std::string> label(n);
  std::vector<TimeNs> need(n, 0);
  bool present[kNumActionKinds] = {};
  for (int i = 0; i < n; ++i) {
    const TimelineEvent& e = timeline.events[i];
    if (!IsCompute(e.action.kind) || e.rank < 0 || e.rank >= ranks) continue;
    present[static_cast<int>(e.action.kind)] = true;
    const Action& a = e.action;  // an OVERLAP_F_B's own stage and microbatch are its forward part's
    label[i] = with_stage ? std::to_string(a.stage) + InfoOf(a.kind).letter + std::to_string(a.microbatch)
                          : std::to_string(a.microbatch);
    // One kind letter after the label keeps neighbouring labels apart.
    if (e.end > e.start) need[i] = static_cast<TimeNs>(label[i].size()) + 1;
  }
  // Where event i's label goes in its run of cells [c, end), or -1 where it
  // does not fit: with a kind letter after it (which keeps it apart from
  // the next label), and whole in one band of `columns` cells of the
  // wrapped picture (a label whose digits would cross a band's edge starts
  // on the next band, where the run may still have room).
  const auto label_at = [&](int i, TimeNs c, TimeNs end) -> TimeNs {
    if (need[i] <= 0) return -1;
    const TimeNs length = static_cast<TimeNs>(label[i].size());
    const TimeNs at = c / columns == (c + length - 1) / columns ? c : (c / columns + 1) * columns;
    return end - at >= need[i] ? at : -1;
  };
  const auto runs_fit = [&](const std::vector<std::vector<int>>& owner) {
    std::vector<bool> fits(n, false);
    for (const std::vector<int>& row : owner) {
      const TimeNs cells = static_cast<TimeNs>(row.size());
      for (TimeNs c = 0; c < cells; ++c) {
        const int i = row[c];
        if (i < 0 || (c > 0 && row[c - 1] == i)) continue;
        TimeNs end = c;
        while (end < cells && row[end] == i) ++end;
        if (label_at(i, c, end) >= 0) fits[i] = true;
      }
    }
    for (int i = 0; i < n; ++i) {
      if (need[i] > 0 && !fits[i]) return false;
    }
    return true;
  };

  // Widen until every label fits: start from the narrowest width that could
  // (each event at least `need` cells wide), then grow by an eighth.
  // Widening stops at kMaxTextCells per rank and kMaxTextPictureCells in all
  // (12 bytes of working memory each), never below `columns`.
  const TimeNs cap =
      std::max<TimeNs>(columns, std::min<TimeNs>(kMaxTextCells, kMaxTextPictureCells / std::max(1, ranks)));
  TimeNs cells = columns;
  std::vector<std::vector<int>> owner = Owners(timeline, makespan, cells);
  if (makespan > 0 && !runs_fit(owner)) {
    TimeNs wanted = cells + 1;
    for (int i = 0; i < n; ++i) {
      const TimeNs d = timeline.events[i].end - timeline.events[i].start;
      if (need[i] > 0) {
        const __int128 cells_for_i = (static_cast<__int128>(need[i]) * makespan + d - 1) / d;
        wanted = std::max<TimeNs>(wanted, static_cast<TimeNs>(std::min<__int128>(cells_for_i, cap)));
      }
    }
    cells = std::min(cap, wanted);
    owner = Owners(timeline, makespan, cells);
    while (!runs_fit(owner) && cells < cap) {
      cells = std::min(cap, cells + std::max<TimeNs>(1, cells / 8));
      owner = Owners(timeline, makespan, cells);
    }
  }

  std::string out = timeline.name.empty() ? "(unnamed)" : timeline.name;
  if (!timeline.source.empty()) out += " [" + timeline.source + "]";
  const double cell_ms = cells > 0 ? NsToMs(makespan) / static_cast<double>(cells) : 0.0;
  const TimeUnit unit = UnitFor(cell_ms);
  out += ": makespan " + Time(NsToMs(makespan), unit) + ", bubble " + Fixed(100.0 * summary.bubble_fraction, 1) +
         "%, 1 cell = " + Time(cell_ms, unit) + "\n";
  if (ranks == 0) return out;

  bool cut = false;
  std::vector<bool> shown(n, false);
  std::vector<std::string> rows(ranks);
  for (RankId r = 0; r < ranks; ++r) {
    std::string& row = rows[r];
    row.assign(cells, '.');
    for (TimeNs c = 0; c < cells; ++c) {
      const int i = owner[r][c];
      if (i < 0 || (c > 0 && owner[r][c - 1] == i)) continue;
      TimeNs end = c;
      while (end < cells && owner[r][end] == i) ++end;
      shown[i] = true;
      const char letter = InfoOf(timeline.events[i].action.kind).letter;
      std::fill(row.begin() + c, row.begin() + end, letter);
      const std::string& text = label[i];
      const TimeNs at = label_at(i, c, end);
      if (at >= 0) {
        std::copy(text.begin(), text.end(), row.begin() + at);
      } else if (need[i] > 0) {
        row[c] = '+';
        cut = true;
      }
    }
  }

  Bytes memory_top = 0;
  const std::vector<std::string> memory_rows = show_memory && !timeline.memory.empty() && makespan > 0
                                                   ? MemoryRows(timeline, makespan, cells, memory_top)
                                                   : std::vector<std::string>();

  const size_t label_width = 1 + std::to_string(std::max(0, ranks - 1)).size();
  const bool wrapped = cells > columns;
  for (TimeNs band = 0; band < cells; band += columns) {
    const TimeNs width = std::min<TimeNs>(columns, cells - band);
    if (wrapped) {
      // Scale line: the band's start and end, inside the bars of the rows.
      const std::string left = Time(NsToMs(makespan) * band / cells, unit);
      const std::string right = Time(NsToMs(makespan) * (band + width) / cells, unit);
      std::string scale = std::string(label_width + 1, ' ');
      if (static_cast<TimeNs>(left.size() + right.size() + 1) <= width) {
        scale += "|" + left + std::string(width - left.size() - right.size(), ' ') + right + "|";
      } else {
        scale += " " + left + " to " + right;
      }
      out += scale + "\n";
    }
    for (RankId r = 0; r < ranks; ++r) {
      std::string name = "r" + std::to_string(r);
      name.resize(label_width, ' ');
      out += name + " |" + rows[r].substr(band, width) + "|\n";
    }
    for (RankId r = 0; r < static_cast<RankId>(memory_rows.size()); ++r) {
      std::string name = "m" + std::to_string(r);
      name.resize(label_width, ' ');
      out += name + " |" + memory_rows[r].substr(band, width) + "|\n";
    }
  }

  std::string legend = "legend:";
  for (const KindInfo& info : KindTable()) {
    if (!present[static_cast<int>(info.kind)]) continue;
    // Each kind by its letter: "F forward" names F already, "F&B overlapped" needs its X.
    const std::string text = info.legend;
    legend += text.size() > 1 && text[0] == info.letter && text[1] == ' '
                  ? " " + text + ","
                  : std::string(" ") + info.letter + " " + text + ",";
  }
  legend += " . idle; a box starts with ";
  legend += with_stage ? "<stage><kind><microbatch> (e.g. 3F12)" : "its microbatch";
  int hidden = 0;  // compute events that own no cell at the widest picture, those of no duration too
  for (int i = 0; i < n; ++i) hidden += !label[i].empty() && !shown[i];
  if (cut) legend += "; + a label too long for its box";
  if (hidden > 0) legend += "; " + std::to_string(hidden) + " action(s) too short to show";
  if (cut || hidden > 0) legend += " (use pplab render)";
  out += legend + "\n";
  if (!memory_rows.empty()) {
    out += "memory: m<r> rows hold each cell's most bytes held by rank r, in ninths of the largest rounded up, 9 = " +
           ByteCount(memory_top, 3) + ", . none\n";
  }
  return out;
}

}  // namespace pplab
