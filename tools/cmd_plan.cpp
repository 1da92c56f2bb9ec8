// pplab plan: search schedules, microbatch counts, stages per rank and
// partitions for a model on K ranks, keep what fits in memory, rank by
// predicted step time, and write the best as a plan file for `pplab train`.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>

#include "schedules/error.h"
#include "schedules/file_io.h"
#include "schedules/schedule_io.h"
#include "tools/cli_main.h"
#include "tools/commands.h"
#include "tools/plan_grid.h"
#include "tools/plan_profiles.h"
#include "tools/plan_search.h"
#include "tools/report.h"
#include "traces/chrome_trace.h"
#include "traces/render_svg.h"

namespace pplab::cli {
namespace {

using nlohmann::json;

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
  std::vector<std::string> cost_files;  // fitted together
  std::optional<int> seq_len;
  std::optional<std::string> precision;  // default: the profile's, else fp32
  std::vector<std::string> schedules;
  int top = 10;
  std::string out_path = "plan.json";
  int pick = 1;            // the row of the ranking written out (1: the best)
  std::string trace_path;  // the picked candidate's simulated step, when given
  std::string svg_path;
  bool json = false;
  double flops_per_second = 5e10;
  std::string recompute = "auto";  // none, all or auto (both)
  bool shard_optimizer = false;
};

std::string HumanBytes(Bytes b) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double x = static_cast<double>(b);
  int u = 0;
  while (x >= 1024 && u < 4) {
    x /= 1024;
    ++u;
  }
  return Fixed(x, u == 0 ? 0 : 2) + " " + kUnits[u];
}

// The peak rank, its model state and the kinds of the rest of its peak.
nlohmann::json PeakMemoryParts(const PlanCandidate& c) {
  nlohmann::json parts = MemoryPartsJson(c.peak_parts);
  parts["rank"] = c.peak_rank;
  parts["model_state"] = c.model_state;
  return parts;
}

json CandidateJson(const PlanCandidate& c) {
  return {{"ranks", c.ranks},
          {"dp", c.dp},
          {"tp", c.tp},
          {"sequence_parallel", c.sequence_parallel},
          {"schedule", c.schedule},
          {"microbatches", c.microbatches},
          {"virtual_stages", c.virtual_stages},
          {"stages", c.stages},
          {"partition", c.partition_method},
          {"layers_per_stage", c.partition.ToString()},
          {"microbatch_size", c.microbatch_size},
          {"step_time", NsToMs(c.step_time)},
          {"bubble_fraction", c.bubble_fraction},
          {"peak_memory_bytes", c.peak_memory},
          {"peak_memory_parts", PeakMemoryParts(c)},
          {"tokens_per_second", c.tokens_per_second},
          {"measured_costs", c.measured_costs},
          {"recompute", c.recompute ? "all" : "none"},
          {"samples", c.samples ? json{{"count", c.samples->samples},
                                       {"seed", c.samples->seed},
                                       {"p10", NsToMs(c.samples->p10)},
                                       {"p50", NsToMs(c.samples->p50)},
                                       {"p90", NsToMs(c.samples->p90)}}
                                : json(nullptr)},
          {"tie", c.tie}};
}

// What the tensor-parallel rings of a layer are, in the two layouts.
constexpr const char* kAllReduceRings =
    "2 all-reduces a layer each microbatch in F and in I, blocking; 2 in B, overlapped with the weights' products; "
    "none in W";
constexpr const char* kSequenceParallelRings =
    "per layer and microbatch 2 all-gathers and 2 reduce-scatters in F and in I, 4 and 2 in B, 2 all-gathers in W; "
    "the inputs' gathers again and B's reduce-scatters overlapped with compute";

