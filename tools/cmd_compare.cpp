// pplab compare: several schedules side by side under the same costs.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>

#include "schedules/error.h"
#include "schedules/generators.h"
#include "sim/simulator.h"
#include "tools/commands.h"
#include "tools/plan_options.h"
#include "tools/report.h"

namespace pplab::cli {
namespace {

struct CompareOptions {
  PlanOptions plan;
  std::vector<std::string> schedules;
  bool json = false;
  bool csv = false;
};

std::string Percent(const nlohmann::json& x) { return x.is_null() ? "-" : Fixed(100 * x.get<double>(), 2); }

int RunCompare(const CompareOptions& o) {
  std::vector<std::string> names = o.schedules;
  if (names.empty()) {
    for (const GeneratorInfo& g : Generators()) names.push_back(g.name);
  }
  nlohmann::json rows = nlohmann::json::array();
  for (const std::string& name : names) {
    // One --virtual serves the schedules that take it; the others keep theirs.
    PlanOptions plan = o.plan;
    if (!FindGenerator(name).accepts_virtual) plan.virtual_stages = 0;
    Schedule schedule;
    try {
      schedule = BuildSchedule(plan, name);
    } catch (const Error& e) {
      if (o.schedules.size() == 1) throw;
      std::fprintf(stderr, "skipped: %s\n", e.what());  // a rule of the family rules this plan out
      continue;
    }
    const CostModel costs = BuildCostModel(plan, schedule);
    nlohmann::json j = SimulationJson(schedule, costs, Simulate(schedule, costs));
    j.erase("per_rank");
    j["critical_path"].erase("path");
    rows.push_back(std::move(j));
  }
  if (rows.empty()) throw Error("compare: no schedule accepts these options (see the lines above)");
  if (o.json) {
    std::printf("%s\n", rows.dump(2).c_str());
    return 0;
  }
  const char* header[] = {"schedule",
                          "K",
                          "S",
                          "M",
                          "makespan_ms",
                          "bubble_%",
                          "analytic_%",
                          "span_bubble_%",
                          "peak_inflight",
                          "peak_bytes",
                          "p2p_messages",
                          "p2p_bytes"};
  std::vector<std::vector<std::string>> table;
  table.emplace_back(std::begin(header), std::end(header));
  for (const auto& j : rows) {
    table.push_back({j["schedule"].get<std::string>(), j["ranks"].dump(), j["stages"].dump(), j["microbatches"].dump(),
                     Fixed(j["makespan"].get<double>(), 3), Percent(j["bubble_fraction"]),
                     Percent(j["analytic_bubble_fraction"]), Percent(j["span_bubble_fraction"]),
                     j["peak_inflight"].dump(), j["peak_activation_bytes"].dump(), j["p2p_messages"].dump(),
                     j["p2p_bytes"].dump()});
  }
  if (o.csv) {
    for (const auto& row : table) {
      for (size_t c = 0; c < row.size(); ++c) std::printf("%s%s", c ? "," : "", row[c].c_str());
      std::printf("\n");
    }
    return 0;
  }
  std::vector<size_t> width(table[0].size(), 0);
  for (const auto& row : table) {
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  for (const auto& row : table) {
    for (size_t c = 0; c < row.size(); ++c) {
      std::printf(c == 0 ? "%-*s" : "  %*s", static_cast<int>(width[c]), row[c].c_str());
    }
    std::printf("\n");
  }
  return 0;
}

}  // namespace

void SetupCompare(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<CompareOptions>();
  CLI::App* sub = app.add_subcommand("compare", "simulate several schedules with the same costs, side by side");
  sub->add_option("--schedules", o->schedules, "comma-separated generators (default: all)")->delimiter(',');
  AddPlanFlags(*sub, o->plan, /*with_schedule=*/false);
  AddCostFlags(*sub, o->plan);
  AddProfileCheckFlags(*sub, o->plan);
  auto* json = sub->add_flag("--json", o->json, "print a JSON array");
  sub->add_flag("--csv", o->csv, "print CSV")->excludes(json);
  sub->callback([o, &exit_code] { exit_code = RunCompare(*o); });
}

}  // namespace pplab::cli
