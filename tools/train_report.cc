#include "tools/train_report.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "models/flops.h"
#include "runtime/exec/device_info.h"
#include "schedules/file_io.h"
#include "sim/measured_costs.h"
#include "sim/percentiles.h"
#include "sim/recompute.h"
#include "sim/simulator.h"
#include "tools/cli_main.h"
#include "tools/report.h"
#include "traces/chrome_trace.h"
#include "traces/explain.h"
#include "traces/render_svg.h"

namespace fs = std::filesystem;

namespace pplab::cli {
std::vector<double> StepFlops::Mfu(double seconds) const {
  std::vector<double> out;
  if (peak.tflops <= 0) return out;
  for (double f : per_rank) out.push_back(pplab::Mfu(f, seconds, peak.tflops));
  return out;
}

StepFlops FlopsOf(const TrainOptions& o, const LlamaConfig& config, const Partition& partition,
                  const Schedule& schedule, const c10::Device& device, const std::string& precision) {
  StepFlops f;
  // Stage s runs model part ModelStage(s) on the microbatches of its
  // pipeline (all of them, or half in each of dualpipe's two copies). With
  // tensor parallelism each of the T ranks of a group runs 1 / T of it
  // (the norms every rank runs whole are not counted twice).
  f.per_rank.assign(schedule.ranks, 0.0);
  const double sequences = static_cast<double>(o.batch_size / o.dp);
  for (StageId s = 0; s < schedule.stages; ++s) {
    const double share = static_cast<double>(schedule.MicrobatchesThrough(s)) / schedule.microbatches;
    f.per_rank[schedule.placement[s]] +=
        sequences * share * StageTrainingFlops(config, partition, schedule.ModelStage(s), o.seq_len) / o.tp;
  }
  for (double x : f.per_rank) f.world += x * o.dp * o.tp;
  f.peak =
      ResolvePeak(DeviceName(device), precision == "fp32" ? Fp32MatmulPrecision(device) : precision, o.peak_tflops);
  return f;
}

StepReporter::StepReporter(const TrainOptions& o, StepFlops flops, std::function<int64_t(int)> epoch_of)
    : o_(o),
      flops_(std::move(flops)),
      epoch_of_(std::move(epoch_of)),
      // With --resume and no checkpoint the run starts over, and so do its metrics.
      resumed_at_(o.resume ? 0 : -1),
      start_(std::chrono::steady_clock::now()) {}

void StepReporter::OnStepEnd(const StepReport& r) {
  const int done = r.step + 1;
  if (metrics_ == nullptr) {
    metrics_ = std::make_unique<MetricsFile>(o_.metrics_path, resumed_at_);
    if (metrics_->DroppedCutLine()) {
      std::fprintf(stderr,
                   "pplab: note: metrics file %s: its last line was cut short (the earlier run stopped while writing "
                   "it) and is dropped; its step has no line\n",
                   o_.metrics_path.c_str());
    }
  }
  if (first_done_ < 0) first_done_ = r.step;
  if (progress_ == nullptr) {
    const bool quiet = o_.quiet || (o_.json && !isatty(fileno(stderr)));
    progress_ = std::make_unique<Progress>(r.step, o_.steps, quiet ? nullptr : stderr, isatty(fileno(stderr)));
  }
  const double tokens = static_cast<double>(o_.batch_size) * o_.seq_len;
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  ProgressLine line;
  line.done = done;
  line.loss = r.loss;
  line.lr = r.lr;
  line.tokens_per_s = r.step_ms > 0 ? tokens / (r.step_ms / 1000) : 0;
  line.bubble = r.bubble;
  line.val_loss = r.val_loss;
  line.seconds_left = elapsed / (done - first_done_) * (o_.steps - done);
  line.mfu = flops_.Mfu(r.step_ms / 1000);
  progress_->Update(line);
  nlohmann::json record = {{"step", done},         {"loss", r.loss},
                           {"lr", r.lr},           {"grad_norm", r.grad_norm},
                           {"step_ms", r.step_ms}, {"tokens_per_s", line.tokens_per_s},
                           {"bubble", r.bubble}};
  if (r.val_loss >= 0) record["val_loss"] = r.val_loss;
  if (!line.mfu.empty()) record["mfu_per_rank"] = line.mfu;
  if (epoch_of_) record["epoch"] = epoch_of_(done);
  metrics_->Write(record);
}

void StepReporter::Finish() {
  if (progress_ != nullptr) progress_->Finish();
}

RunPrediction WriteRunTraces(const TrainOptions& o, const Schedule& schedule, const Timeline& measured) {
  RunPrediction out;
  if (!o.trace_path.empty()) WriteTextFile(o.trace_path, TimelineToChromeTrace(measured));
  out.from_cost_file = !o.sim_cost_path.empty();
  if (o.sim_trace_path.empty() && !out.from_cost_file) return out;
  CostModel costs = out.from_cost_file
                        ? CostModel::FromJson(ReadTextFile(o.sim_cost_path), o.sim_cost_path)
                        : MeasuredCostModel(measured, o.trace_path.empty() ? "the measured step" : o.trace_path);
  // The devices the run used, where the file does not name its own. Costs
  // measured in this step already hold the sharing (each action's time is
  // what it took beside the others on its device): their device runs its
  // ranks at once, a slot each, so the simulated trace keeps the mapping
  // without queuing for it a second time (which put a --tp 2 step at 97.3
  // ms where it took 67.3 and its stats --cost-out simulated at 64.3).
  if (costs.Devices().empty()) {
    costs.SetDevices(measured.devices);
    if (out.from_cost_file) {
      costs.SetDeviceSlots(measured.device_slots);
    } else if (!measured.devices.empty()) {
      std::vector<int> ranks_on(*std::max_element(measured.devices.begin(), measured.devices.end()) + 1, 0);
      for (const int d : measured.devices) ++ranks_on[d];
      for (int& n : ranks_on) n = std::max(n, 1);  // (an id no rank uses still needs a slot)
      costs.SetDeviceSlots(ranks_on);
    }
  }
  // Measured costs hold the recomputation too. A cost file's stages are
  // recomputed as simulate --recompute does, unless the file says its B and
  // I already hold it (meta.recomputed: plan --cost-out of a recomputed plan,
  // stats of a recomputed run): a profile's were costed without, 76 % over
  // a recomputed run's peak.
  bool recomputed_here = false;
  if (out.from_cost_file) {
    const std::set<StageId> recompute = ParseRecomputeStages(o.recompute, schedule.stages, "--recompute");
    const nlohmann::json meta = nlohmann::json::parse(costs.meta_json, nullptr, false);
    if (!recompute.empty() && !(meta.is_object() && meta.contains("recomputed"))) {
      std::set<StageId> token_stages;  // each pipeline's first stage reads the batch's tokens
      for (StageId s = 0; s < schedule.stages; ++s) token_stages.insert(schedule.PipelineStart(s));
      costs = WithRecompute(costs, recompute, token_stages);
      recomputed_here = true;
    }
  }
  SimResult predicted = Simulate(schedule, costs);
  predicted.timeline.name = schedule.name;
  if (!out.from_cost_file) predicted.timeline.recompute = measured.recompute;
  if (recomputed_here) predicted.timeline.recompute = o.recompute;
  out.makespan = predicted.makespan;
  for (const RankMetrics& m : predicted.per_rank) out.peak_activation_bytes.push_back(m.peak_activation_bytes);
  if (out.from_cost_file && costs.HasSpread()) {
    out.sampled = SampleStepTime(schedule, costs, kPredictionSamples, kPredictionSeed);
  }
  if (!o.sim_trace_path.empty()) WriteTextFile(o.sim_trace_path, TimelineToChromeTrace(predicted.timeline));
  if (o.out_dir.empty()) return out;
  out.svg_path = (fs::path(o.out_dir) / "timeline.svg").string();
  SvgOptions svg;
  svg.title = schedule.name + "  K=" + std::to_string(schedule.ranks) + "  M=" + std::to_string(schedule.microbatches) +
              (out.from_cost_file ? ": simulated with " + o.sim_cost_path : ": simulated (measured compute costs)") +
              " above measured";
  WriteTextFile(out.svg_path, RenderSvgStack({&predicted.timeline, &measured}, svg));
  return out;
}

namespace {

// The measured steps a prediction is set against: those after the first
// two (their warm-up), or all with three or fewer; their p10, median and p90.
SampleSpread MeasuredSteps(const std::vector<double>& step_times_ms) {
  if (step_times_ms.empty()) return {};
  const size_t skip = step_times_ms.size() > 3 ? 2 : 0;
  return SpreadOfSamples({step_times_ms.begin() + static_cast<std::ptrdiff_t>(skip), step_times_ms.end()});
}

// Whether the predicted and the measured steps' p10..p90 overlap (touching
// counts), the rule `plan` ties two plans by (StepTimesTie).
bool SpreadsOverlap(const StepTimeSamples& predicted, const SampleSpread& measured) {
  return NsToMs(predicted.p10) <= measured.p90 && measured.p10 <= NsToMs(predicted.p90);
}

double RelativeError(double predicted, double measured) { return measured > 0 ? predicted / measured - 1 : 0; }

}  // namespace

std::optional<LaunchBound> LaunchBoundOf(const std::string& clock, const std::vector<double>& device_lag_ms,
                                         const Timeline& measured) {
  if (clock != "cuda-events" || device_lag_ms.empty()) return std::nullopt;
  std::vector<double> actions;
  for (const TimelineEvent& e : measured.events) {
    if (e.rank == 0 && IsCompute(e.action.kind)) actions.push_back(NsToMs(e.end - e.start));
  }
  if (actions.empty()) return std::nullopt;
  LaunchBound l;
  l.lag_ms = MeasuredSteps(device_lag_ms).median;
  l.action_ms = Percentile(actions, 0.5);
  l.bound = LaunchBoundLag(l.lag_ms, l.action_ms);
  return l;
}

std::string LaunchBoundHint(const TrainOptions& o, const Schedule& schedule, const std::optional<LaunchBound>& l) {
  if (!l || !l->bound || o.cuda_graphs) return "";
  char figures[160];
  std::snprintf(figures, sizeof figures,
                "the GPU waited for the host to launch its kernels (rank 0's device lag %.3f ms, against %.3f ms a "
                "compute action)",
                l->lag_ms, l->action_ms);
  std::string why_not;
  if (schedule.HasSplitBackward()) {
    why_not = "with a schedule whose B is whole (" + schedule.name + " splits it into I and W)";
  } else if (o.tp > 1) {
    why_not = "without --tp";
  } else if (o.recompute != "none") {
    why_not = "without --recompute";
  }
  return std::string(figures) + ": --cuda-graphs, which launches each stage's forward and backward as one graph, " +
         (why_not.empty() ? "may raise tokens/s" : "may raise tokens/s " + why_not);
}

void PrintRunSummary(const TrainOptions& o, const RunFacts& facts, const TrainSummary& summary,
                     const Timeline& measured, const RunPrediction& prediction) {
  const std::string& svg_path = prediction.svg_path;
  const SampleSpread measured_steps = MeasuredSteps(summary.step_times_ms);
  const double measured_step_ms = measured_steps.median;
  const double predicted_step_ms = NsToMs(prediction.makespan);
  // Each rank's peak, predicted and measured, where both are known.
  const bool memory = prediction.from_cost_file && o.measure_memory &&
                      summary.peak_activation_bytes.size() == prediction.peak_activation_bytes.size();
  const Schedule& schedule = *facts.schedule;
  const std::vector<DeviceUse> shared = SharedDeviceUse(measured);
  const double tokens = static_cast<double>(o.batch_size) * o.seq_len;
  double total_ms = 0;
  for (double ms : summary.step_times_ms) total_ms += ms;
  const double tokens_per_s = total_ms > 0 ? tokens * summary.step_times_ms.size() / (total_ms / 1000) : 0;
  const size_t steps = std::max<size_t>(1, summary.step_times_ms.size());
  const std::vector<double> mfu = facts.flops.Mfu(total_ms / 1000 / steps);  // over the mean step
  const std::optional<LaunchBound> launch = LaunchBoundOf(facts.clock, summary.device_lag_ms, measured);
  if (o.json) {
    nlohmann::json val = nlohmann::json::array();
    for (const auto& [step, loss] : summary.val_losses) val.push_back({{"step", step}, {"loss", loss}});
    nlohmann::json out = {{"schedule", schedule.name},
                          {"ranks", schedule.ranks},
                          {"dp", o.dp},
                          {"tp", o.tp},
                          {"sequence_parallel", o.sequence_parallel},
                          {"microbatches", schedule.microbatches},
                          {"steps", o.steps},
                          {"model", o.model},
                          {"vocab_size", facts.vocab_size},
                          {"data", facts.text ? "text" : "synthetic"},
                          {"partition", facts.partition},
                          {"losses", summary.losses},
                          {"val_losses", val},
                          {"step_times_ms", summary.step_times_ms},
                          {"step_clock_ms", summary.step_clock_ms},
                          {"host_issue_ms", summary.host_issue_ms},
                          {"device_lag_ms", summary.device_lag_ms},
                          {"device", facts.device},
                          {"backend", facts.backend},
                          {"precision", facts.precision},
                          {"clock", facts.clock},
                          {"tokens_per_s", tokens_per_s},
                          {"bubbles", summary.bubbles},
                          {"first_step", summary.first_step},
                          {"checkpoint_save_ms", summary.checkpoint_save_ms},
                          {"checkpoint_load_ms", summary.checkpoint_load_ms},
                          {"warm_up_ms", summary.warm_up_ms},
                          {"lrs", summary.lrs},
                          {"grad_norms", summary.grad_norms}};
    if (o.measure_memory) out["measured_peak_activation_bytes"] = summary.peak_activation_bytes;
    // Executor overhead of the last step, per rank: the idle time in which
    // the data was there and the device free (explain's "other"), over the
    // step's makespan. Issue 10's target is under 2 % on a GPU.
    if (CanExplainIdle(measured)) {
      const IdleExplanation idle = ExplainIdle(measured);
      nlohmann::json overhead = nlohmann::json::array();
      for (const RankIdle& r : idle.per_rank) {
        overhead.push_back(idle.makespan > 0 ? static_cast<double>(r.other) / static_cast<double>(idle.makespan) : 0.0);
      }
      out["executor_overhead"] = overhead;
    }
    // Ranks that shared a device in the last step: how they used it.
    if (!shared.empty()) out["shared_devices"] = SharedDevicesJson(shared);
    out["attention"] = facts.attention;
    out["launch_bound"] = launch ? nlohmann::json(launch->bound) : nlohmann::json(nullptr);
    out["cuda_graphs"] = o.cuda_graphs;
    if (o.cuda_graphs) {
      nlohmann::json slots = nlohmann::json::object(), bytes = nlohmann::json::object();
      for (const auto& [s, g] : facts.cuda_graph_slots) {
        slots[std::to_string(s)] = g.slots;
        bytes[std::to_string(s)] = g.bytes;
      }
      out["cuda_graph_slots"] = slots;
      out["cuda_graph_slot_bytes"] = bytes;
    }
    out["recompute"] = facts.recompute;
    out["shard_optimizer"] = o.shard_optimizer && o.dp > 1;
    out["optimizer_state_bytes"] = summary.optimizer_state_bytes;
    // MFU over all steps, as tokens_per_s (models/flops.h for the FLOPs).
    out["model_flops_per_step"] = facts.flops.world;
    out["model_flops_per_rank"] = facts.flops.per_rank;
    out["device_name"] = facts.device_name;
    out["peak_tflops"] =
        facts.flops.peak.tflops > 0 ? nlohmann::json(facts.flops.peak.tflops) : nlohmann::json(nullptr);
    out["peak_source"] = facts.flops.peak.source;
    double mfu_sum = 0;
    for (double m : mfu) mfu_sum += m;
    out["mfu_per_rank"] = mfu.empty() ? nlohmann::json(nullptr) : nlohmann::json(mfu);
    out["mfu"] = mfu.empty() ? nlohmann::json(nullptr) : nlohmann::json(mfu_sum / mfu.size());
    if (prediction.from_cost_file) {
      nlohmann::json p = {
          {"cost_file", o.sim_cost_path},          {"step_ms", predicted_step_ms},
          {"measured_step_ms", measured_step_ms},  {"step_error", RelativeError(predicted_step_ms, measured_step_ms)},
          {"measured_p10_ms", measured_steps.p10}, {"measured_p90_ms", measured_steps.p90}};
      if (const auto& s = prediction.sampled) {
        p["sampled"] = {{"count", s->samples},
                        {"seed", s->seed},
                        {"p10_ms", NsToMs(s->p10)},
                        {"p50_ms", NsToMs(s->p50)},
                        {"p90_ms", NsToMs(s->p90)}};
        p["spreads_overlap"] = SpreadsOverlap(*s, measured_steps);
      }
      if (memory) {
        p["peak_activation_bytes"] = prediction.peak_activation_bytes;
        nlohmann::json errors = nlohmann::json::array();
        for (size_t r = 0; r < prediction.peak_activation_bytes.size(); ++r) {
          errors.push_back(RelativeError(static_cast<double>(prediction.peak_activation_bytes[r]),
                                         static_cast<double>(summary.peak_activation_bytes[r])));
        }
        p["peak_activation_errors"] = errors;
      }
      out["prediction"] = p;
    }
    std::printf("%s\n", out.dump().c_str());
    std::fflush(stdout);
    return;
  }
  if (!summary.losses.empty()) {
    std::printf("trained steps %d..%d of %s: loss %.4f -> %.4f", summary.first_step + 1, o.steps, schedule.name.c_str(),
                summary.losses.front(), summary.losses.back());
    if (!summary.val_losses.empty()) std::printf(", validation loss %.4f", summary.val_losses.back().second);
    std::printf(", %.0f tokens/s", tokens_per_s);
    const std::string mfu_text = MfuText(mfu);
    std::printf("%s\n", mfu_text.empty() ? "" : (", " + mfu_text).c_str());
  }
  if (!o.checkpoint_dir.empty()) std::printf("checkpoint: %s\n", o.checkpoint_dir.c_str());
  if (!o.metrics_path.empty()) std::printf("metrics: %s\n", o.metrics_path.c_str());
  if (o.cuda_graphs) {
    // One slot per microbatch in flight: a forward graph and a backward one.
    std::printf("CUDA graphs: rank 0 captured");
    const char* sep = " ";
    for (const auto& [s, g] : facts.cuda_graph_slots) {
      std::printf("%s%d slot%s for stage %d holding %s", sep, g.slots, g.slots == 1 ? "" : "s", s,
                  HumanBytes(g.bytes).c_str());
      sep = ", ";
    }
    std::printf(" (a forward and a backward graph each, one slot a microbatch in flight)\n");
  }
  const std::string hint = LaunchBoundHint(o, schedule, launch);
  if (!hint.empty()) std::printf("%s\n", hint.c_str());
  // A device time-sliced between its ranks (more of them computing at once
  // than its slots: two ranks on one GPU) stretched their actions; said,
  // since the step time holds it.
  std::vector<DeviceUse> sliced;
  for (const DeviceUse& d : shared) {
    if (d.over_slots > 0) sliced.push_back(d);
  }
  if (!sliced.empty()) {
    std::printf("in the last step, %s", SharedDevicesText(sliced, measured.Makespan()).c_str());
  }
  if (!o.trace_path.empty()) std::printf("measured trace of the last step: %s\n", o.trace_path.c_str());
  if (!o.sim_trace_path.empty()) std::printf("simulated trace of the same plan: %s\n", o.sim_trace_path.c_str());
  if (!svg_path.empty()) std::printf("both, stacked: %s\n", svg_path.c_str());
  if (prediction.from_cost_file) {
    std::printf("predicted by %s: step %.3f ms against %.3f ms measured (%+.1f %%)\n", o.sim_cost_path.c_str(),
                predicted_step_ms, measured_step_ms, 100 * RelativeError(predicted_step_ms, measured_step_ms));
    if (const auto& s = prediction.sampled) {
      std::printf(
          "  p10..p90: predicted %.3f..%.3f ms (%d draws from the file's spreads, seed %llu), measured %.3f..%.3f "
          "ms: %s\n",
          NsToMs(s->p10), NsToMs(s->p90), s->samples, static_cast<unsigned long long>(s->seed), measured_steps.p10,
          measured_steps.p90,
          SpreadsOverlap(*s, measured_steps) ? "they overlap, the difference is within the noise"
                                             : "apart, the difference is larger than the noise");
    }
    if (memory) {
      std::printf("peak activation bytes, predicted against measured:");
      for (size_t r = 0; r < prediction.peak_activation_bytes.size(); ++r) {
        const double p = static_cast<double>(prediction.peak_activation_bytes[r]);
        const double m = static_cast<double>(summary.peak_activation_bytes[r]);
        std::printf("%s rank %zu %.0f against %.0f (%+.1f %%)", r == 0 ? "" : ",", r, p, m, 100 * RelativeError(p, m));
      }
      std::printf("\n");
    }
  }
  if (facts.text && !o.checkpoint_dir.empty()) {
    std::printf("sample from it: %s generate --checkpoint %s %s\n", ShellWord(ProgramName()).c_str(),
                ShellWord(o.checkpoint_dir).c_str(),
                facts.chats ? "--chat --prompt \"Hello\"" : "--prompt \"The meaning of life\"");
  }
  std::fflush(stdout);
}

}  // namespace pplab::cli
