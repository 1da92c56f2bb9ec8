#include "traces/render_svg.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <tuple>

#include "schedules/action_kinds.h"
#include "traces/explain.h"
#include "traces/figures.h"
#include "traces/local_stages.h"

namespace pplab {
namespace {

// Layout in px. Heights are integers so that rows land on whole pixels.
constexpr int kLeft = 64;   // room for "rank r"
constexpr int kRight = 24;  // room for half of the last tick label
constexpr int kTop = 8;
constexpr int kTitleHeight = 22;
constexpr int kHeaderHeight = 18;
constexpr int kLaneHeight = 22;
constexpr int kLaneGap = 4;
constexpr int kBlockGap = 10;
constexpr int kAxisHeight = 26;
constexpr int kLegendHeight = 22;
constexpr int kIdleLineHeight = 14;
constexpr int kMemoryHeight = 16;
constexpr double kCharPx = 6;  // approximate advance of one character at font-size 10

struct KindStyle {
  const char* fill;
  const char* text;
  const char* legend;
};

// Colours, label colours and legends come from the kind table.
KindStyle StyleOf(ActionKind kind) {
  const KindInfo& info = InfoOf(kind);
  return {info.fill, info.label, info.legend};
}

// The fill of local stage `index` of `count` (local_stages.h): the kind's
// colour for index 0, blended towards white in equal steps up to 60 % for the
// last, so a rank's stages are shades of one hue, darkest first. With one
// stage per rank the fill is the kind's colour.
std::string ShadeOf(const char* fill, int index, int count) {
  if (count <= 1 || index <= 0) return fill;
  const double t = 0.6 * index / (count - 1);
  const long rgb = std::strtol(fill + 1, nullptr, 16);
  static const char kHex[] = "0123456789ABCDEF";
  std::string out = "#";
  for (int shift : {16, 8, 0}) {
    const int c = static_cast<int>((rgb >> shift) & 0xff);
    const int mixed = static_cast<int>(c + (255 - c) * t + 0.5);
    out += kHex[mixed >> 4];
    out += kHex[mixed & 15];
  }
  return out;
}

// Black or white, whichever reads better on `fill` (#RRGGBB): the kind's own
// label colour is chosen for its unshaded fill.
std::string LabelOn(const std::string& fill, const char* unshaded_label, bool shaded) {
  if (!shaded) return unshaded_label;
  const long rgb = std::strtol(fill.c_str() + 1, nullptr, 16);
  const double luma = 0.299 * ((rgb >> 16) & 0xff) + 0.587 * ((rgb >> 8) & 0xff) + 0.114 * (rgb & 0xff);
  return luma < 140 ? "#ffffff" : "#000000";
}

// The length of the UTF-8 sequence at text[i], or 0 where none starts there
// (a stray or overlong byte, a surrogate, past U+10FFFF, cut short).
size_t Utf8Length(const std::string& text, size_t i) {
  const auto at = [&](size_t k) { return i + k < text.size() ? static_cast<unsigned char>(text[i + k]) : 0u; };
  const unsigned lead = at(0);
  size_t n = 0;
  unsigned low = 0x80, high = 0xBF;  // the second byte's range
  if (lead >= 0xC2 && lead <= 0xDF) {
    n = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    n = 3;
    if (lead == 0xE0) low = 0xA0;
    if (lead == 0xED) high = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    n = 4;
    if (lead == 0xF0) low = 0x90;
    if (lead == 0xF4) high = 0x8F;
  } else {
    return 0;
  }
  if (at(1) < low || at(1) > high) return 0;
  for (size_t k = 2; k < n; ++k) {
    if (at(k) < 0x80 || at(k) > 0xBF) return 0;
  }
  return n;
}

// Text as XML character data: markup escaped, and what XML 1.0 forbids
// (control characters but tab, newline and return; U+FFFE and U+FFFF; bytes
// that are not UTF-8) replaced by U+FFFD, so that a title or label from the command line
// never makes the picture unreadable.
std::string Escape(const std::string& text) {
  static const std::string kReplacement = "\xEF\xBF\xBD";
  std::string out;
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      const size_t n = Utf8Length(text, i);
      // U+FFFE and U+FFFF are UTF-8 but not XML characters.
      const bool non_character =
          n == 3 && text.compare(i, 2, "\xEF\xBF") == 0 && static_cast<unsigned char>(text[i + 2]) >= 0xBE;
      out += n == 0 || non_character ? kReplacement : text.substr(i, n);
      i += n == 0 ? 1 : n;
      continue;
    }
    ++i;
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f) {
          out += kReplacement;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out;
}

std::string TextAt(double x, double y, const std::string& attrs, const std::string& content) {
  return "<text x=\"" + Fixed(x, 2) + "\" y=\"" + Fixed(y, 2) + "\" " + attrs + ">" + Escape(content) + "</text>\n";
}

std::string Rect(const std::string& cls, double x, double y, double w, double h, const std::string& fill) {
  return "<rect class=\"" + cls + "\" x=\"" + Fixed(x, 2) + "\" y=\"" + Fixed(y, 2) + "\" width=\"" + Fixed(w, 2) +
         "\" height=\"" + Fixed(h, 2) + "\" fill=\"" + fill + "\"";
}

std::string Line(const std::string& cls, double x1, double y1, double x2, double y2, const std::string& style) {
  return "<line class=\"" + cls + "\" x1=\"" + Fixed(x1, 2) + "\" y1=\"" + Fixed(y1, 2) + "\" x2=\"" + Fixed(x2, 2) +
         "\" y2=\"" + Fixed(y2, 2) + "\" " + style + "/>\n";
}

std::string Summary(const Timeline& timeline) {
  const TimelineSummary s = Summarize(timeline);
  return "makespan " + Fixed(NsToMs(s.makespan), 3) + " ms, bubble " + Fixed(100.0 * s.bubble_fraction, 1) + "%";
}

// Maps time onto the plot area; times outside [0, end] are clamped to its edges.
struct Scale {
  double left = 0;
  double width = 0;
  TimeNs end = 0;

