// pplab explain TRACE: why each rank of a (simulated or measured) trace is
// idle: warm-up, cool-down, waiting on a slower stage, on communication, on
// a shared device (traces/explain.h, docs/explain.md).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>

#include "schedules/file_io.h"
#include "tools/commands.h"
#include "tools/report.h"
#include "traces/chrome_trace.h"
#include "traces/explain.h"

namespace pplab::cli {
namespace {

struct ExplainOptions {
  std::string trace_path;
  bool json = false;
};

// "s2 3.000, s3 1.000": the stages a rank waited for and for how long, ms.
std::string WaitedFor(const RankIdle& r) {
  std::string out;
  for (const auto& [stage, ns] : r.imbalance_by_stage) {
    out += (out.empty() ? "" : ", ") + std::string("s") + std::to_string(stage) + " " + Fixed(NsToMs(ns), 3);
  }
  return out.empty() ? "-" : out;
}

nlohmann::json RankJson(const RankIdle& r) {
  nlohmann::json stages = nlohmann::json::array();
  for (const auto& [stage, ns] : r.imbalance_by_stage) stages.push_back({{"stage", stage}, {"ms", NsToMs(ns)}});
  return {{"rank", r.rank},
          {"busy", NsToMs(r.busy)},
          {"idle", NsToMs(r.idle)},
          {"warm_up", NsToMs(r.warm_up)},
          {"cool_down", NsToMs(r.cool_down)},
          {"imbalance", NsToMs(r.imbalance)},
          {"comm", NsToMs(r.comm)},
          {"shared_device", NsToMs(r.shared_device)},
          {"other", NsToMs(r.other)},
          {"imbalance_by_stage", stages}};
}

// "0,0,1" from {0, 0, 1}.
std::string Joined(const std::vector<int>& xs) {
  std::string out;
  for (int x : xs) out += (out.empty() ? "" : ",") + std::to_string(x);
  return out;
}

int RunExplain(const ExplainOptions& o) {
  const Timeline t = TimelineFromChromeTrace(ReadTextFile(o.trace_path), o.trace_path);
  const IdleExplanation x = ExplainIdle(t);
  // Busy time on a shared device: what sharing costs inside the actions,
  // beside the waits the table splits.
  const std::vector<DeviceUse> shared = SharedDeviceUse(t);
  if (o.json) {
    nlohmann::json per_rank = nlohmann::json::array();
    for (const RankIdle& r : x.per_rank) per_rank.push_back(RankJson(r));
    const nlohmann::json j = {{"name", t.name},
                              {"source", t.source},
                              {"ranks", t.ranks},
                              {"makespan", NsToMs(x.makespan)},
                              {"per_rank", per_rank}};
    nlohmann::json out = j;
    // The rank-to-device mapping the trace records (train writes the one it used).
    if (!t.devices.empty()) out["devices"] = t.devices;
    if (!t.device_slots.empty()) out["device_slots"] = t.device_slots;
    if (!shared.empty()) out["shared_devices"] = SharedDevicesJson(shared);
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  // Whole microseconds, as printed: each row's parts add up to its idle, and
  // busy + idle to the makespan, in the printed digits too.
  constexpr TimeNs kShown = 1000;
  std::printf("%s (%s): K=%d makespan %s ms; idle = makespan - busy, split by cause (ms)\n", t.name.c_str(),
              t.source.c_str(), t.ranks, Fixed(NsToMs((x.makespan + kShown / 2) / kShown * kShown), 3).c_str());
  std::vector<std::vector<std::string>> rows = {
      {"rank", "busy", "idle", "warm_up", "cool_down", "imbalance", "comm", "shared_device", "other", "waited_for"}};
  for (const RankIdle& exact : x.per_rank) {
    const RankIdle r = RoundedIdle(exact, x.makespan, kShown);
    std::vector<std::string> row = {std::to_string(r.rank)};
    for (TimeNs ns : {r.busy, r.idle, r.warm_up, r.cool_down, r.imbalance, r.comm, r.shared_device, r.other}) {
      row.push_back(Fixed(NsToMs(ns), 3));
    }
    row.push_back(WaitedFor(r));
    rows.push_back(std::move(row));
  }
  PrintTable(rows, 0);
  if (!t.devices.empty()) {
    std::printf("devices by rank %s%s: shared_device counts a wait while other ranks of the device fill its slots\n",
                Joined(t.devices).c_str(),
                t.device_slots.empty() ? " (1 slot each)" : (", slots by device id " + Joined(t.device_slots)).c_str());
  }
  std::printf("%s", SharedDevicesText(shared, x.makespan).c_str());
  return 0;
}

}  // namespace

void SetupExplain(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<ExplainOptions>();
  CLI::App* sub = app.add_subcommand(
      "explain", "split each rank's idle time: warm-up, cool-down, slower stage, communication, shared device");
  sub->add_option("trace", o->trace_path, "trace file (from simulate --trace or train --trace)")->required();
  sub->add_flag("--json", o->json, "print one JSON object");
  sub->callback([o, &exit_code] { exit_code = RunExplain(*o); });
}

}  // namespace pplab::cli
