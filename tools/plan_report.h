// What `pplab plan` prints once it has ranked the candidates and written the
// chosen plan: one JSON object (--json), or a text report (the search's
// figures, the links and rings it costed, the ranked table with its noise,
// the plan written and the line that trains it).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "sim/cost_model.h"
#include "tools/plan_search.h"

namespace pplab::cli {

// The flags of `pplab plan` (tools/cmd_plan.cpp binds them).
struct PlanCmdOptions {
  std::string model;
  int ranks = 0;  // 0: --gpus
  int dp = 1;
  int gpus = 0;                            // search every K x D x T = gpus
  std::optional<int> tp;                   // T; with --gpus, none: searched
  std::string sequence_parallel = "auto";  // on, off, or auto: both costed
  int threads = 0;                         // --gpus search threads; 0: the machine's cores
  std::optional<std::string> attention;    // explicit or sdpa; none: the profile's, else explicit
  double tp_bandwidth_gbps = 300;
  double tp_latency_ms = 0.02;
  double dp_bandwidth_gbps = 25;
  double dp_latency_ms = 0.01;
  // Stage-to-stage links (default: the profile's, else free).
  std::optional<double> link_bandwidth_gbps;
  std::optional<double> link_latency_ms;
  int gpus_per_node = 0;  // 0: no nodes (one link for all messages)
  int global_batch = 0;
  std::string memory_per_rank;
  double memory_headroom_percent = 0;   // of --memory-per-rank kept free
  std::vector<std::string> cost_files;  // fitted together
  std::optional<int> seq_len;
  std::optional<std::string> precision;  // default: the profile's, else fp32
  std::vector<std::string> schedules;
  int top = 10;
  std::string out_path = "plan.json";
  int pick = 1;            // the row of the ranking written out (1: the best)
  std::string trace_path;  // the picked candidate's simulated step, when given
  std::string svg_path;
  std::string cost_out_path;  // the picked candidate's cost model, as costed, when given
  bool json = false;
  double flops_per_second = 5e10;
  std::string recompute = "auto";  // none, all or auto (both)
  bool shard_optimizer = false;
};

// What a `pplab plan` run found and wrote.
struct PlanOutcome {
  const PlanSearchOptions& search;
  const PlanSearchResult& result;          // result.fitting: at least one candidate, best first
  const std::vector<CostModel>& profiled;  // the --cost profiles' models; empty: analytic costs
  std::string train_command;               // the line that trains the plan written
  std::string costs_from;                  // "analytic", or where the fitted costs came from
  std::string link_from;                   // the links between stages: "free", "profile" or "flags"
  std::string sequence_parallel;           // on, off or auto (both layouts costed)
  bool tensor_parallel = false;            // some candidate splits its layers
  double seconds = 0;                      // the search's wall time
};

// The report as one JSON object on stdout.
void PrintPlanJson(const PlanCmdOptions& o, const PlanOutcome& out);
// The report as text on stdout.
void PrintPlanText(const PlanCmdOptions& o, const PlanOutcome& out);

}  // namespace pplab::cli
