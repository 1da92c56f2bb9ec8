// pplab diff SIM.json REAL.json: where a measured timeline departs from the
// predicted one of the same plan (step time, per-rank busy/idle, the largest
// per-action deviations, and the first action that drifts).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <optional>

#include "schedules/file_io.h"
#include "tools/commands.h"
#include "tools/report.h"
#include "traces/chrome_trace.h"
#include "traces/diff.h"

namespace pplab::cli {
namespace {

using nlohmann::json;

struct DiffCmdOptions {
  std::string predicted_path;
  std::string measured_path;
  std::optional<double> threshold_ms;
  int top = 10;
  bool json = false;
};

json SideJson(const std::string& path, const Timeline& t, const TimelineSummary& s) {
  json per_rank = json::array();
  for (size_t r = 0; r < s.per_rank.size(); ++r) {
    const TimeNs idle = s.makespan - s.per_rank[r].busy;
    per_rank.push_back({{"rank", r},
                        {"busy", NsToMs(s.per_rank[r].busy)},
                        {"idle", NsToMs(idle)},
                        {"bubble_fraction", s.makespan > 0 ? static_cast<double>(idle) / s.makespan : 0.0}});
  }
  return {{"file", path},
          {"name", t.name},
          {"source", t.source},
          {"makespan", NsToMs(s.makespan)},
          {"bubble_fraction", s.bubble_fraction},
          {"per_rank", per_rank}};
}

json DeviationJson(const ActionDeviation& a, bool duration) {
  json j = {{"rank", a.rank}, {"action", FormatAction(a.action)}};
  if (duration) {
    j["predicted"] = NsToMs(a.predicted_end - a.predicted_start);
    j["measured"] = NsToMs(a.measured_end - a.measured_start);
    j["delta"] = NsToMs(a.DurationDelta());
  } else {
    j["predicted"] = NsToMs(a.predicted_start);
    j["measured"] = NsToMs(a.measured_start);
    j["delta"] = NsToMs(a.StartDelta());
  }
  return j;
}

// Each rank's largest held bytes on both sides (null where a side has no
// counter for it), with the error where the prediction is positive; null
// when neither side has a counter.
json HeldJson(const TimelineDiff& d) {
  bool any = false;
  json rows = json::array();
  for (int r = 0; r < d.ranks; ++r) {
    const std::optional<Bytes> p = d.predicted_held[r], m = d.measured_held[r];
    any = any || p || m;
    rows.push_back({{"rank", r},
                    {"predicted", p ? json(*p) : json(nullptr)},
                    {"measured", m ? json(*m) : json(nullptr)},
                    {"error", p && m && *p > 0 ? json(static_cast<double>(*m - *p) / *p) : json(nullptr)}});
  }
  return any ? rows : json(nullptr);
}

void PrintHeld(const json& rows) {
  if (rows.is_null()) return;
  std::printf(
      "bytes held between actions, largest by rank (the traces' activation bytes; temporaries not "
      "included):\n");
  const auto mb = [](const json& v) {
    return v.is_null() ? std::string("-") : Fixed(v.get<double>() / 1e6, 3) + " MB";
  };
  for (const json& r : rows) {
    char error[64] = "";
    if (!r["error"].is_null()) {
      std::snprintf(error, sizeof error, "  (measured / predicted - 1: %+.2f %%)", 100 * r["error"].get<double>());
    }
    std::printf("  rank %3d  predicted %12s  measured %12s%s\n", r["rank"].get<int>(), mb(r["predicted"]).c_str(),
                mb(r["measured"]).c_str(), error);
  }
}

void PrintDeviations(const char* what, const json& rows) {
  std::printf("largest %s deviations (ms):\n", what);
  if (rows.empty()) std::printf("  none\n");
  for (const json& r : rows) {
    std::printf("  rank %3d  %-10s predicted %11s  measured %11s  delta %+11.3f\n", r["rank"].get<int>(),
                r["action"].get<std::string>().c_str(), Fixed(r["predicted"].get<double>(), 3).c_str(),
                Fixed(r["measured"].get<double>(), 3).c_str(), r["delta"].get<double>());
  }
}

int RunDiff(const DiffCmdOptions& o) {
  const Timeline predicted = TimelineFromChromeTrace(ReadTextFile(o.predicted_path), o.predicted_path);
  const Timeline measured = TimelineFromChromeTrace(ReadTextFile(o.measured_path), o.measured_path);
  DiffOptions options;
  options.top = o.top;
  if (o.threshold_ms) options.threshold = MsToNs(*o.threshold_ms);
  const TimelineDiff d = DiffTimelines(predicted, measured, options, o.predicted_path, o.measured_path);

  const double p_ms = NsToMs(d.predicted.makespan), m_ms = NsToMs(d.measured.makespan);
  json top_start = json::array(), top_duration = json::array();
  for (const ActionDeviation& a : d.top_start) top_start.push_back(DeviationJson(a, false));
  for (const ActionDeviation& a : d.top_duration) top_duration.push_back(DeviationJson(a, true));
  const json j = {
      {"predicted", SideJson(o.predicted_path, predicted, d.predicted)},
      {"measured", SideJson(o.measured_path, measured, d.measured)},
      {"makespan_ratio", p_ms > 0 ? json(m_ms / p_ms) : json(nullptr)},
      {"makespan_error", p_ms > 0 ? json((m_ms - p_ms) / p_ms) : json(nullptr)},
      {"matched_compute_actions", d.matched_compute},
      {"unmatched_actions",
       {{"predicted_only", d.only_predicted},
        {"measured_only", d.only_measured},
        {"predicted_only_kinds", d.only_predicted_kinds},
        {"measured_only_kinds", d.only_measured_kinds}}},
      {"threshold_ms", NsToMs(d.threshold)},
      {"top_start_deviations", top_start},
      {"top_duration_deviations", top_duration},
      {"first_drift", d.first_drift ? DeviationJson(*d.first_drift, false) : json(nullptr)},
      {"held_bytes", HeldJson(d)},
  };
  if (o.json) {
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("predicted %s (%s): makespan %s ms, bubble %s %%\n", o.predicted_path.c_str(), predicted.name.c_str(),
              Fixed(p_ms, 3).c_str(), Fixed(100 * d.predicted.bubble_fraction, 2).c_str());
  std::printf("measured  %s (%s): makespan %s ms, bubble %s %%\n", o.measured_path.c_str(), measured.name.c_str(),
              Fixed(m_ms, 3).c_str(), Fixed(100 * d.measured.bubble_fraction, 2).c_str());
  if (p_ms > 0) {
    std::printf("step time: measured / predicted = %s (error %+.2f %%)\n", Fixed(m_ms / p_ms, 4).c_str(),
                100 * (m_ms - p_ms) / p_ms);
  }
  const auto kinds = [](const std::map<std::string, size_t>& counts) {
    std::string text;
    for (const auto& [kind, count] : counts) text += (text.empty() ? " (" : ", ") + kind + " " + std::to_string(count);
    return text.empty() ? text : text + ")";
  };
  std::printf("%zu compute actions matched; other actions only in predicted: %zu%s, only in measured: %zu%s\n",
              d.matched_compute, d.only_predicted, kinds(d.only_predicted_kinds).c_str(), d.only_measured,
              kinds(d.only_measured_kinds).c_str());
  std::printf("  rank   pred busy   pred idle  pred bubble   meas busy   meas idle  meas bubble\n");
  const json& pr = j["predicted"]["per_rank"];
  const json& mr = j["measured"]["per_rank"];
  for (size_t r = 0; r < pr.size(); ++r) {
    std::printf("  %4zu %11.3f %11.3f %11.2f%% %11.3f %11.3f %11.2f%%\n", r, pr[r]["busy"].get<double>(),
                pr[r]["idle"].get<double>(), 100 * pr[r]["bubble_fraction"].get<double>(), mr[r]["busy"].get<double>(),
                mr[r]["idle"].get<double>(), 100 * mr[r]["bubble_fraction"].get<double>());
  }
  PrintHeld(j["held_bytes"]);
  PrintDeviations("start", top_start);
  PrintDeviations("duration", top_duration);
  if (d.first_drift) {
    const ActionDeviation& a = *d.first_drift;
    std::printf(
        "first drift (|start delta| > %s ms): rank %d %s, predicted start %s ms, measured %s ms, delta %+.3f ms\n",
        Fixed(NsToMs(d.threshold), 3).c_str(), a.rank, FormatAction(a.action).c_str(),
        Fixed(NsToMs(a.predicted_start), 3).c_str(), Fixed(NsToMs(a.measured_start), 3).c_str(),
        NsToMs(a.StartDelta()));
  } else {
    std::printf("no drift: every start within %s ms of its prediction\n", Fixed(NsToMs(d.threshold), 3).c_str());
  }
  return 0;
}

}  // namespace

void SetupDiff(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<DiffCmdOptions>();
  CLI::App* sub =
      app.add_subcommand("diff", "compare a predicted trace with a measured one of the same plan, action by action");
  sub->add_option("predicted", o->predicted_path, "predicted trace (simulate --trace)")->required();
  sub->add_option("measured", o->measured_path, "measured trace (train --trace)")->required();
  sub->add_option("--threshold-ms", o->threshold_ms,
                  "start deviation that counts as drift, ms (default: 5% of the predicted makespan)")
      ->check(CLI::Range(0.0, 1e7));
  sub->add_option("--top", o->top, "how many of the largest deviations to list")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  sub->add_flag("--json", o->json, "print one JSON object");
  sub->callback([o, &exit_code] { exit_code = RunDiff(*o); });
}

}  // namespace pplab::cli
