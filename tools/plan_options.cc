#include "tools/plan_options.h"

#include <CLI/CLI.hpp>
#include <cmath>
#include <nlohmann/json.hpp>
#include <utility>

#include "models/llama_config.h"
#include "models/partition.h"
#include "schedules/error.h"
#include "schedules/file_io.h"
#include "schedules/generators.h"
#include "schedules/lowering.h"
#include "schedules/schedule_io.h"
#include "schedules/validate.h"
#include "sim/recompute.h"
#include "sim/zb_auto.h"
#include "tools/cli_main.h"

namespace pplab::cli {
namespace {

// Accepts finite numbers in [0, max] (CLI11 names the flag in its message).
CLI::Validator Bounded(double max) {
  return CLI::Validator(
      [max](std::string& value) -> std::string {
        double x = 0;
        try {
          size_t used = 0;
          x = std::stod(value, &used);
          if (used != value.size()) return "not a number: " + value;
        } catch (const std::out_of_range&) {
          return "out of range: " + value;
        } catch (const std::exception&) {
          return "not a number: " + value;
        }
        if (!std::isfinite(x) || x < 0) return "must be a finite number >= 0, got " + value;
        if (x > max) return "must be at most " + std::to_string(max) + ", got " + value;
        return "";
      },
      "NUMBER>=0");
}

const CLI::Validator kTime = Bounded(kMaxActionMs);
const CLI::Validator kBytes = Bounded(kMaxBytes);
const CLI::Validator kBandwidth = BandwidthCheck();

}  // namespace

CLI::Validator BandwidthCheck() {
  return Bounded(1e12) & CLI::Validator(
                             [](std::string& value) -> std::string {
                               const double x = std::stod(value);
                               return x == 0 || x >= kMinBandwidthGbps ? ""
                                                                       : "must be 0 (infinite) or at least 1e-6 GB/s";
                             },
                             "");
}

void AddPlanFlags(CLI::App& app, PlanOptions& o, bool with_schedule) {
  std::vector<CLI::Option*> plan_shape;
  if (with_schedule) {
    plan_shape.push_back(app.add_option("--schedule,-s", o.schedule, "schedule generator (see `pplab schedules`)")
                             ->capture_default_str());
  }
  plan_shape.push_back(
      app.add_option("--ranks,-k", o.ranks, "pipeline ranks K")->capture_default_str()->check(CLI::Range(1, 1 << 20)));
  plan_shape.push_back(app.add_option("--microbatches,-m", o.microbatches, "microbatches M per step")
                           ->capture_default_str()
                           ->check(CLI::Range(1, 1 << 24)));
  plan_shape.push_back(app.add_option("--virtual,-v", o.virtual_stages,
                                      "stages per rank v (interleaved-1f1b, looped-bfs, interleaved-zb; default 2)")
                           ->check(CLI::Range(1, 1 << 10)));
  if (with_schedule) {
    CLI::Option* plan =
        app.add_option("--plan", o.plan_file, "a schedule file (pplab JSON or PyTorch CSV) instead of --schedule");
    for (CLI::Option* opt : plan_shape) plan->excludes(opt);  // the file fixes K, M, v and the schedule
  }
}

void AddCostFlags(CLI::App& app, PlanOptions& o) {
  app.add_option("--f-time", o.f_time_ms, "forward of one microbatch through one rank's share of the model, ms")
      ->capture_default_str()
      ->check(kTime);
  app.add_option("--b-time", o.b_time_ms, "full backward (I + W) of one microbatch, one rank's share, ms")
      ->capture_default_str()
      ->check(kTime);
  app.add_option("--w-time", o.w_time_ms,
                 "weight-gradient part of --b-time, ms; split schedules then use I = b - w (default w = b/2)")
      ->check(kTime);
  app.add_option("--comm-latency", o.comm_latency_ms, "latency of one point-to-point message, ms")
      ->capture_default_str()
      ->check(kTime);
  app.add_option("--comm-bandwidth", o.comm_bandwidth_gbps, "link bandwidth in GB/s (0 = infinite)")
      ->capture_default_str()
      ->check(kBandwidth);
  app.add_option("--message-bytes", o.message_bytes, "bytes of one activation/gradient message between stages")
      ->check(kBytes);
  app.add_option("--activation-bytes", o.activation_bytes,
                 "activation bytes one microbatch keeps on a rank from F until B/I (one rank's share)")
      ->check(kBytes);
  app.add_option("--weight-grad-bytes", o.weight_grad_bytes,
                 "bytes an I keeps for its W (split schedules; one rank's share)")
      ->check(kBytes);
  CLI::Option* cost =
      app.add_option("--cost", o.cost_file, "cost model JSON file (instead of the uniform flags above)");
  // A file gives every cost: a flag beside it would be dropped unseen.
  for (const char* flag : {"--f-time", "--b-time", "--w-time", "--comm-latency", "--comm-bandwidth", "--message-bytes",
                           "--activation-bytes", "--weight-grad-bytes"}) {
    cost->excludes(app.get_option(flag));
  }
  app.add_option("--recompute", o.recompute,
                 "stages whose activations are recomputed: none, all, or stage ids like 0,1 (their F keeps only its "
                 "inputs; their B or I runs the forward again first)")
      ->capture_default_str();
  app.add_option("--overlapped-pairs", o.overlapped_pairs,
                 "an overlapped F&B (DualPipe's) costs max(F, B) at_once, the ideal two-stream overlap, or F + B "
                 "in_turn, as pplab's executor runs it (default: the --cost file's word, else at_once)")
      ->check(CLI::IsMember({"at_once", "in_turn"}));
  app.add_option("--memory-limit", o.memory_limit_bytes,
                 "zb-auto: activation bytes a rank may hold at its peak (default: zb-h1's memory)")
      ->check(kBytes);
  app.add_option("--inflight-limit", o.inflight_limit,
                 "zb-auto: microbatches a rank may hold in flight (default: zb-h1's memory)")
      ->check(CLI::Range(1, 1 << 24));
}

void AddProfileCheckFlags(CLI::App& app, PlanOptions& o) {
  const std::string group = "Checks of a --cost file from `pplab profile`";
  app.add_option("--model", o.model, "model preset or config file the --cost profile must have been measured on")
      ->group(group);
  app.add_option("--microbatch-size", o.microbatch_size, "sequences per microbatch the --cost profile must have used")
      ->check(CLI::Range(1, 1 << 30))
      ->group(group);
  app.add_option("--seq-len", o.seq_len, "tokens per sequence the --cost profile must have used")
      ->check(CLI::Range(1, 1 << 30))
      ->group(group);
  app.add_option("--partition", o.partition,
                 "uniform, parameters or layers per stage (3,2,2,1) the --cost profile must have used")
      ->group(group);
}

void CheckProfile(const PlanOptions& o, const CostModel& costs) {
  const bool any = !o.model.empty() || o.microbatch_size || o.seq_len || !o.partition.empty();
  if (!any) return;
  const char* flag = !o.model.empty()    ? "--model"
                     : o.microbatch_size ? "--microbatch-size"
                     : o.seq_len         ? "--seq-len"
                                         : "--partition";
  if (o.cost_file.empty()) {
    throw Error(std::string(flag) + " checks a --cost file written by `pplab profile`; give one with --cost");
  }
  const std::optional<ProfileMeta> profile = costs.Profile();
  if (!profile) {
    throw Error(std::string(flag) + ": --cost " + o.cost_file +
                " has no profile meta (meta.source is not \"pplab profile\"), so there is nothing to check against");
  }
  const std::string measured = "--cost " + o.cost_file + " was measured with ";
  const LlamaConfig recorded = LlamaConfigFromJson(profile->config_json, o.cost_file + ": meta.config");
  LlamaConfig config = recorded;
  if (!o.model.empty()) {
    config = LoadLlamaConfig(o.model);
    if (!SameShapeButDepth(recorded, config) || config.num_hidden_layers != recorded.num_hidden_layers) {
      if (SameShapeButDepth(recorded, config)) {
        // A slice (profile --layers): its stages are not the model's.
        throw Error(measured + std::to_string(recorded.num_hidden_layers) + " of --model " + o.model + "'s " +
                    std::to_string(config.num_hidden_layers) +
                    " layers (profile --layers): its stages cost that slice; pplab plan fits the whole model to it");
      }
      throw Error(measured + "--model " + profile->model + ", not " + o.model + " (the model configs differ)");
    }
  }
  if (o.microbatch_size && *o.microbatch_size != profile->microbatch_size) {
    throw Error(measured + "--microbatch-size " + std::to_string(profile->microbatch_size) + ", not " +
                std::to_string(*o.microbatch_size));
  }
  if (o.seq_len && *o.seq_len != profile->seq_len) {
    throw Error(measured + "--seq-len " + std::to_string(profile->seq_len) + ", not " + std::to_string(*o.seq_len));
  }
  if (!o.partition.empty()) {
    const std::string wanted = MakePartition(config, costs.NumStages(), o.partition,
                                             {LoopPlacement(profile->ranks, costs.NumStages()), profile->seq_len})
                                   .ToString();
    if (wanted != profile->partition) {
      throw Error(measured + "--partition " + profile->partition + ", not " + o.partition +
                  (wanted != o.partition ? " (= " + wanted + ")" : ""));
    }
  }
}

namespace {

// A cost file of data-parallel replicas (profile --dp D) costs the
// all-reduce of each stage's gradients: the schedule gets the REDUCE_GRADs
// `train --dp D` would add to it, where it has none.
Schedule WithCostFileReplicas(int replicas, Schedule s) {
  if (replicas < 2) return s;
  for (const Program& p : s.programs) {
    for (const Action& a : p) {
      if (a.kind == ActionKind::kReduceGrad) return s;
    }
  }
  return AddReduceGrad(s);
}

Schedule BuildScheduleAsWritten(const PlanOptions& o, const std::string& name) {
  if (!o.plan_file.empty()) {
    Schedule s = LoadScheduleFile(o.plan_file);
    // Generated plans are valid by construction (tested); files are checked
    // before anything runs them.
    const ValidationReport report = ValidateFromFile(s);
    if (!report.ok()) {
      throw Error(o.plan_file + ": invalid schedule: " + report.problems.front().message + " (run `" +
                  ShellWord(ProgramName()) + " validate " + ShellWord(o.plan_file) + "` for the full report)");
    }
    return s;
  }
  const std::string gen = name.empty() ? o.schedule : name;
  const GeneratorInfo& info = FindGenerator(gen);
  if (!info.needs_costs) return Lower(Generate(gen, {o.ranks, o.microbatches, o.virtual_stages}));
  // zb-auto: one stage per rank, costed as the finished schedule will be.
  Schedule shape;
  shape.name = info.name;
  shape.ranks = o.ranks;
  shape.stages = o.ranks;
  AutoOptions limits;
  if (o.memory_limit_bytes) limits.activation_limit = {static_cast<Bytes>(std::llround(*o.memory_limit_bytes))};
  if (o.inflight_limit) limits.inflight_limit = *o.inflight_limit;
  return Lower(GenerateAuto({o.ranks, o.microbatches, o.virtual_stages}, BuildCostModel(o, shape), limits));
}

}  // namespace

Schedule BuildSchedule(const PlanOptions& o, const std::string& name, const CostFileShape* shape) {
  Schedule s = BuildScheduleAsWritten(o, name);
  return WithCostFileReplicas(shape != nullptr ? shape->replicas : CostFileShapeOf(o).replicas, std::move(s));
}

void CheckAutoLimitsAmong(const PlanOptions& o, const std::vector<std::string>& names) {
  if (!o.memory_limit_bytes && !o.inflight_limit) return;
  if (std::none_of(names.begin(), names.end(), [](const std::string& n) { return FindGenerator(n).needs_costs; })) {
    throw Error(std::string(o.inflight_limit ? "--inflight-limit" : "--memory-limit") +
                " shapes zb-auto's search only, and --schedules has no zb-auto");
  }
}

void CheckAutoLimits(const PlanOptions& o) {
  if (!o.memory_limit_bytes && !o.inflight_limit) return;
  const char* flag = o.inflight_limit ? "--inflight-limit" : "--memory-limit";
  if (!o.plan_file.empty()) throw Error(std::string(flag) + " shapes zb-auto's search; a --plan file is run as it is");
  if (!FindGenerator(o.schedule).needs_costs) {
    throw Error(std::string(flag) + " shapes zb-auto's search only; " + o.schedule +
                " runs as it is (its peak is in the summary)");
  }
}

CostFileShape CostFileShapeOf(const PlanOptions& o) {
  if (o.cost_file.empty()) return {};
  const CostModel costs = CostModel::FromJson(ReadTextFile(o.cost_file), o.cost_file);
  return {costs.NumStages(), static_cast<int>(costs.Devices().size()), costs.DataParallelGroup().degree};
}

std::string CostFileMisfit(const PlanOptions& o, const CostFileShape& shape, const Schedule& schedule) {
  if (shape.stages != 0 && shape.stages != schedule.stages) {
    return schedule.name + ": --cost " + o.cost_file + " costs " + std::to_string(shape.stages) +
           " stages, this schedule has " + std::to_string(schedule.stages) + " (K=" + std::to_string(schedule.ranks) +
           " x " + std::to_string(schedule.StagesPerRank()) + " a rank)";
  }
  if (shape.device_ranks != 0 && shape.device_ranks != schedule.ranks) {
    return schedule.name + ": --cost " + o.cost_file + " puts " + std::to_string(shape.device_ranks) +
           " ranks on devices, this schedule has " + std::to_string(schedule.ranks);
  }
  return "";
}

CostModel BuildCostModel(const PlanOptions& o, const Schedule& schedule) {
  const std::set<StageId> recompute = ParseRecomputeStages(o.recompute, schedule.stages, "--recompute");
  std::set<StageId> token_stages;  // each pipeline's first stage reads the batch's tokens
  for (StageId s = 0; s < schedule.stages; ++s) token_stages.insert(schedule.PipelineStart(s));
  if (!o.cost_file.empty()) {
    CostModel m = CostModel::FromJson(ReadTextFile(o.cost_file), o.cost_file);
    m.CheckStages(schedule.stages, schedule.name);
    CheckProfile(o, m);
    if (!recompute.empty()) {
      const nlohmann::json meta = nlohmann::json::parse(m.meta_json, nullptr, false);
      if (meta.is_object() && meta.contains("recomputed")) {
        throw Error("--recompute " + o.recompute + ": " + o.cost_file + " was estimated from a run that recomputed " +
                    "stages " + meta["recomputed"].dump() +
                    ", so its B and I already hold the recomputed forward; drop --recompute");
      }
    }
    if (!o.overlapped_pairs.empty()) m.SetPairsInTurn(o.overlapped_pairs == "in_turn");
    return WithRecompute(m, recompute, token_stages);
  }
  CheckProfile(o, CostModel{});  // refuses the profile checks without --cost
  // A rank's share of one copy of the model is split over its stages of
  // that copy: v stages per rank, or v / 2 for dualpipe's two copies.
  const int v = std::max(1, schedule.StagesPerRank() / schedule.NumPipelines());
  if (o.w_time_ms && *o.w_time_ms > o.b_time_ms) {
    throw Error("--w-time (" + std::to_string(*o.w_time_ms) + ") must not exceed --b-time (" +
                std::to_string(o.b_time_ms) + ")");
  }
  StageCost c;
  c.forward = MsToNs(o.f_time_ms / v);
  c.backward = MsToNs(o.b_time_ms / v);
  if (o.w_time_ms) c.backward_weight = MsToNs(*o.w_time_ms / v);
  c.activation_bytes = static_cast<Bytes>(std::llround(o.activation_bytes / v));
  c.weight_grad_bytes = static_cast<Bytes>(std::llround(o.weight_grad_bytes / v));
  c.message_bytes = static_cast<Bytes>(std::llround(o.message_bytes));
  CostModel m = CostModel::Uniform(schedule.stages, c, Link{MsToNs(o.comm_latency_ms), o.comm_bandwidth_gbps});
  m.SetOrigin("cost flags");
  m.SetPairsInTurn(o.overlapped_pairs == "in_turn");
  return WithRecompute(m, recompute, token_stages);
}

}  // namespace pplab::cli
