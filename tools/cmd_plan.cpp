// pplab plan: search schedules, microbatch counts, stages per rank and
// partitions for a model on K ranks, keep what fits in memory, rank by
// predicted step time, and write the best as a plan file for `pplab train`.
// What it prints is tools/plan_report.h.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>

#include "models/flops.h"
#include "models/llama_config.h"
#include "models/partition.h"
#include "schedules/error.h"
#include "schedules/file_io.h"
#include "schedules/schedule_io.h"
#include "tools/cli_main.h"
#include "tools/commands.h"
#include "tools/output_files.h"
#include "tools/plan_grid.h"
#include "tools/plan_options.h"
#include "tools/plan_profiles.h"
#include "tools/plan_report.h"
#include "tools/plan_search.h"
#include "tools/report.h"
#include "traces/chrome_trace.h"
#include "traces/render_svg.h"

namespace pplab::cli {
namespace {

// What `train --attention auto` runs with the LibTorch this build found
// (CMakeLists.txt): plan's attention where neither --attention nor a
// profile says.
#ifndef PPLAB_TRAIN_ATTENTION
#define PPLAB_TRAIN_ATTENTION "explicit"
#endif
constexpr const char* kTrainAttention = PPLAB_TRAIN_ATTENTION;

// PREFIX-bandwidth (GB/s) and PREFIX-latency (ms) of a ring all-reduce.
void AddRingFlags(CLI::App& sub, const std::string& prefix, double& gbps, double& ms, const std::string& bandwidth_help,
                  const std::string& latency_help) {
  sub.add_option(prefix + "-bandwidth", gbps, bandwidth_help)->check(BandwidthCheck())->capture_default_str();
  sub.add_option(prefix + "-latency", ms, latency_help)->check(CLI::Range(0.0, 1e6))->capture_default_str();
}

// The model as the plan file records it: a preset's name as it is, a
// config file or folder by its absolute path, so that `train --plan` finds
// it from any folder (a relative path was read from the one it runs in).
std::string PlannedModel(const std::string& model) {
  if (LlamaConfigPath(model).empty()) return model;
  std::error_code ec;
  const std::filesystem::path absolute = std::filesystem::absolute(model, ec);
  return ec ? model : absolute.lexically_normal().string();
}

int RunPlan(const PlanCmdOptions& o) {
  if (o.ranks == 0 && o.gpus == 0) throw Error("plan: give --ranks K (and --dp D), or --gpus N");
  if (o.out_path.empty()) throw Error("--output: an empty name; give the plan file to write (default plan.json)");
  // Before the search, which may take seconds.
  std::vector<FlagPath> profiles;
  for (const std::string& cost : o.cost_files) profiles.push_back({"--cost", cost});
  profiles.push_back(ModelInput(o.model));
  CheckOutputFiles(
      {{"--output", o.out_path}, {"--trace", o.trace_path}, {"--svg", o.svg_path}, {"--cost-out", o.cost_out_path}},
      profiles);
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
  search.memory_given = search.memory_per_rank;
  search.memory_headroom_percent = o.memory_headroom_percent;
  // A candidate fits when its predicted peak leaves the headroom free.
  search.memory_per_rank = static_cast<Bytes>(
      std::floor(static_cast<double>(search.memory_per_rank) * (1 - o.memory_headroom_percent / 100)));
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
    search.fit = AnalyticFit(o.flops_per_second, search.precision);
    // The whole step on one rank, recomputed: a bound on any candidate's
    // step time, which the simulator keeps in int64 nanoseconds.
    const double step_ns = 2 *
                           StageTrainingFlops(search.config, PartitionUniform(search.config, 1), 0, search.seq_len) *
                           search.global_batch * 1e9 / o.flops_per_second;
    if (!(step_ns < 1e18)) {
      char rate[32];
      std::snprintf(rate, sizeof rate, "%g", o.flops_per_second);
      throw Error(std::string("--flops-per-second ") + rate + ": a step of " + std::to_string(search.global_batch) +
                  " sequences of " + std::to_string(search.seq_len) +
                  " tokens would take over 30 years at that rate, beyond the simulator's clock (FLOP/s, not TFLOP/s)");
    }
    search.fused_attention = o.attention.value_or(kTrainAttention) == "sdpa";
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
  // Graphed stages run without tensor parallelism (train --cuda-graphs).
  const std::vector<int> tps =
      o.gpus > 0 && !search.cuda_graphs
          ? TensorParallelSizes(search.config, o.gpus, o.gpus_per_node,
                                search.fit.tensor_parallel > 1 ? std::optional<int>(search.tp) : o.tp)
          : std::vector<int>{search.tp};
  const bool tensor_parallel = *std::max_element(tps.begin(), tps.end()) > 1;
  const PlanSearchResult result =
      o.gpus > 0 ? SearchGpus(search, o.gpus, tps, SearchThreads(o.threads)) : SearchPlans(search);
  // The fastest step under a nanosecond: every time rounds to whole
  // nanoseconds, tokens/s read 0 and the ranking fell to memory alone.
  if (result.fitting.front().step_time == 0) {
    char rate[32];
    std::snprintf(rate, sizeof rate, "%g", o.flops_per_second);
    const std::string step = "the best candidate's step of " + std::to_string(search.global_batch) + " sequences of " +
                             std::to_string(search.seq_len) +
                             " tokens comes to 0 ns: its actions each take under 1 ns, and the simulator counts whole "
                             "nanoseconds";
    if (!o.cost_files.empty()) throw Error("--cost " + o.cost_files.front() + ": " + step);
    throw Error(std::string("--flops-per-second ") + rate + ": " + step + " (is the rate in FLOP/s?)");
  }
  if (static_cast<size_t>(o.pick) > result.fitting.size()) {
    throw Error("--pick " + std::to_string(o.pick) + ": only " + std::to_string(result.fitting.size()) + " candidate" +
                (result.fitting.size() == 1 ? "" : "s") + " fit in --memory-per-rank " + o.memory_per_rank);
  }
  // What is written out: the best, or the row --pick names.
  const PlanCandidate& chosen = result.fitting[o.pick - 1];
  // The train flags the plan was costed with, in the file, so that `train
  // --plan` runs what was planned without them on its command line.
  nlohmann::json planned = {{"model", PlannedModel(o.model)},
                            {"partition", TrainPartition(chosen)},
                            {"batch_size", o.global_batch},
                            {"seq_len", search.seq_len},
                            {"dp", chosen.dp},
                            {"tp", chosen.tp},
                            {"sequence_parallel", chosen.sequence_parallel},
                            {"recompute", chosen.recompute ? "all" : "none"},
                            {"attention", search.fused_attention ? "sdpa" : "explicit"},
                            {"shard_optimizer", o.shard_optimizer && chosen.dp > 1},
                            {"precision", PrecisionName(search.precision)},
                            {"cuda_graphs", search.cuda_graphs}};
  if (!train_device.empty()) planned["device"] = train_device;
  WriteTextFile(o.out_path, ScheduleToJson(CandidateSchedule(chosen), planned.dump()));
  if (!o.trace_path.empty() || !o.svg_path.empty() || !o.cost_out_path.empty()) {
    // The candidate's simulated step, as it was ranked.
    const CandidateModel model = CandidateCostModel(search, chosen);
    if (!o.cost_out_path.empty()) {
      // Its B and I hold the recomputed forward, as a stats --cost-out of a
      // recomputed run: simulate refuses --recompute on it (which counted
      // the forward twice, 44.0 ms for a 34.3 ms plan).
      CostModel written = model.costs;
      if (chosen.recompute) {
        nlohmann::json meta = nlohmann::json::parse(written.meta_json);
        if (!meta.is_object()) meta = nlohmann::json::object();
        meta["recomputed"] = "all";
        written.meta_json = meta.dump();
      }
      WriteTextFile(o.cost_out_path, written.ToJson());
    }
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
      ShellWord(ProgramName()) + " train --plan " + ShellWord(o.out_path) + " --model " + ShellWord(o.model) +
      " --partition " + TrainPartition(chosen) + " --batch-size " + std::to_string(o.global_batch) + " --seq-len " +
      std::to_string(search.seq_len) + " --ranks " + std::to_string(chosen.ranks) + " --dp " +
      std::to_string(chosen.dp) + (chosen.tp > 1 ? " --tp " + std::to_string(chosen.tp) : "") +
      (chosen.sequence_parallel ? " --sequence-parallel" : "") + (chosen.recompute ? " --recompute all" : "") +
      // The attention costed, where train's auto would run the other.
      (search.fused_attention ? " --attention sdpa"
                              : (std::string(kTrainAttention) == "sdpa" ? " --attention explicit" : "")) +
      (o.shard_optimizer && chosen.dp > 1 ? " --shard-optimizer" : "") +
      (search.precision != Precision::kFp32 ? std::string(" --precision ") + PrecisionName(search.precision)
                                            : std::string()) +
      (train_device.empty() ? "" : " --device " + train_device) + (search.cuda_graphs ? " --cuda-graphs" : "") +
      // The run then sets this plan's prediction against what it measures.
      (o.cost_out_path.empty() ? "" : " --sim-cost " + ShellWord(o.cost_out_path));
  const PlanOutcome outcome{search,
                            result,
                            profiled,
                            train,
                            costs_from,
                            link_from,
                            sequence_parallel,
                            tensor_parallel,
                            std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count()};
  if (o.json) {
    PrintPlanJson(o, outcome);
  } else {
    PrintPlanText(o, outcome);
  }
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
                  "(default: the --cost profile's, else what train --attention auto runs with this build's "
                  "LibTorch, sdpa from 2.0 on: " +
                      std::string(kTrainAttention) + ")")
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
      ->check(BandwidthCheck());
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
  sub->add_option("--memory-headroom", o->memory_headroom_percent,
                  "percent of --memory-per-rank a plan's predicted peak leaves free, for what the prediction "
                  "misses (docs/planning.md, \"Memory per rank\")")
      ->check(CLI::Range(0.0, 90.0))
      ->capture_default_str();
  sub->add_option("--memory-per-rank", o->memory_per_rank, "memory limit of one rank, e.g. 8GiB, 500MB, 2e9")
      ->required();
  CLI::Option* cost =
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
      ->check(CLI::Range(1, 1024))
      ->needs("--gpus");
  sub->add_option("-o,--output", o->out_path, "plan file to write (the best candidate, or --pick's)")
      ->capture_default_str();
  sub->add_option(
         "--pick", o->pick,
         "write row N of the ranking instead of the best (1): its plan file, --trace, --svg, --cost-out and train line")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  sub->add_option(
      "--trace", o->trace_path,
      "also write the best (or --pick's) candidate's simulated step as a Chrome trace (Perfetto) JSON file, which "
      "pplab explain and diff read");
  sub->add_option("--svg", o->svg_path,
                  "also write the best (or --pick's) candidate's simulated timeline as an SVG picture");
  sub->add_option("--cost-out", o->cost_out_path,
                  "also write the best (or --pick's) candidate's costs as a cost file, as plan costed them (fitted "
                  "to --cost, or analytic; recomputed stages included): pplab simulate --plan PLAN --cost FILE "
                  "gives its step and each rank's memory again");
  sub->add_option("--flops-per-second", o->flops_per_second,
                  "analytic costs: sustained FLOP/s of one rank (a --cost profile gives its own)")
      ->check(CLI::Range(1.0, 1e18))
      ->capture_default_str()
      ->excludes(cost);
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