  double X(TimeNs t) const {
    if (end <= 0) return left;
    return left + width * std::clamp(static_cast<double>(t) / static_cast<double>(end), 0.0, 1.0);
  }
};

// The smallest 1/2/5 x 10^k ns step that splits [0, end] into at most six
// intervals; integer time keeps the ticks exact.
TimeNs TickStep(TimeNs end) {
  for (TimeNs magnitude = 1; magnitude <= std::numeric_limits<TimeNs>::max() / 60; magnitude *= 10) {
    for (TimeNs m : {1, 2, 5}) {
      if (end <= 6 * m * magnitude) return m * magnitude;
    }
  }
  return end;  // beyond any real step time: a single interval
}

std::vector<TimeNs> Ticks(TimeNs end) {
  const TimeNs step = TickStep(end);
  std::vector<TimeNs> ticks;
  for (TimeNs t = 0; t <= end; t += step) ticks.push_back(t);
  return ticks;
}

// Decimals that show a tick step in ms exactly, e.g. 250000 ns -> 2 ("0.25").
int TickDecimals(const std::vector<TimeNs>& ticks) {
  if (ticks.size() < 2) return 0;
  const TimeNs step = ticks[1] - ticks[0];
  int decimals = 0;
  for (TimeNs unit = kNsPerMs; unit > 1 && step % unit != 0; unit /= 10) ++decimals;
  return decimals;
}

double LaneTop(int top, RankId rank) { return top + rank * (kLaneHeight + kLaneGap); }

using RecvKey = std::tuple<ActionKind, StageId, MicrobatchId>;

std::string DrawComm(const Timeline& timeline, const Scale& scale, int top) {
  // A SEND's peer is the rank holding the matching RECV: SEND_F(s, m) pairs
  // with RECV_F(s+1, m), SEND_B(s, m) with RECV_B(s-1, m).
  std::map<RecvKey, RankId> recv_rank;
  for (const TimelineEvent& e : timeline.events) {
    if (IsRecv(e.action.kind)) recv_rank[{e.action.kind, e.action.stage, e.action.microbatch}] = e.rank;
  }
  std::string out;
  for (const TimelineEvent& e : timeline.events) {
    if (!IsComm(e.action.kind) || e.rank < 0 || e.rank >= timeline.ranks) continue;
    const std::string cls = KindName(e.action.kind);
    const double x0 = scale.X(e.start);
    const double x1 = scale.X(e.end);
    const double y = LaneTop(top, e.rank);
    if (IsRecv(e.action.kind)) {
      // The bar spans posting to arrival: the time the rank may wait.
      out += Rect(cls, x0, y + kLaneHeight - 3, x1 - x0, 3, "#777777") + "/>\n";
      continue;
    }
    const bool forward = e.action.kind == ActionKind::kSendF;
    const RecvKey key{forward ? ActionKind::kRecvF : ActionKind::kRecvB, e.action.stage + (forward ? 1 : -1),
                      e.action.microbatch};
    const auto peer = recv_rank.find(key);
    const RankId to = peer == recv_rank.end() ? e.rank : peer->second;
    // Leave from the lane edge facing the peer and arrive at the peer's facing
    // edge; an unmatched or same-rank send runs along the lane's bottom edge.
    double y0 = y + kLaneHeight;
    double y1 = y + kLaneHeight;
    if (to > e.rank && to < timeline.ranks) {
      y1 = LaneTop(top, to);
    } else if (to < e.rank && to >= 0) {
      y0 = y;
      y1 = LaneTop(top, to) + kLaneHeight;
    }
    out += Line(cls, x0, y0, x1, y1, "stroke=\"#333333\" stroke-width=\"0.8\" stroke-opacity=\"0.7\"");
  }
  return out;
}

// Lanes, rank labels, grid and boxes of one timeline whose lanes start at `top`.
std::string DrawLanes(const Timeline& timeline, const Scale& scale, const std::vector<TimeNs>& ticks, int top,
                      bool show_comm) {
  std::string out;
  const int ranks = std::max(0, timeline.ranks);
  for (RankId r = 0; r < ranks; ++r) {
    const double y = LaneTop(top, r);
    out += TextAt(kLeft - 6, y + kLaneHeight / 2.0 + 4, "text-anchor=\"end\" font-size=\"11\"",
                  "rank " + std::to_string(r));
    out += Rect("lane", scale.left, y, scale.width, kLaneHeight, "#eeeeee") + "/>\n";
  }
  if (ranks > 0) {
    for (TimeNs t : ticks) {
      out += Line("grid", scale.X(t), top, scale.X(t), LaneTop(top, ranks) - kLaneGap,
                  "stroke=\"#ffffff\" stroke-width=\"1\"");
    }
  }
  const LocalStages local(timeline);
  const int shades = local.MaxPerRank();
  const auto fill_of = [&](const Action& a, RankId r) {
    return ShadeOf(StyleOf(a.kind).fill, local.IndexOf(r, a.stage), shades);
  };
  for (const TimelineEvent& e : timeline.events) {
    if (!IsCompute(e.action.kind) || e.rank < 0 || e.rank >= ranks) continue;
    const KindStyle style = StyleOf(e.action.kind);
    const std::string fill = fill_of(e.action, e.rank);
    const double x0 = scale.X(e.start);
    const double w = scale.X(e.end) - x0;
    const double y = LaneTop(top, e.rank);
    out += "<g><title>" + Escape(EventName(e.action)) + " " + Fixed(NsToMs(e.start), 3) + "-" +
           Fixed(NsToMs(e.end), 3) + " ms</title>";
    // A thin white outline keeps back-to-back boxes apart without hiding idle gaps.
    out += Rect(KindName(e.action.kind), x0, y, w, kLaneHeight, fill) + " stroke=\"#ffffff\" stroke-width=\"0.5\"/>";
    if (e.action.kind == ActionKind::kOverlapFB) {
      // One split box: the forward's colour above, the backward's below.
      const ComputeParts parts = PartsOf(e.action);
      out += Rect("OVERLAP_F_B-F", x0, y, w, kLaneHeight / 2.0, fill_of(parts.part[0], e.rank)) + "/>";
      out +=
          Rect("OVERLAP_F_B-B", x0, y + kLaneHeight / 2.0, w, kLaneHeight / 2.0, fill_of(parts.part[1], e.rank)) + "/>";
    }
    const std::string label = std::to_string(e.action.microbatch);
    if (w >= 4 + kCharPx * label.size()) {
      out += TextAt(x0 + w / 2, y + kLaneHeight / 2.0 + 3.5,
                    "text-anchor=\"middle\" font-size=\"10\" fill=\"" + LabelOn(fill, style.text, shades > 1) + "\"",
                    label);
    }
    out += "</g>\n";
  }
  if (show_comm) out += DrawComm(timeline, scale, top);
  return out;
}

bool DrawsMemory(const Timeline& timeline, const SvgOptions& options) {
  return options.show_memory && timeline.ranks > 0 && !timeline.memory.empty();
}

// The top of every memory row: the largest sample of the timelines drawn
// with one, at least 1 byte so that an all-zero curve stays on the baseline.
Bytes MemoryScale(const std::vector<const Timeline*>& timelines, const SvgOptions& options) {
  Bytes top = 1;
  for (const Timeline* t : timelines) {
    if (!DrawsMemory(*t, options)) continue;
    for (const MemorySample& m : t->memory) top = std::max(top, m.bytes);
  }
  return top;
}

// One row per rank under the lanes that start at `top`: the bytes the rank
// holds as a filled step curve, 0 at the row's bottom and `scale_bytes` at
// its top, with the rank's peak (the first time it is reached) in the row.
std::string DrawMemory(const Timeline& timeline, const Scale& scale, Bytes scale_bytes, int top) {
  const std::vector<std::vector<MemorySample>> by_rank = MemoryByRank(timeline);
  std::string out;
  for (RankId r = 0; r < timeline.ranks; ++r) {
    const std::vector<MemorySample>& samples = by_rank[r];
    const double y = top + r * (kMemoryHeight + kLaneGap);
    const double bottom = y + kMemoryHeight;
    const auto height_of = [&](Bytes b) {
      return bottom - kMemoryHeight * std::clamp(static_cast<double>(b) / static_cast<double>(scale_bytes), 0.0, 1.0);
    };
    out += TextAt(kLeft - 6, y + kMemoryHeight / 2.0 + 3.5, "text-anchor=\"end\" font-size=\"9\"",
                  "mem " + std::to_string(r));
    out += Rect("memory-lane", scale.left, y, scale.width, kMemoryHeight, "#f4f4f4") + "/>\n";
    if (samples.empty()) continue;
    const MemorySample* peak = &samples.front();
    std::string d = "M" + Fixed(scale.left, 2) + " " + Fixed(bottom, 2);
    for (const MemorySample& m : samples) {
      if (m.bytes > peak->bytes) peak = &m;
      d += " H" + Fixed(scale.X(m.time), 2) + " V" + Fixed(height_of(m.bytes), 2);
    }
    d += " H" + Fixed(scale.left + scale.width, 2) + " V" + Fixed(bottom, 2) + " Z";
    const std::string peak_text = "peak " + ByteCount(peak->bytes, 2) + " at " + Fixed(NsToMs(peak->time), 3) + " ms";
    out += "<g><title>rank " + std::to_string(r) + " " + peak_text + "</title><path class=\"memory\" d=\"" + d +
           "\" fill=\"#9b7fc8\" fill-opacity=\"0.5\" stroke=\"#5b3f8c\" stroke-width=\"0.8\"/></g>\n";
    out += TextAt(scale.left + 3, y + 10, "class=\"memory-peak\" font-size=\"9\" fill=\"#333333\"", peak_text);
  }
  return out;
}

std::string DrawAxis(const Scale& scale, const std::vector<TimeNs>& ticks, int y) {
  std::string out = Line("axis", scale.left, y, scale.left + scale.width, y, "stroke=\"#000000\" stroke-width=\"1\"");
  const int decimals = TickDecimals(ticks);
  for (TimeNs t : ticks) {
    out += Line("tick", scale.X(t), y, scale.X(t), y + 4, "stroke=\"#000000\" stroke-width=\"1\"");
    out += TextAt(scale.X(t), y + 15, "text-anchor=\"middle\" font-size=\"10\"", Fixed(NsToMs(t), decimals) + " ms");
  }
  return out;
}

// The most stages one rank computes in any of `timelines`: the number of
// shades, and of legend rows beyond the first.
int ShadesOf(const std::vector<const Timeline*>& timelines) {
  int shades = 0;
  for (const Timeline* t : timelines) shades = std::max(shades, LocalStages(*t).MaxPerRank());
  return shades;
}

std::string Ordinal(int n) {
  const int tens = n % 100;
  const char* suffix = tens >= 11 && tens <= 13 ? "th"
                       : n % 10 == 1            ? "st"
                       : n % 10 == 2            ? "nd"
                       : n % 10 == 3            ? "rd"
                                                : "th";
  return std::to_string(n) + suffix;
}

// One row of kinds; with several stages per rank, one row per local stage,
// headed "1st stage of a rank:", "2nd stage of a rank:", ..., each swatch in
// that stage's shade (class "swatch-<local index>").
std::string DrawLegend(const std::vector<const Timeline*>& timelines, const SvgOptions& options, int y) {
  bool present[kNumActionKinds] = {};
  for (const Timeline* t : timelines) {
    for (const TimelineEvent& e : t->events) {
      present[static_cast<int>(e.action.kind)] = true;
      for (const Action& part : PartsOf(e.action)) present[static_cast<int>(part.kind)] = true;
    }
  }
  const int shades = ShadesOf(timelines);
  std::string out;
  double x = kLeft;
  const auto entry = [&](const std::string& swatch, const std::string& label) {
    out += swatch;
    out += TextAt(x + 16, y + 10, "font-size=\"10\"", label);
    x += 16 + kCharPx * label.size() + 16;
  };
  for (int row = 0; row < std::max(1, shades); ++row) {
    if (row > 0) {
      y += kLegendHeight;
      x = kLeft;
    }
    if (shades > 1) {
      const std::string head = Ordinal(row + 1) + " stage of a rank:";
      out += TextAt(x, y + 10, "font-size=\"10\"", head);
      x += kCharPx * head.size() + 8;
    }
    const std::string cls = shades > 1 ? "swatch-" + std::to_string(row) : "swatch";
    for (const KindInfo& info : KindTable()) {
      if (!present[static_cast<int>(info.kind)] || !IsCompute(info.kind)) continue;
      entry(Rect(cls, x, y, 12, 12, ShadeOf(info.fill, row, shades)) + "/>\n", info.legend);
    }
  }
  if (options.show_comm) {
    if (present[static_cast<int>(ActionKind::kSendF)] || present[static_cast<int>(ActionKind::kSendB)]) {
      entry(Line("swatch", x, y + 6, x + 12, y + 6, "stroke=\"#333333\" stroke-width=\"0.8\""), "SEND transfer");
    }
    if (present[static_cast<int>(ActionKind::kRecvF)] || present[static_cast<int>(ActionKind::kRecvB)]) {
      entry(Rect("swatch", x, y + 9, 12, 3, "#777777") + "/>\n", "RECV posted to arrival");
    }
  }
  if (std::any_of(timelines.begin(), timelines.end(), [&](const Timeline* t) { return DrawsMemory(*t, options); })) {
    entry(Rect("swatch memory", x, y, 12, 12, "#9b7fc8") + "/>\n",
          "activation bytes, row height = " + ByteCount(MemoryScale(timelines, options), 2));
  }
  return out;
}

// "rank 0 idle 4.000 ms: warm-up 0.000, cool-down 0.000, imbalance 3.500
// (s1 3.500), comm 0.500, shared device 0.000": the idle split of
// explain.h, one line per rank, or nothing when the timeline has none (a
// rank runs two compute actions at once). `y` advances past the lines.
std::string DrawIdleSplit(const Timeline& timeline, const std::string& heading, int& y) {
  if (timeline.ranks <= 0 || !CanExplainIdle(timeline)) return "";
  const IdleExplanation x = ExplainIdle(timeline);
  auto ms = [](TimeNs ns) { return Fixed(NsToMs(ns), 3); };
  std::string out = TextAt(kLeft, y + 10, "class=\"idle-split\" font-size=\"10\" font-weight=\"bold\"",
                           heading + "idle = makespan - busy, by cause (ms; pplab explain)");
  y += kIdleLineHeight;
  for (const RankIdle& exact : x.per_rank) {
    const RankIdle r = RoundedIdle(exact, x.makespan, 1000);  // as printed: the parts add up to idle
    std::string stages;
    for (const auto& [stage, ns] : r.imbalance_by_stage) {
      stages += (stages.empty() ? " (" : ", ") + std::string("s") + std::to_string(stage) + " " + ms(ns);
    }
    if (!stages.empty()) stages += ")";
    std::string line = "rank " + std::to_string(r.rank) + " idle " + ms(r.idle) + ": warm-up " + ms(r.warm_up) +
                       ", cool-down " + ms(r.cool_down) + ", imbalance " + ms(r.imbalance) + stages + ", comm " +
                       ms(r.comm) + ", shared device " + ms(r.shared_device);
    if (r.other != 0) line += ", other " + ms(r.other);
    out += TextAt(kLeft, y + 10, "class=\"idle-split\" font-size=\"10\"", line);
    y += kIdleLineHeight;
  }
  return out;
}

// The right edge, in px, of the widest left-anchored <text> in `svg` as
// TextAt writes them: its x plus its characters at kCharPx a character of
// font-size 10, scaled by its font-size (markup escapes count as one).
int TextRight(const std::string& svg) {
  double right = 0;
  for (size_t at = svg.find("<text x=\""); at != std::string::npos; at = svg.find("<text x=\"", at + 1)) {
    const size_t open_end = svg.find('>', at), close = svg.find("</text>", at);
    if (open_end == std::string::npos || close == std::string::npos) break;
    const std::string tag = svg.substr(at, open_end - at);
    if (tag.find("text-anchor") != std::string::npos) continue;  // right- or middle-anchored: inside the plot
    const double x = std::strtod(svg.c_str() + at + 9, nullptr);
    double size = 10;
    if (const size_t f = tag.find("font-size=\""); f != std::string::npos)
      size = std::strtod(tag.c_str() + f + 11, nullptr);
    size_t chars = 0;
    for (size_t i = open_end + 1; i < close; ++i) {
      const unsigned char c = static_cast<unsigned char>(svg[i]);
      if ((c & 0xC0) == 0x80) continue;    // a UTF-8 continuation byte
      if (c == '&') i = svg.find(';', i);  // an escape: one character
      ++chars;
    }
    right = std::max(right, x + kCharPx * size / 10 * static_cast<double>(chars));
  }
  return static_cast<int>(std::ceil(right));
}

std::string BlockLabel(const Timeline& timeline, const std::string& given) {
  std::string label = !given.empty() ? given : timeline.source.empty() ? "timeline" : timeline.source;
  if (!timeline.name.empty()) label += ": " + timeline.name;
  return label + "  (" + Summary(timeline) + ")";
}

std::string Render(const std::vector<const Timeline*>& all, const SvgOptions& options, bool stacked,
                   const std::vector<std::string>& all_labels) {
  std::vector<const Timeline*> timelines;
  std::vector<std::string> labels;
  TimeNs end = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    const Timeline* t = all[i];
    if (t == nullptr) continue;
    timelines.push_back(t);
    labels.push_back(i < all_labels.size() ? all_labels[i] : "");
    end = std::max(end, t->Makespan());
  }
  const int plot_width = std::max(1, options.width_px - kLeft - kRight);
  const Scale scale{static_cast<double>(kLeft), static_cast<double>(plot_width), end};
  const std::vector<TimeNs> ticks = Ticks(end);
  const Bytes memory_scale = MemoryScale(timelines, options);

