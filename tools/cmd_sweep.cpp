// pplab sweep: a grid over schedules, K, M and v, one CSV row per plan.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <memory>

#include "schedules/error.h"
#include "schedules/file_io.h"
#include "schedules/generators.h"
#include "sim/simulator.h"
#include "tools/commands.h"
#include "tools/output_files.h"
#include "tools/plan_options.h"
#include "tools/report.h"

namespace pplab::cli {
namespace {

struct SweepOptions {
  PlanOptions plan;
  std::vector<std::string> schedules;
  std::vector<int> ranks = {2, 4, 8};
  std::vector<int> microbatches = {4, 8, 16, 32};
  std::vector<int> virtuals = {1, 2};
  std::string out_path;
};

int RunSweep(const SweepOptions& o) {
  const std::vector<std::string> names = GeneratorNames(o.schedules);
  CheckAutoLimitsAmong(o.plan, names);
  // A value given twice would give every row of it twice.
  for (const auto& [flag, values] : {std::pair<const char*, const std::vector<int>*>{"--ranks", &o.ranks},
                                     {"--microbatches", &o.microbatches},
                                     {"--virtual", &o.virtuals}}) {
    for (size_t i = 0; i < values->size(); ++i) {
      if (std::find(values->begin(), values->begin() + static_cast<long>(i), (*values)[i]) !=
          values->begin() + static_cast<long>(i)) {
        throw Error(std::string(flag) + " gives " + std::to_string((*values)[i]) + " twice");
      }
    }
  }
  // Fail before minutes of simulation, not after.
  CheckOutputFiles({{"--output", o.out_path == "-" ? "" : o.out_path}}, {{"--cost", o.plan.cost_file}});
  std::string csv = SimulationCsvHeader();
  int rows = 0, skipped = 0;
  const CostFileShape cost_shape = CostFileShapeOf(o.plan);
  // A schedule named in --schedules that no cell of the grid accepts: the
  // rows of the others are written and the exit is 1. Cells skipped here and
  // there are the grid's nature (M % K for interleaved) and exit 0.
  std::string named_without_rows;
  for (const std::string& name : names) {
    const int rows_before = rows;
    const GeneratorInfo& info = FindGenerator(name);
    for (int K : o.ranks) {
      for (int M : o.microbatches) {
        // A schedule whose placement fixes v runs once per (K, M).
        const std::vector<int> virtuals = info.accepts_virtual ? o.virtuals : std::vector<int>{info.default_virtual};
        for (int v : virtuals) {
          PlanOptions p = o.plan;
          p.ranks = K;
          p.microbatches = M;
          p.virtual_stages = info.accepts_virtual ? v : 0;
          Schedule schedule;
          try {
            schedule = BuildSchedule(p, name, &cost_shape);
          } catch (const Error& e) {
            ++skipped;  // a rule of the family (e.g. M % K) rules this cell out, or zb-auto's costs the options
            const std::string why = e.what();
            std::fprintf(stderr, "skipped: %s\n", (why.rfind(name + ":", 0) == 0 ? why : name + ": " + why).c_str());
            continue;
          }
          if (const std::string misfit = CostFileMisfit(p, cost_shape, schedule); !misfit.empty()) {
            ++skipped;
            std::fprintf(stderr, "skipped: %s\n", misfit.c_str());
            continue;
          }
          CostModel costs;
          SimResult result;
          try {
            costs = BuildCostModel(p, schedule);
            result = Simulate(schedule, costs);
          } catch (const Error& e) {
            // The file's fit to this cell (a link of a rank it lacks, graph
            // slots with a split B), or a --recompute stage past its stages.
            ++skipped;
            std::fprintf(stderr, "skipped: %s K=%d M=%d: %s\n", name.c_str(), K, M, e.what());
            continue;
          }
          csv += SimulationCsvRow(SimulationJson(schedule, costs, result));
          ++rows;
        }
      }
    }
    if (!o.schedules.empty() && rows == rows_before) {
      named_without_rows += (named_without_rows.empty() ? "" : ", ") + name;
    }
  }
  if (rows == 0) throw Error("sweep: no schedule accepts any cell of the grid (see the lines above)");
  if (o.out_path.empty() || o.out_path == "-") {
    std::fwrite(csv.data(), 1, csv.size(), stdout);
  } else {
    WriteTextFile(o.out_path, csv);
  }
  std::fprintf(stderr,
               "sweep: %d plans simulated, %d skipped by schedule rules or the --cost file's stages or devices\n", rows,
               skipped);
  if (!named_without_rows.empty()) {
    std::fprintf(stderr, "sweep: no cell of the grid accepts %s, named in --schedules (lines above)\n",
                 named_without_rows.c_str());
    return 1;
  }
  return 0;
}

}  // namespace

void SetupSweep(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<SweepOptions>();
  CLI::App* sub = app.add_subcommand("sweep", "simulate a grid of schedules x K x M x v and write CSV");
  sub->add_option("--schedules", o->schedules, "comma-separated generators (default: all)")->delimiter(',');
  sub->add_option("--ranks,-k", o->ranks, "comma-separated K values")
      ->delimiter(',')
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  sub->add_option("--microbatches,-m", o->microbatches, "comma-separated M values")
      ->delimiter(',')
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  sub->add_option("--virtual,-v", o->virtuals, "comma-separated v values (for schedules that take v)")
      ->delimiter(',')
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  AddCostFlags(*sub, o->plan);
  sub->add_option("-o,--output", o->out_path, "CSV file ('-' or absent: standard output)");
  sub->callback([o, &exit_code] { exit_code = RunSweep(*o); });
}

}  // namespace pplab::cli