// "#1 ties with #2, #4": the rows within the noise of the best, or "".
std::string TieLine(const std::vector<PlanCandidate>& ranked, size_t shown) {
  std::string others;
  for (size_t i = 1; i < shown; ++i) {
    if (ranked[i].tie) others += (others.empty() ? "#" : ", #") + std::to_string(i + 1);
  }
  return others.empty() ? "" : "#1 ties with " + others;
}

// PREFIX-bandwidth (GB/s) and PREFIX-latency (ms) of a ring all-reduce.
void AddRingFlags(CLI::App& sub, const std::string& prefix, double& gbps, double& ms, const std::string& bandwidth_help,
                  const std::string& latency_help) {
  sub.add_option(prefix + "-bandwidth", gbps, bandwidth_help)->check(CLI::Range(0.0, 1e6))->capture_default_str();
  sub.add_option(prefix + "-latency", ms, latency_help)->check(CLI::Range(0.0, 1e6))->capture_default_str();
}

// Per kind, ms (of ns * scale).
nlohmann::json KindsJson(const double (&values)[4], double scale) {
  return {{"forward", values[0] * scale},
          {"backward", values[1] * scale},
          {"backward_input", values[2] * scale},
          {"backward_weight", values[3] * scale}};
}

// The fit's ranges of microbatch sizes (CostFit::ranges), each with its
// fixed time a layer (ms) and time per FLOP (ns); null with one size or
// analytic costs.
nlohmann::json SizeRangesJson(const CostFit& f) {
  if (f.ranges.empty()) return nullptr;
  nlohmann::json out = nlohmann::json::array();
  for (const CostFit::SizeRange& r : f.ranges) {
    out.push_back({{"microbatch_sizes", {r.from, r.to}},
                   {"fixed_ms_per_layer", KindsJson(r.times.fixed_ns_per_unit, 1e-6)},
                   {"ns_per_flop", KindsJson(r.times.ns_per_flop, 1)}});
  }
  return out;
}

