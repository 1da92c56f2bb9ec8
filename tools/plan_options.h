// Flags shared by the planning subcommands (simulate, compare, sweep, export,
// show): which schedule, its size, and its costs.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "schedules/schedule.h"
#include "sim/cost_model.h"

namespace CLI {
class App;
class Validator;
}  // namespace CLI

namespace pplab::cli {

struct PlanOptions {
  std::string schedule = "1f1b";
  std::string plan_file;  // a schedule file instead of a generator
  int ranks = 4;
  int microbatches = 8;
  int virtual_stages = 0;  // 0 = the generator's default
  // Uniform costs, for one rank's share of the model: with v stages per rank
  // each stage takes 1/v of the time and holds 1/v of the bytes.
  double f_time_ms = 1.0;
  double b_time_ms = 2.0;  // the full backward (I + W)
  std::optional<double> w_time_ms;
  double comm_latency_ms = 0.0;
  double comm_bandwidth_gbps = 0.0;  // 0 = infinite
  double message_bytes = 0;
  double activation_bytes = 0;
  double weight_grad_bytes = 0;
  std::string cost_file;
  // Stages whose activations are recomputed (sim/recompute.h): "none",
  // "all" or ids like "0,1".
  std::string recompute = "none";
  // How an OVERLAP_F_B is costed: "at_once" (max(F, B)) or "in_turn"
  // (F + B); empty: the --cost file's word, or at_once for the flags.
  std::string overlapped_pairs;
  // zb-auto's memory limit (sim/zb_auto.h): activation bytes per rank and/or
  // microbatches in flight per rank; neither: zb-h1's memory.
  std::optional<double> memory_limit_bytes;
  std::optional<int> inflight_limit;
  // What a profiled --cost file must have been measured with (checked
  // against its meta; see CheckProfile). Empty / nullopt: not checked.
  std::string model;
  std::optional<int> microbatch_size;
  std::optional<int> seq_len;
  std::string partition;
};

// A GB/s flag's check: 0 (infinite), or from kMinBandwidthGbps (what a
// cost file's links take) to 1e12.
CLI::Validator BandwidthCheck();

// Binds the size flags (--ranks, --microbatches, --virtual) and, unless
// `with_schedule` is false, --schedule and --plan.
void AddPlanFlags(CLI::App& app, PlanOptions& options, bool with_schedule = true);
// Binds the cost flags (--f-time ... --cost) and zb-auto's memory limits
// (--memory-limit, --inflight-limit).
void AddCostFlags(CLI::App& app, PlanOptions& options);
// For a command that runs one schedule: throws pplab::Error when
// --memory-limit or --inflight-limit is given for a schedule they do not
// shape (all but zb-auto), which would otherwise run past them unsaid.
void CheckAutoLimits(const PlanOptions& options);
// compare and sweep: the zb-auto limits need zb-auto among `names`.
void CheckAutoLimitsAmong(const PlanOptions& options, const std::vector<std::string>& names);

// Binds --model, --microbatch-size, --seq-len and --partition, which check a
// --cost file written by `pplab profile` against what it was measured with.
void AddProfileCheckFlags(CLI::App& app, PlanOptions& options);
// Throws pplab::Error unless `costs` (from options.cost_file) was measured
// with the model, microbatch size, sequence length and partition the options
// name, e.g. "--cost c.json was measured with --microbatch-size 2, not 4".
// Also refuses those flags when the cost model has no profile meta.
void CheckProfile(const PlanOptions& options, const CostModel& costs);

// What a --cost file fixes of the plans it can cost: its stages, the ranks
// its `devices` map (0: any) and its data-parallel replicas. Stages and
// ranks 0 and one replica without a file. Read once by the commands that
// simulate several schedules (compare, sweep).
struct CostFileShape {
  int stages = 0;
  int device_ranks = 0;
  int replicas = 1;
};
CostFileShape CostFileShapeOf(const PlanOptions& options);

// The lowered schedule the options name: from --plan FILE, else generated
// by `name` (defaults to options.schedule) and lowered. zb-auto is searched
// with BuildCostModel's costs and the options' memory limits. With a --cost
// file of data-parallel replicas (data_parallel.degree > 1), a schedule
// without REDUCE_GRAD gets them, as `train --dp` adds them; `shape` is the
// file's, read once (null: read here).
Schedule BuildSchedule(const PlanOptions& options, const std::string& name = "", const CostFileShape* shape = nullptr);
// The cost model for `schedule`: --cost FILE if given, else uniform from
// the flags; with --recompute, those stages recomputed; with
// --overlapped-pairs, its way of costing an OVERLAP_F_B.
CostModel BuildCostModel(const PlanOptions& options, const Schedule& schedule);

// For those commands: why `schedule` cannot take the --cost file of `shape`
// ("" when it can, or without a file). A one-stage-a-rank profile costs no
// interleaved or V schedule, and a file that maps 2 ranks to devices no
// plan of 4 ranks: such a schedule is skipped with this line rather than
// stop the command.
std::string CostFileMisfit(const PlanOptions& options, const CostFileShape& shape, const Schedule& schedule);

}  // namespace pplab::cli
