// pplab bench: simulator throughput and memory on large plans.
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <utility>
#include <vector>

#include "schedules/error.h"
#include "schedules/generators.h"
#include "schedules/lowering.h"
#include "sim/simulator.h"
#include "tools/commands.h"
#include "tools/plan_options.h"

namespace pplab::cli {
namespace {

struct BenchOptions {
  std::string schedule = "1f1b";
  std::vector<std::string> sizes = {"8x64", "64x1024", "128x2048", "256x4096"};
  int virtual_stages = 0;
};

double Seconds(std::chrono::steady_clock::duration d) { return std::chrono::duration<double>(d).count(); }

long PeakRssMiB() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss / 1024;  // ru_maxrss is in KiB on Linux
}

int RunBench(const BenchOptions& o) {
  // Every size is read before the first is timed: a bad one late in the
  // list fails at once, not after minutes and half a table.
  std::vector<std::pair<int, int>> sizes;
  for (const std::string& size : o.sizes) {
    // Digits only, each number read whole and in range (-k and -m's): a
    // scanf %d wrapped 4294967300 to 4.
    const size_t x = size.find('x');
    const auto number = [](const std::string& digits, long long most) {
      if (digits.empty() || digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos) {
        return -1LL;
      }
      const long long n = std::stoll(digits);
      return n >= 1 && n <= most ? n : -1LL;
    };
    const long long K = x == std::string::npos ? -1 : number(size.substr(0, x), 1 << 20);
    const long long M = x == std::string::npos ? -1 : number(size.substr(x + 1), 1 << 24);
    if (K < 0 || M < 0) {
      throw Error("--sizes: '" + size + "' is not KxM with K in [1, 1048576] and M in [1, 16777216] (e.g. 64x1024)");
    }
    sizes.emplace_back(static_cast<int>(K), static_cast<int>(M));
  }
  // The schedule and each size's plan size too, before the table starts.
  const GeneratorInfo& info = FindGenerator(o.schedule);
  if (info.needs_costs) {
    throw Error("bench -s " + info.name +
                ": its order is searched with a cost model for each plan; bench times the generators that build a "
                "plan from K and M alone");
  }
  const int v = o.virtual_stages == 0 ? info.default_virtual : o.virtual_stages;
  for (const auto& [K, M] : sizes) {
    const int64_t actions = int64_t{K} * v * M * (info.split_backward ? 3 : 2);
    if (actions > kMaxComputeActions) {
      throw Error("--sizes: " + std::to_string(K) + "x" + std::to_string(M) + " gives " + info.name + " " +
                  std::to_string(actions) + " compute actions, more than pplab plans (" +
                  std::to_string(kMaxComputeActions) + ")");
    }
  }
  const int width = std::max<int>(10, static_cast<int>(info.name.size()));
  bool header = false;  // printed over the first row: a size the generator's rules refuse prints none
  for (const auto& [K, M] : sizes) {
    using Clock = std::chrono::steady_clock;
    const auto t0 = Clock::now();
    const Schedule compute = Generate(o.schedule, {K, M, o.virtual_stages});
    const auto t1 = Clock::now();
    if (!header) {
      std::printf("%-*s %6s %6s %10s %10s %9s %9s %9s %14s %9s\n", width, "schedule", "K", "M", "compute",
                  "all_actions", "gen_s", "lower_s", "sim_s", "actions/s(sim)", "rss_MiB");
      header = true;
    }
    const Schedule lowered = Lower(compute);
    const auto t2 = Clock::now();
    PlanOptions costs_from_flags;
    const CostModel costs = BuildCostModel(costs_from_flags, lowered);
    const auto t3 = Clock::now();
    const SimResult result = Simulate(lowered, costs);
    const auto t4 = Clock::now();
    const double sim_s = Seconds(t4 - t3);
    std::printf("%-*s %6d %6d %10zu %10zu %9.3f %9.3f %9.3f %14.0f %9ld\n", width, info.name.c_str(), K, M,
                lowered.NumComputeActions(), lowered.NumActions(), Seconds(t1 - t0), Seconds(t2 - t1), sim_s,
                sim_s > 0 ? lowered.NumActions() / sim_s : 0.0, PeakRssMiB());
    if (result.makespan <= 0) throw Error("bench: empty simulation");
  }
  std::printf("rss_MiB is the peak resident memory of this process so far (sizes run in order).\n");
  return 0;
}

}  // namespace

void SetupBench(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App* sub = app.add_subcommand("bench", "time generation, lowering and simulation of large plans");
  sub->add_option("--schedule,-s", o->schedule, "schedule generator")->capture_default_str();
  sub->add_option("--sizes", o->sizes, "comma-separated KxM sizes, run in order")
      ->delimiter(',')
      ->capture_default_str();
  sub->add_option("--virtual,-v", o->virtual_stages, "stages per rank for schedules that take it")
      ->check(CLI::Range(1, 1024));
  sub->callback([o, &exit_code] { exit_code = RunBench(*o); });
}

}  // namespace pplab::cli
