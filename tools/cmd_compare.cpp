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
  const std::vector<std::string> names = GeneratorNames(o.schedules);
  CheckAutoLimitsAmong(o.plan, names);
  nlohmann::json rows = nlohmann::json::array();
  const CostFileShape cost_shape = CostFileShapeOf(o.plan);
  // Schedules named in --schedules that give no row: the rows of the others
  // are printed and the exit is 1, so a script sees the row it asked for is
  // missing. With no --schedules, a family's rules passing over it is normal.
  std::vector<std::string> named_skipped;
  const auto skip = [&](const std::string& name, const std::string& why) {
    std::fprintf(stderr, "skipped: %s\n", why.c_str());
    if (!o.schedules.empty()) named_skipped.push_back(name);
  };
  for (const std::string& name : names) {
    // One --virtual serves the schedules that take it; the others keep theirs.
    PlanOptions plan = o.plan;
    if (!FindGenerator(name).accepts_virtual) plan.virtual_stages = 0;
    Schedule schedule;
    try {
      schedule = BuildSchedule(plan, name, &cost_shape);
    } catch (const Error& e) {
      if (o.schedules.size() == 1) throw;
      // A rule of the family rules this plan out (its message names the
      // family); or the costs zb-auto searches with refuse the options.
      const std::string why = e.what();
      skip(name, why.rfind(name + ":", 0) == 0 ? why : name + ": " + why);
      continue;
    }
    if (const std::string misfit = CostFileMisfit(plan, cost_shape, schedule);
        !misfit.empty() && o.schedules.size() != 1) {
      skip(name, misfit);
      continue;
    }
    CostModel costs;
    SimResult result;
    try {
      costs = BuildCostModel(plan, schedule);
      result = Simulate(schedule, costs);
    } catch (const Error& e) {
      // The file's fit to this schedule (a link of a rank it lacks, graph
      // slots with a split B), or a --recompute stage past its stages: one
      // schedule's, as the misfits above.
      if (o.schedules.size() == 1) throw;
      skip(name, name + ": " + e.what());
      continue;
    }
    nlohmann::json j = SimulationJson(schedule, costs, result);
    j.erase("per_rank");
    j["critical_path"].erase("path");
    j["recompute"] = plan.recompute;
    rows.push_back(std::move(j));
  }
  if (rows.empty()) throw Error("compare: no schedule accepts these options (see the lines above)");
  const auto done = [&] {
    if (named_skipped.empty()) return 0;
    std::string list;
    for (const std::string& name : named_skipped) list += (list.empty() ? "" : ", ") + name;
    std::fprintf(stderr, "compare: %zu of the %zu schedules named in --schedules skipped (lines above): %s\n",
                 named_skipped.size(), names.size(), list.c_str());
    return 1;
  };
  if (o.json) {
    std::printf("%s\n", rows.dump(2).c_str());
    return done();
  }
  if (o.csv) {
    std::string csv = SimulationCsvHeader();
    for (const auto& j : rows) csv += SimulationCsvRow(j);
    std::fwrite(csv.data(), 1, csv.size(), stdout);
    return done();
  }
  // Byte columns only where some cost gives bytes: all zeros would read as a
  // measurement.
  bool any_memory = false, any_p2p_bytes = false;
  for (const auto& j : rows) {
    any_memory = any_memory || j["peak_activation_bytes"].get<Bytes>() != 0;
    any_p2p_bytes = any_p2p_bytes || j["p2p_bytes"].get<Bytes>() != 0;
  }
  std::vector<std::string> header = {"schedule",
                                     "K",
                                     "S",
                                     "M",
                                     "makespan_ms",
                                     "bubble_%(makespan)",
                                     "analytic_%(makespan)",
                                     "bubble_%(span)",
                                     "analytic_%(span)",
                                     "peak_inflight"};
  if (any_memory) header.push_back("peak_activation_bytes");
  header.push_back("p2p_messages");
  if (any_p2p_bytes) header.push_back("p2p_bytes");
  std::vector<std::vector<std::string>> table = {header};
  for (const auto& j : rows) {
    // The closed form goes in the column of its paper's convention.
    const auto& convention = j["analytic_convention"];
    const bool span = !convention.is_null() && convention.get<std::string>() == "span";
    const std::string analytic = Percent(j["analytic_bubble_fraction"]);
    std::vector<std::string> row = {j["schedule"].get<std::string>(),
                                    j["ranks"].dump(),
                                    j["stages"].dump(),
                                    j["microbatches"].dump(),
                                    Fixed(j["makespan"].get<double>(), 3),
                                    Percent(j["bubble_fraction"]),
                                    span ? "-" : analytic,
                                    Percent(j["span_bubble_fraction"]),
                                    span ? analytic : "-",
                                    j["peak_inflight"].dump()};
    if (any_memory) row.push_back(j["peak_activation_bytes"].dump());
    row.push_back(j["p2p_messages"].dump());
    if (any_p2p_bytes) row.push_back(j["p2p_bytes"].dump());
    table.push_back(std::move(row));
  }
  PrintTable(table);
  std::printf(
      "bubble (makespan): 1 - sum(busy) / (K x makespan); bubble (span): the worst rank's idle share of its own "
      "span (the Zero Bubble paper's); analytic: the family's closed form for equal stages and free communication, in "
      "its paper's "
      "convention\n");
  if (!any_memory || !any_p2p_bytes) {
    std::printf("not shown: %s (no cost gives them; see --activation-bytes, --message-bytes, --cost)\n",
                !any_memory && !any_p2p_bytes ? "peak activation bytes and p2p bytes"
                : !any_memory                 ? "peak activation bytes"
                                              : "p2p bytes");
  }
  if (o.plan.recompute != "none") {
    std::printf("recomputed stages: %s (their B and I run the forward again; their F keeps only its inputs)\n",
                o.plan.recompute.c_str());
  }
  std::fflush(stdout);
  return done();
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