  std::string body;
  int y = kTop;
  if (!options.title.empty()) {
    body += TextAt(8, y + 15, "font-size=\"15\" font-weight=\"bold\"", options.title);
    y += kTitleHeight;
  }
  for (size_t i = 0; i < timelines.size(); ++i) {
    const Timeline* t = timelines[i];
    body += TextAt(8, y + 13, "font-size=\"12\"", stacked ? BlockLabel(*t, labels[i]) : Summary(*t));
    y += kHeaderHeight;
    body += DrawLanes(*t, scale, ticks, y, options.show_comm);
    y += std::max(0, t->ranks) * (kLaneHeight + kLaneGap);
    if (DrawsMemory(*t, options)) {
      body += DrawMemory(*t, scale, memory_scale, y);
      y += t->ranks * (kMemoryHeight + kLaneGap);
    }
    y += kBlockGap;
  }
  body += DrawAxis(scale, ticks, y);
  y += kAxisHeight;
  body += DrawLegend(timelines, options, y);
  y += kLegendHeight * std::max(1, ShadesOf(timelines));
  for (size_t i = 0; i < timelines.size(); ++i) {
    const std::string heading = stacked ? BlockLabel(*timelines[i], labels[i]) + ": " : "";
    body += DrawIdleSplit(*timelines[i], heading, y);
  }

  // The picture is as wide as the plot, or its widest line of text, where
  // that is wider (a legend or an idle split past a narrow --width was cut).
  const std::string width = std::to_string(std::max(kLeft + plot_width + kRight, TextRight(body) + kRight));
  const std::string height = std::to_string(y + kTop);
  return "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + width + "\" height=\"" + height + "\" viewBox=\"0 0 " +
         width + " " + height + "\" font-family=\"sans-serif\">\n" +
         "<rect class=\"background\" width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n" + body + "</svg>\n";
}

}  // namespace

std::string RenderSvg(const Timeline& timeline, const SvgOptions& options) {
  return Render({&timeline}, options, /*stacked=*/false, {});
}

std::string RenderSvgStack(const std::vector<const Timeline*>& timelines, const SvgOptions& options,
                           const std::vector<std::string>& labels) {
  return Render(timelines, options, /*stacked=*/true, labels);
}

}  // namespace pplab