int RunPlan(const PlanCmdOptions& o) {
  if (o.ranks == 0 && o.gpus == 0) throw Error("plan: give --ranks K (and --dp D), or --gpus N");
  const std::string sequence_parallel = o.sequence_parallel.empty() ? "on" : o.sequence_parallel;  // the flag alone
  if (sequence_parallel != "auto" && sequence_parallel != "on" && sequence_parallel != "off") {
    throw Error("--sequence-parallel: '" + sequence_parallel + "' is not auto, on or off");
  }
  const auto started = std::chrono::steady_clock::now();
  PlanSearchOptions search;
  search.config = LoadLlamaConfig(o.model);
  search.ranks = o.ranks;
  search.dp = o.dp;
  search.tp = o.tp.value_or(1);
  search.tp_link = Link{MsToNs(o.tp_latency_ms), o.tp_bandwidth_gbps};
  search.sequence_parallel = sequence_parallel == "on";
  search.search_sequence_parallel = sequence_parallel == "auto";
  search.global_batch = o.global_batch;
  search.memory_per_rank = ParseByteSize(o.memory_per_rank, "--memory-per-rank");
  search.schedules = o.schedules;
  search.sample_top = static_cast<size_t>(o.top);
  if (o.precision) search.precision = ParsePrecision(*o.precision);
  if (o.shard_optimizer && o.dp < 2 && o.gpus == 0) {
    throw Error("--shard-optimizer shards the AdamW moments over the data-parallel replicas: it needs --dp 2 or more");
  }
  search.shard_optimizer = o.shard_optimizer;
  // none, all or auto (CLI11 checks it).
  search.recompute = o.recompute == "auto" ? std::vector<bool>{false, true} : std::vector<bool>{o.recompute == "all"};
  std::vector<CostModel> profiled;
  std::string train_device;  // for the printed train line; empty: train's default
  std::string costs_from = "analytic";
  if (!o.cost_files.empty()) {
    const PlanProfileFlags flags{o.cost_files, o.model, o.seq_len, o.precision, o.attention, o.tp, sequence_parallel};
    costs_from = FitCostFiles(flags, search, profiled, train_device);
  } else {
    search.seq_len = o.seq_len ? *o.seq_len : search.config.max_position_embeddings;
    search.fit = AnalyticFit(o.flops_per_second);
    search.fused_attention = o.attention.value_or("explicit") == "sdpa";
  }
  // (After the cost file, whose profile --tp sets T.)
  if (search.sequence_parallel && o.gpus == 0 && search.tp < 2) {
    throw Error("--sequence-parallel splits the positions over the tensor-parallel ranks: it needs --tp 2 or more");
  }
  // The flags replace the profile's link: a profile of ranks sharing one
  // GPU measures loopback sockets, not the links the plan will run on.
  std::string link_from = o.cost_files.empty() ? "free" : "profile";
  if (o.link_bandwidth_gbps || o.link_latency_ms) {
    if (o.link_bandwidth_gbps) search.link.bandwidth_gbps = *o.link_bandwidth_gbps;
    if (o.link_latency_ms) search.link.latency = MsToNs(*o.link_latency_ms);
    link_from = "flags";
  }
  search.gpus_per_node = o.gpus_per_node;
  search.cost_data_parallel = o.dp_bandwidth_gbps > 0;
  search.dp_link = Link{MsToNs(o.dp_latency_ms), o.dp_bandwidth_gbps};
  const std::vector<int> tps =
      o.gpus > 0 ? TensorParallelSizes(search.config, o.gpus, o.gpus_per_node,
                                       search.fit.tensor_parallel > 1 ? std::optional<int>(search.tp) : o.tp)
                 : std::vector<int>{search.tp};
  const bool tensor_parallel = *std::max_element(tps.begin(), tps.end()) > 1;
  const PlanSearchResult result =
      o.gpus > 0 ? SearchGpus(search, o.gpus, tps, SearchThreads(o.threads)) : SearchPlans(search);
  const PlanCandidate& best = result.fitting.front();
  if (static_cast<size_t>(o.pick) > result.fitting.size()) {
    throw Error("--pick " + std::to_string(o.pick) + ": only " + std::to_string(result.fitting.size()) + " candidate" +
                (result.fitting.size() == 1 ? "" : "s") + " fit in --memory-per-rank " + o.memory_per_rank);
  }
  // What is written out: the best, or the row --pick names.
  const PlanCandidate& chosen = result.fitting[o.pick - 1];
  WriteTextFile(o.out_path, ScheduleToJson(CandidateSchedule(chosen)));
  if (!o.trace_path.empty() || !o.svg_path.empty()) {
    // The candidate's simulated step, as it was ranked.
    const CandidateModel model = CandidateCostModel(search, chosen);
    const SimResult sim = Simulate(model.schedule, model.costs);
    if (!o.trace_path.empty()) WriteTextFile(o.trace_path, TimelineToChromeTrace(sim.timeline));
    if (!o.svg_path.empty()) {
      SvgOptions svg;
      svg.title = "plan: " + chosen.schedule + "  K=" + std::to_string(chosen.ranks) +
                  "  S=" + std::to_string(chosen.stages) + "  M=" + std::to_string(chosen.microbatches) +
                  "  partition " + chosen.partition.ToString();
      WriteTextFile(o.svg_path, RenderSvg(sim.timeline, svg));
    }
  }
  // Every flag the plan's step time and memory were costed with, so the
  // printed line trains what was planned (bf16 activations take half the
  // bytes of fp32 ones).
  const std::string train =
      ProgramName() + " train --plan " + o.out_path + " --model " + o.model + " --partition " + TrainPartition(chosen) +
      " --batch-size " + std::to_string(o.global_batch) + " --seq-len " + std::to_string(search.seq_len) + " --ranks " +
      std::to_string(chosen.ranks) + " --dp " + std::to_string(chosen.dp) +
      (chosen.tp > 1 ? " --tp " + std::to_string(chosen.tp) : "") +
      (chosen.sequence_parallel ? " --sequence-parallel" : "") + (chosen.recompute ? " --recompute all" : "") +
      (search.fused_attention ? " --attention sdpa" : "") +
      (o.shard_optimizer && chosen.dp > 1 ? " --shard-optimizer" : "") +
      (search.precision != Precision::kFp32 ? std::string(" --precision ") + PrecisionName(search.precision)
                                            : std::string()) +
      (train_device.empty() ? "" : " --device " + train_device);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  const size_t shown = std::min(result.fitting.size(), static_cast<size_t>(o.top));
  const bool sampled = best.samples.has_value();
  if (o.json) {
    json rows = json::array();
    for (size_t i = 0; i < shown; ++i) rows.push_back(CandidateJson(result.fitting[i]));
    const json j = {
        {"model", o.model},
        {"ranks", chosen.ranks},
        {"dp", chosen.dp},
        {"tp", chosen.tp},
        {"sequence_parallel", chosen.sequence_parallel},
        {"gpus", o.gpus > 0 ? json(o.gpus) : json(nullptr)},
        // Not used where the profile's times hold the collectives ("fitted").
        {"tp_link", search.fit.tensor_parallel > 1 ? json("fitted")
                                                   : (tensor_parallel ? json{{"latency_ms", o.tp_latency_ms},
                                                                             {"bandwidth_gbps", o.tp_bandwidth_gbps}}
                                                                      : json(nullptr))},
        {"link",
         {{"latency_ms", NsToMs(search.link.latency)},
          {"bandwidth_gbps", search.link.bandwidth_gbps},
          {"from", link_from}}},
        {"gpus_per_node", o.gpus_per_node > 0 ? json(o.gpus_per_node) : json(nullptr)},
        {"dp_bandwidth_gbps", o.dp_bandwidth_gbps},
        {"dp_latency_ms", o.dp_latency_ms},
        {"global_batch", o.global_batch},
        {"seq_len", search.seq_len},
        {"precision", PrecisionName(search.precision)},
        {"attention", search.fused_attention ? "sdpa" : "explicit"},
        {"shard_optimizer", o.shard_optimizer},
        {"memory_per_rank", search.memory_per_rank},
        {"costs", o.cost_files},  // empty: analytic (costs_from)
        {"size_ranges", SizeRangesJson(search.fit)},
        {"costs_from", costs_from},
        {"simulated", result.simulated},
        {"skipped", result.skipped},
        {"over_memory", result.over_memory},
        {"refit", {{"tried", result.refit_starts}, {"fit", result.refitted}, {"simulated", result.refit_simulations}}},
        {"fitting", result.fitting.size()},
        {"candidates", rows},
        {"best", CandidateJson(best)},
        {"pick", o.pick},
        {"picked", CandidateJson(chosen)},
        {"ties", sampled ? json{{"samples", kTieSamples},
                                {"seed", kTieSeed},
                                {"rule",
                                 "a candidate ties with the best when their sampled step "
                                 "times' [p10, p90] overlap"},
                                {"best_ties_with", TieLine(result.fitting, shown)}}
                         : json(nullptr)},
        {"plan_file", o.out_path},
        {"trace_file", o.trace_path.empty() ? json(nullptr) : json(o.trace_path)},
        {"svg_file", o.svg_path.empty() ? json(nullptr) : json(o.svg_path)},
        {"train_command", train}};
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf(
      "%d candidates costed in %s s (%d ruled out by schedule rules or layers, %d over %s per rank); costs: %s, %s, "
      "attention %s\n",
      result.simulated, Fixed(seconds, 2).c_str(), result.skipped, result.over_memory,
      HumanBytes(search.memory_per_rank).c_str(), costs_from.c_str(), PrecisionName(search.precision),
      search.fused_attention ? "sdpa (no softmax probabilities kept)" : "explicit");
  // The fit between each two profiled sizes, for a reader to check against
  // the profiles: a fixed time a layer and microbatch, and a time per FLOP.
  for (const CostFit::SizeRange& r : search.fit.ranges) {
    const TimeCoefficients& t = r.times;
    std::printf("fit between microbatches of %d and %d, F/B/I/W: %s/%s/%s/%s ms a layer + %s/%s/%s/%s ns a FLOP\n",
                r.from, r.to, Fixed(t.fixed_ns_per_unit[0] * 1e-6, 3).c_str(),
                Fixed(t.fixed_ns_per_unit[1] * 1e-6, 3).c_str(), Fixed(t.fixed_ns_per_unit[2] * 1e-6, 3).c_str(),
                Fixed(t.fixed_ns_per_unit[3] * 1e-6, 3).c_str(), Fixed(t.ns_per_flop[0], 4).c_str(),
                Fixed(t.ns_per_flop[1], 4).c_str(), Fixed(t.ns_per_flop[2], 4).c_str(),
                Fixed(t.ns_per_flop[3], 4).c_str());
  }
  if (result.refit_starts > 0) {
    std::printf("%d over memory refitted, fewer layers on the ranks over the limit: %d fit (%d more simulations)\n",
                result.refit_starts, result.refitted, result.refit_simulations);
  }
  // What the messages and rings were costed at: the figures a user checks first.
  const auto link_text = [](const Link& l) {
    if (l.latency == 0 && l.bandwidth_gbps == 0) return std::string("free");
    return (l.bandwidth_gbps > 0 ? Fixed(l.bandwidth_gbps, 1) + " GB/s" : std::string("unbounded GB/s")) + ", " +
           Fixed(NsToMs(l.latency), 3) + " ms";
  };
  const std::string network = search.cost_data_parallel ? link_text(search.dp_link) : "not costed";
  std::printf("links: between stages %s%s%s; data-parallel rings %s\n", link_text(search.link).c_str(),
              link_from == "free" ? "" : (" (" + link_from + ")").c_str(),
              o.gpus_per_node > 0
                  ? ("; on nodes of " + std::to_string(o.gpus_per_node) + " GPUs, across nodes " + network).c_str()
                  : "",
              o.gpus_per_node > 0 ? "inside a node as between stages, across nodes as above" : network.c_str());
  const bool fitted_collectives = search.fit.tensor_parallel > 1;
  if (fitted_collectives) {
    const std::string which = o.cost_files.size() == 1 ? o.cost_files.front() + " was" : "the profiles were";
    std::printf("tensor-parallel collectives: in the fitted times (%s profiled with --tp %d%s); no rings added\n",
                which.c_str(), search.tp, search.sequence_parallel ? " --sequence-parallel" : "");
  } else if (tensor_parallel) {
    std::printf("tensor-parallel rings: %s%s (%s)\n", link_text(search.tp_link).c_str(),
                o.gpus_per_node > 0 ? ", across nodes as data-parallel rings across nodes" : "",
                sequence_parallel == "on"
                    ? kSequenceParallelRings
                    : (sequence_parallel == "off"
                           ? kAllReduceRings
                           : std::string(kAllReduceRings) + "; sequence-parallel rows (sp): " + kSequenceParallelRings)
                          .c_str());
  }
  // With T > 1 and --sequence-parallel auto, whether each row splits the positions.
  const bool both_layouts = tensor_parallel && search.search_sequence_parallel;
  std::vector<std::vector<std::string>> table = {
      {"#", "schedule", "M", "v", "partition", "mb", "recompute", "step_ms", "bubble_%", "peak_mem/rank", "tokens/s"}};
  if (sampled) {
    table[0].push_back("p10..p90_ms");
    table[0].push_back("noise");
  }
  for (size_t i = 0; i < shown; ++i) {
    const PlanCandidate& c = result.fitting[i];
    table.push_back({std::to_string(i + 1), c.schedule, std::to_string(c.microbatches),
                     std::to_string(c.virtual_stages), c.partition_method + (c.measured_costs ? "*" : ""),
                     std::to_string(c.microbatch_size), c.recompute ? "all" : "none", Fixed(NsToMs(c.step_time), 3),
                     Fixed(100 * c.bubble_fraction, 2), HumanBytes(c.peak_memory), Fixed(c.tokens_per_second, 0)});
    if (sampled) {
      table.back().push_back(Fixed(NsToMs(c.samples->p10), 3) + ".." + Fixed(NsToMs(c.samples->p90), 3));
      table.back().push_back(c.tie ? "tie" : "");
    }
    std::vector<std::string> grid;
    if (o.gpus > 0) grid = {std::to_string(c.ranks), std::to_string(c.dp)};
    if (o.gpus > 0 && tensor_parallel) grid.push_back(std::to_string(c.tp));
    if (both_layouts) grid.push_back(c.tp == 1 ? "-" : (c.sequence_parallel ? "yes" : "no"));
    table.back().insert(table.back().begin() + 1, grid.begin(), grid.end());
  }
  std::vector<std::string> grid;
  if (o.gpus > 0) grid = {"K", "D"};
  if (o.gpus > 0 && tensor_parallel) grid.push_back("T");
  if (both_layouts) grid.push_back("sp");
  table[0].insert(table[0].begin() + 1, grid.begin(), grid.end());
  std::vector<size_t> width(table[0].size(), 0);
  for (const auto& row : table) {
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  for (const auto& row : table) {
    for (size_t c = 0; c < row.size(); ++c) {
      const std::string& name = table[0][c];
      if (c + 1 == row.size() && sampled) {  // the last column, left-aligned: no padding after it
        std::printf("  %s", row[c].c_str());
        continue;
      }
      const bool left = name == "schedule" || name == "partition" || name == "recompute";
      std::printf(left ? "  %-*s" : "  %*s", static_cast<int>(width[c]), row[c].c_str());
    }
    std::printf("\n");
  }
  if (result.fitting.size() > shown) std::printf("  ... %zu more fit\n", result.fitting.size() - shown);
  if (std::any_of(result.fitting.begin(), result.fitting.begin() + shown,
                  [](const PlanCandidate& c) { return c.measured_costs; })) {
    std::printf("* stage costs measured (a profile's own configuration), not fitted\n");
  }
  if (sampled) {
    const std::string ties = TieLine(result.fitting, shown);
    std::printf("noise: each row's step time sampled %d times (seed %llu) from the profile's spreads; %s\n",
                kTieSamples, static_cast<unsigned long long>(kTieSeed),
                ties.empty() ? "no row ties with #1 (their [p10, p90] do not overlap)"
                             : (ties + ": their [p10, p90] overlap, the difference is within the noise").c_str());
  }
  // One profiled size stands for every size: say so where the plan written
  // runs another (docs/planning.md, "Several profiles").
  if (!profiled.empty() && search.fit.ranges.empty() &&
      chosen.microbatch_size != profiled.front().Profile()->microbatch_size) {
    std::printf(
        "note: its microbatches of %d are costed from %s at %d in proportion to the FLOPs; what does not "
        "shrink with the microbatch (launches, a collective's latency) is fitted when --cost is given again "
        "with a profile at another size\n",
        chosen.microbatch_size, profiled.size() == 1 ? "a profile" : "profiles",
        profiled.front().Profile()->microbatch_size);
  }
  const std::string which = o.pick == 1 ? "best plan" : "plan #" + std::to_string(o.pick);
  std::printf("%s written to %s (%s, M=%d, v=%d, %s partition %s%s%s); run it with:\n  %s\n", which.c_str(),
              o.out_path.c_str(), chosen.schedule.c_str(), chosen.microbatches, chosen.virtual_stages,
              chosen.partition_method.c_str(), chosen.partition.ToString().c_str(),
              chosen.recompute ? ", activations recomputed" : "",
              chosen.tp > 1 ? (", layers split over " + std::to_string(chosen.tp) + " tensor-parallel ranks" +
                               (chosen.sequence_parallel ? " with sequence parallelism" : ""))
                                  .c_str()
                            : "",
              train.c_str());
  if (!o.trace_path.empty()) {
    std::printf("its simulated step written to %s (where each rank idles: %s explain %s)\n", o.trace_path.c_str(),
                ProgramName().c_str(), o.trace_path.c_str());
  }
  if (!o.svg_path.empty()) std::printf("its timeline picture written to %s\n", o.svg_path.c_str());
  return 0;
}

}  // namespace

void SetupPlan(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<PlanCmdOptions>();
  CLI::App* sub = app.add_subcommand(
      "plan", "search schedules, microbatches and partitions for a model; write the fastest that fits in memory");
  sub->add_option("--model", o->model, kModelFlagHelp)->required();
  CLI::Option* ranks = sub->add_option("--ranks,-k", o->ranks, "pipeline ranks K")->check(CLI::Range(1, 4096));
  CLI::Option* dp =
      sub->add_option("--dp", o->dp, "data-parallel replicas D")->check(CLI::Range(1, 4096))->capture_default_str();
  CLI::Option* gpus =
      sub->add_option("--gpus", o->gpus,
                      "GPUs (ranks) in all: search every K x D x T = N instead of one --ranks and --dp (T: --tp, "
                      "else 1, 2, 4, 8 up to --gpus-per-node where the model's heads and MLP split)")
          ->check(CLI::Range(1, 4096));
  gpus->excludes(ranks)->excludes(dp);
  sub->add_option("--tp", o->tp,
                  "tensor-parallel ranks T per pipeline rank (train --tp): each holds 1/T of every layer's heads and "
                  "MLP columns (default 1; with --gpus, searched)")
      ->check(CLI::Range(1, 4096));
  sub->add_option("--attention", o->attention,
                  "the attention train runs, for the activations' bytes: explicit keeps each layer's softmax "
                  "probabilities (heads x seq-len a token), sdpa (fused: flash or memory-efficient) does not "
                  "(default: the --cost profile's, else explicit)")
      ->check(CLI::IsMember({"explicit", "sdpa"}));
  sub->add_option("--sequence-parallel", o->sequence_parallel,
                  "with T > 1, sequence parallelism (train --sequence-parallel: the norms' activations and the "
                  "messages between stages are 1/T, each all-reduce an all-gather and a reduce-scatter): auto costs "
                  "each candidate without and with it (where T divides --seq-len), on (the flag alone) only with "
                  "it, off only without")
      ->expected(0, 1)
      ->type_name("[auto|on|off]");
  AddRingFlags(*sub, "--tp", o->tp_bandwidth_gbps, o->tp_latency_ms,
               "GB/s of the tensor-parallel all-reduces' ring (300: NVLink 4 through NVSwitch, NCCL's all-reduce "
               "bus bandwidth for messages of tens of MB on H100s)",
               "ms of latency of each tensor-parallel all-reduce");
  ranks->required(false);
  AddRingFlags(*sub, "--dp", o->dp_bandwidth_gbps, o->dp_latency_ms,
               "GB/s of the data-parallel all-reduce's ring, which costs each stage's REDUCE_GRAD when D > 1 (25: "
               "InfiniBand HDR, 200 Gb/s; 0: not costed)",
               "ms of latency of that all-reduce");
  sub->add_option("--link-bandwidth", o->link_bandwidth_gbps,
                  "GB/s of each stage-to-stage link (default: the --cost profile's, else free; 0: infinite), "
                  "e.g. for GPUs that will talk over NVLink when the profile's ranks shared one GPU")
      ->check(CLI::Range(0.0, 1e6));
  sub->add_option("--link-latency", o->link_latency_ms,
                  "ms of latency of each stage-to-stage message (default: "
                  "the --cost profile's, else 0)")
      ->check(CLI::Range(0.0, 1e6));
  sub->add_option(
         "--gpus-per-node", o->gpus_per_node,
         "GPUs a node holds (default: no nodes): messages and data- and tensor-parallel rings that cross nodes "
         "take --dp-bandwidth and --dp-latency (the network between nodes), messages inside one "
         "--link-bandwidth and --link-latency; world rank (d K + k) T + t (replica d, pipeline rank k, "
         "tensor-parallel rank t) is on node ((d K + k) T + t) / N")
      ->check(CLI::Range(1, 1 << 20));
  sub->add_option("--global-batch", o->global_batch, "sequences per step over all replicas (G)")
      ->required()
      ->check(CLI::Range(1, 1 << 20));
  sub->add_option("--memory-per-rank", o->memory_per_rank, "memory limit of one rank, e.g. 8GiB, 500MB, 2e9")
      ->required();
  sub->add_option("--cost", o->cost_files,
                  "cost file from `pplab profile` to fit the costs to (default: analytic); give it again with "
                  "profiles at other microbatch sizes to fit a fixed time a layer and microbatch besides the time "
                  "per FLOP")
      ->take_all()
      ->allow_extra_args(false);
  sub->add_option("--seq-len", o->seq_len,
                  "tokens per sequence (default: the profile's, else the model's max_position_embeddings)")
      ->check(CLI::Range(1, 1 << 20));
  sub->add_option("--precision", o->precision,
                  "fp32 or bf16: bytes per activation value in the memory formulas, 4 or 2 (default: the --cost "
                  "profile's, else fp32); weights and AdamW state are fp32 in both")
      ->type_name("TEXT");
  sub->add_option("--schedules", o->schedules, "comma-separated generators to search (default: all)")->delimiter(',');
  sub->add_option("--top", o->top, "rows of the ranked table")->check(CLI::Range(1, 1 << 20))->capture_default_str();
  sub->add_option("--threads", o->threads,
                  "with --gpus, threads that search the K x D x T grids (default: the machine's cores; the "
                  "ranking is the same for any number)")
      ->check(CLI::Range(1, 1024));
  sub->add_option("-o,--output", o->out_path, "plan file to write (the best candidate, or --pick's)")
      ->capture_default_str();
  sub->add_option("--pick", o->pick,
                  "write row N of the ranking instead of the best (1): its plan file, --trace, --svg and train line")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  sub->add_option(
      "--trace", o->trace_path,
      "also write the best (or --pick's) candidate's simulated step as a Chrome trace (Perfetto) JSON file, which "
      "pplab explain and diff read");
  sub->add_option("--svg", o->svg_path,
                  "also write the best (or --pick's) candidate's simulated timeline as an SVG picture");
  sub->add_option("--flops-per-second", o->flops_per_second, "analytic costs: sustained FLOP/s of one rank")
      ->check(CLI::Range(1.0, 1e18))
      ->capture_default_str();
  sub->add_option("--recompute", o->recompute,
                  "none, all (every stage's activations recomputed in B: less memory, one more F per microbatch) or "
                  "auto (cost each candidate both ways)")
      ->check(CLI::IsMember({"none", "all", "auto"}))
      ->capture_default_str();
  sub->add_flag("--shard-optimizer", o->shard_optimizer,
                "count the AdamW moments sharded over the --dp replicas (train --shard-optimizer, ZeRO-1): 8 + 8/D "
                "bytes of model state per parameter instead of 16");
  sub->add_flag("--json", o->json, "print one JSON object");
  sub->callback([o, &exit_code] { exit_code = RunPlan(*o); });
}

}  // namespace pplab::cli
