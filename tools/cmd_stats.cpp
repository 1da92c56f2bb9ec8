// pplab stats TRACE: figures of a (measured or simulated) trace, and a cost
// model estimated from it that `pplab simulate --cost` reads.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "schedules/file_io.h"
#include "sim/measured_costs.h"
#include "tools/commands.h"
#include "tools/output_files.h"
#include "tools/report.h"
#include "traces/chrome_trace.h"

namespace pplab::cli {
namespace {

struct StatsOptions {
  std::string trace_path;
  std::string cost_out;
  bool json = false;
};

int RunStats(const StatsOptions& o) {
  CheckOutputFiles({{"--cost-out", o.cost_out}}, {{"the trace", o.trace_path}});
  const Timeline t = TimelineFromChromeTrace(ReadTextFile(o.trace_path), o.trace_path);
  const TimelineSummary summary = Summarize(t);
  const auto means = MeanComputeMs(t);
  std::vector<int> actions(t.ranks, 0);
  for (const TimelineEvent& e : t.events) {
    if (IsCompute(e.action.kind)) ++actions[e.rank];
  }
  const StageId max_stage = means.empty() ? -1 : means.rbegin()->first.first;
  auto mean_ms = [&](StageId s, ActionKind k) -> std::optional<double> {
    const auto it = means.find({s, k});
    if (it == means.end()) return std::nullopt;
    return it->second;
  };
  // Each rank's largest bytes held between actions, where the trace has the
  // activation bytes counter (simulate with bytes, train --measure-memory).
  const std::vector<std::optional<Bytes>> held = LargestHeldBytes(t);
  const bool has_memory = !t.memory.empty();
  nlohmann::json per_rank = nlohmann::json::array();
  for (RankId r = 0; r < t.ranks; ++r) {
    const RankSummary& rs = summary.per_rank[r];
    const TimeNs span = rs.end - rs.start;
    per_rank.push_back({{"rank", r},
                        {"actions", actions[r]},
                        {"busy", NsToMs(rs.busy)},
                        {"idle", NsToMs(summary.makespan - rs.busy)},
                        {"span", NsToMs(span)},
                        // Time inside the rank's span not spent computing: waits and executor overhead.
                        {"gaps_per_action", actions[r] > 0 ? NsToMs(span - rs.busy) / actions[r] : 0.0}});
    if (has_memory) per_rank.back()["peak_held_bytes"] = held[r] ? nlohmann::json(*held[r]) : nlohmann::json(nullptr);
  }
  nlohmann::json stages = nlohmann::json::array();
  std::vector<std::pair<ActionKind, const char*>> kinds = {{ActionKind::kForward, "forward_ms"},
                                                           {ActionKind::kBackward, "backward_ms"},
                                                           {ActionKind::kBackwardInput, "backward_input_ms"},
                                                           {ActionKind::kBackwardWeight, "backward_weight_ms"}};
  // An overlapped F&B (DualPipe's), by its forward part's stage, where the
  // trace has one, as --cost-out writes it.
  if (std::any_of(means.begin(), means.end(), [](const auto& m) { return m.first.second == ActionKind::kOverlapFB; })) {
    kinds.push_back({ActionKind::kOverlapFB, "forward_backward_ms"});
  }
  for (StageId s = 0; s <= max_stage; ++s) {
    nlohmann::json st = {{"stage", s}};
    for (const auto& [kind, key] : kinds) {
      if (const auto m = mean_ms(s, kind)) st[key] = *m;
    }
    stages.push_back(st);
  }
  if (!o.cost_out.empty()) WriteTextFile(o.cost_out, MeasuredCostJson(t, o.trace_path));
  // The messages' time as their receivers saw it: exact where they waited
  // for it, a bound where it came while they worked (sim/measured_costs.h).
  const std::vector<WaitedMessage> messages = WaitedMessages(t);
  const std::vector<double> waited = SortedMs(messages);
  const double waited_median = CensoredMedian(messages).value_or(0);
  size_t late = 0;
  for (const WaitedMessage& m : messages) late += m.seen == WaitedMessage::Seen::kLate ? 1 : 0;
  const size_t early = messages.size() - waited.size();
  // And each direction with samples enough (the links --cost-out writes).
  const std::vector<LinkWaits> by_link = WaitedByLink(messages);
  nlohmann::json waited_json = nullptr;
  if (!waited.empty()) {
    nlohmann::json links = nlohmann::json::array();
    for (const LinkWaits& l : by_link) {
      links.push_back(
          {{"from", l.from}, {"to", l.to}, {"count", l.count}, {"early", l.early}, {"median", l.median_ms}});
    }
    waited_json = {{"count", waited.size()}, {"late", late},         {"early", early},  {"median", waited_median},
                   {"min", waited.front()},  {"max", waited.back()}, {"by_link", links}};
  }
  // Devices that ranks share: how much of the step some rank computed on
  // each, and how much more of them at once than its slots.
  const std::vector<DeviceUse> shared = SharedDeviceUse(t);
  nlohmann::json j = {{"name", t.name},
                      {"source", t.source},
                      {"ranks", t.ranks},
                      {"makespan", NsToMs(summary.makespan)},
                      {"bubble_fraction", summary.bubble_fraction},
                      {"span_bubble_fraction", summary.span_bubble_fraction},
                      {"per_rank", per_rank},
                      {"stages", stages},
                      {"waited_message_ms", waited_json}};
  if (!shared.empty()) j["shared_devices"] = SharedDevicesJson(shared);
  if (o.json) {
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("%s (%s): K=%d makespan %s ms, bubble %s %%, span bubble %s %%\n", t.name.c_str(), t.source.c_str(),
              t.ranks, Fixed(NsToMs(summary.makespan), 3).c_str(), Fixed(100 * summary.bubble_fraction, 2).c_str(),
              Fixed(100 * summary.span_bubble_fraction, 2).c_str());
  std::vector<std::vector<std::string>> ranks = {
      {"rank", "actions", "busy_ms", "idle_ms", "span_ms", "gaps_per_action_ms"}};
  if (has_memory) ranks[0].push_back("peak_held_MB");
  for (const auto& r : per_rank) {
    ranks.push_back({r["rank"].dump(), r["actions"].dump(), Fixed(r["busy"].get<double>(), 3),
                     Fixed(r["idle"].get<double>(), 3), Fixed(r["span"].get<double>(), 3),
                     Fixed(r["gaps_per_action"].get<double>(), 4)});
    if (has_memory) {
      const nlohmann::json& b = r["peak_held_bytes"];
      ranks.back().push_back(b.is_null() ? "-" : Fixed(b.get<double>() / 1e6, 3));
    }
  }
  PrintTable(ranks, 0);
  if (!stages.empty()) {
    // Mean time of each compute kind per stage; "-" where the trace has none.
    std::vector<std::vector<std::string>> table = {{"stage"}};
    for (const auto& kind : kinds) table[0].push_back(kind.second);
    for (const auto& st : stages) {
      std::vector<std::string> row = {st["stage"].dump()};
      for (const auto& kind : kinds) {
        row.push_back(st.contains(kind.second) ? Fixed(st[kind.second].get<double>(), 4) : "-");
      }
      table.push_back(std::move(row));
    }
    std::printf("\n");
    PrintTable(table, 0);
  }
  if (!waited.empty()) {
    std::printf(
        "\nmessages a receiver waited for: %zu (%zu of them after its work ended), from the SEND's start to the "
        "receiver's start %s to %s ms; with the %zu that came while it worked as bounds, median %s ms\n",
        waited.size(), late, Fixed(waited.front(), 4).c_str(), Fixed(waited.back(), 4).c_str(), early,
        Fixed(waited_median, 4).c_str());
    if (!by_link.empty()) {
      std::printf("  by direction (%zu or more waited for each):", kMinLinkSamples);
      for (size_t i = 0; i < by_link.size(); ++i) {
        std::printf("%s rank %d -> %d median %s ms (%zu, %zu bounds)", i == 0 ? "" : ";", by_link[i].from,
                    by_link[i].to, Fixed(by_link[i].median_ms, 4).c_str(), by_link[i].count, by_link[i].early);
      }
      std::printf("\n");
    }
    // A receiver cannot start on a message before it is sent: on one host
    // the ranks share a clock, so this is a trace edited or pasted from
    // hosts whose clocks differ. The cost file takes such a latency as 0.
    const size_t before_sent =
        static_cast<size_t>(std::count_if(waited.begin(), waited.end(), [](double ms) { return ms < 0; }));
    if (before_sent > 0) {
      std::printf(
          "note: %zu of them started on the message before its SEND started (by up to %s ms): the ranks' clocks "
          "disagree, or the trace was edited; a negative latency is taken as 0 (--cost-out)\n",
          before_sent, Fixed(-waited.front(), 4).c_str());
    }
  }
  std::printf("%s", SharedDevicesText(shared, summary.makespan).c_str());
  if (!o.cost_out.empty()) std::printf("cost model estimated from the trace written to %s\n", o.cost_out.c_str());
  return 0;
}

}  // namespace

void SetupStats(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<StatsOptions>();
  CLI::App* sub = app.add_subcommand("stats", "figures of a trace; --cost-out estimates a cost model from it");
  sub->add_option("trace", o->trace_path, "trace file (from simulate --trace or train --trace)")->required();
  sub->add_option("--cost-out", o->cost_out,
                  "write the mean F/B/I/W time per stage, and as the link's latency the median time receivers saw "
                  "messages take (those that came while the receiver worked as bounds), as a cost-model JSON");
  sub->add_flag("--json", o->json, "print one JSON object");
  sub->callback([o, &exit_code] { exit_code = RunStats(*o); });
}

}  // namespace pplab::cli
