// pplab simulate: cost one plan and report its timeline figures.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>

#include "schedules/error.h"
#include "schedules/file_io.h"
#include "sim/recompute.h"
#include "sim/simulator.h"
#include "sim/step_samples.h"
#include "tools/commands.h"
#include "tools/output_files.h"
#include "tools/plan_options.h"
#include "tools/report.h"
#include "traces/chrome_trace.h"
#include "traces/render_svg.h"

namespace pplab::cli {
namespace {

struct SimulateOptions {
  PlanOptions plan;
  std::string trace_path;
  std::string svg_path;
  bool json = false;
  std::vector<int> devices;       // --devices: overrides the cost file's
  std::vector<int> device_slots;  // --device-slots: overrides the cost file's
  std::string devices_from;       // --devices-from TRACE: the mapping a run recorded
  int samples = 0;                // 0: no sampling
  std::uint64_t seed = 1;
};

// {count, seed, p50, p99, min, max}, ms.
nlohmann::json SamplesJson(const StepTimeSamples& s) {
  return {{"count", s.samples},   {"seed", s.seed},       {"p10", NsToMs(s.p10)}, {"p50", NsToMs(s.p50)},
          {"p90", NsToMs(s.p90)}, {"p99", NsToMs(s.p99)}, {"min", NsToMs(s.min)}, {"max", NsToMs(s.max)}};
}

int RunSimulate(const SimulateOptions& o) {
  CheckAutoLimits(o.plan);
  CheckOutputFiles({{"--trace", o.trace_path}, {"--svg", o.svg_path}}, {{"--plan", o.plan.plan_file},
                                                                        {"--cost", o.plan.cost_file},
                                                                        {"--devices-from", o.devices_from},
                                                                        ModelInput(o.plan.model)});
  const Schedule schedule = BuildSchedule(o.plan);
  CostModel costs = BuildCostModel(o.plan, schedule);
  if (!o.devices_from.empty()) {
    // The mapping a run used (pplab train writes it into its traces).
    const Timeline run = TimelineFromChromeTrace(ReadTextFile(o.devices_from), o.devices_from);
    if (run.ranks != schedule.ranks) {
      throw Error("--devices-from " + o.devices_from + ": the trace has " + std::to_string(run.ranks) +
                  " ranks, the plan " + std::to_string(schedule.ranks));
    }
    if (run.devices.empty()) {
      throw Error("--devices-from " + o.devices_from + ": the trace records no devices (otherData.devices)");
    }
    costs.SetDevices(run.devices);
    costs.SetDeviceSlots(run.device_slots);
    // stats --cost-out of a measured trace: each action's time is what it
    // took beside the others on its device, so queuing the ranks for the
    // device again counts the sharing twice (train's own prediction from
    // such costs gives each rank a slot).
    const nlohmann::json meta = nlohmann::json::parse(costs.meta_json, nullptr, false);
    if (meta.is_object() && meta.contains("estimated_from") && meta.value("source", "") == "measured" &&
        run.source == "measured") {
      std::fprintf(stderr,
                   "pplab: note: --cost %s holds times measured with the devices shared (from %s): --devices-from "
                   "%s queues its ranks for the devices again, counting the sharing twice; without it, each rank "
                   "runs at the speed measured\n",
                   o.plan.cost_file.c_str(),
                   meta["estimated_from"].is_string() ? meta["estimated_from"].get<std::string>().c_str() : "a trace",
                   o.devices_from.c_str());
    }
  }
  if (!o.devices.empty()) {
    if (static_cast<int>(o.devices.size()) != schedule.ranks) {
      throw Error("--devices: " + std::to_string(o.devices.size()) + " devices for " + std::to_string(schedule.ranks) +
                  " ranks (give one per rank, e.g. 0,0,1,1)");
    }
    costs.SetDevices(o.devices);
    // The file's slots describe the file's devices, not these: 1 each unless given.
    costs.SetDeviceSlots({});
  }
  if (!o.device_slots.empty()) {
    const std::vector<int>& devices = costs.Devices();
    const int used = devices.empty() ? schedule.ranks : *std::max_element(devices.begin(), devices.end()) + 1;
    if (static_cast<int>(o.device_slots.size()) != used) {
      // (More was refused in the cost file's words, as though the file had them.)
      throw Error("--device-slots: " + std::to_string(o.device_slots.size()) +
                  " entries, but the ranks use devices 0 to " + std::to_string(used - 1) + " (give one per device id" +
                  (devices.empty() && static_cast<int>(o.device_slots.size()) < used
                       ? ", or --devices to put ranks on fewer devices)"
                       : ")"));
    }
    costs.SetDeviceSlots(o.device_slots);
  }
  const SimResult result = Simulate(schedule, costs);
  nlohmann::json summary = SimulationJson(schedule, costs, result);
  const std::string recomputed =
      FormatRecomputeStages(ParseRecomputeStages(o.plan.recompute, schedule.stages, "--recompute"), schedule.stages);
  summary["recompute"] = recomputed;
  if (o.samples > 0) summary["samples"] = SamplesJson(SampleStepTime(schedule, costs, o.samples, o.seed));
  if (!o.trace_path.empty()) WriteTextFile(o.trace_path, TimelineToChromeTrace(result.timeline));
  if (!o.svg_path.empty()) {
    SvgOptions svg;
    svg.title = schedule.name + "  K=" + std::to_string(schedule.ranks) + "  S=" + std::to_string(schedule.stages) +
                "  M=" + std::to_string(schedule.microbatches);
    WriteTextFile(o.svg_path, RenderSvg(result.timeline, svg));
  }
  if (o.json) {
    std::printf("%s\n", summary.dump(2).c_str());
  } else {
    std::printf("%s", SimulationText(summary).c_str());
    if (recomputed != "none") std::printf("  recomputed stages: %s\n", recomputed.c_str());
    if (o.samples > 0) {
      const nlohmann::json& j = summary["samples"];
      std::printf(
          "  sampled step time p50 %s ms, p10..p90 %s..%s ms, p99 %s ms (min %s, max %s; %d samples, seed %s)\n",
          Fixed(j["p50"].get<double>(), 3).c_str(), Fixed(j["p10"].get<double>(), 3).c_str(),
          Fixed(j["p90"].get<double>(), 3).c_str(), Fixed(j["p99"].get<double>(), 3).c_str(),
          Fixed(j["min"].get<double>(), 3).c_str(), Fixed(j["max"].get<double>(), 3).c_str(), o.samples,
          std::to_string(o.seed).c_str());
      if (o.samples > 1 && j["min"] == j["max"]) {  // one sample is always alone
        std::printf(
            "  (every sample is the same: no time of these costs has a spread; a --cost file from pplab profile "
            "gives each its p10 and p90)\n");
      }
    }
    if (!o.trace_path.empty()) std::printf("trace written to %s\n", o.trace_path.c_str());
    if (!o.svg_path.empty()) std::printf("picture written to %s\n", o.svg_path.c_str());
  }
  return 0;
}

}  // namespace

void SetupSimulate(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<SimulateOptions>();
  CLI::App* sub = app.add_subcommand("simulate", "simulate one schedule and report makespan, bubble, memory");
  AddPlanFlags(*sub, o->plan);
  AddCostFlags(*sub, o->plan);
  AddProfileCheckFlags(*sub, o->plan);
  sub->add_option("--trace", o->trace_path, "write the timeline as a Chrome trace (Perfetto) JSON file");
  sub->add_option("--svg", o->svg_path, "write the timeline picture as SVG");
  sub->add_flag("--json", o->json, "print one JSON object instead of text");
  sub->add_option("--devices", o->devices,
                  "device of each rank, comma-separated (0,0,1,1: two ranks per device; a device runs one compute "
                  "action at a time unless --device-slots says); overrides the cost file's 'devices' and "
                  "'device_slots'")
      ->delimiter(',')
      ->check(CLI::Range(0, 1 << 30));
  sub->add_option("--device-slots", o->device_slots,
                  "compute actions each device id runs at once, comma-separated (a CPU host: cores / threads per "
                  "rank; a GPU: 1); overrides the cost file's 'device_slots'")
      ->delimiter(',')
      ->check(CLI::Range(1, 1 << 20));
  sub->add_option("--devices-from", o->devices_from,
                  "take the ranks' devices and slots from a trace that records them (pplab train's "
                  "trace-measured.json); --devices and --device-slots still override");
  CLI::Option* samples =
      sub->add_option("--samples", o->samples,
                      "also simulate N times with F/B/I/W, REDUCE_GRAD and per-step times drawn from the cost "
                      "file's p10/p90 spreads; report the step time's p10, p50, p90 and p99")
          ->check(CLI::Range(1, 100000));
  sub->add_option("--seed", o->seed, "seed of the draws of --samples (same seed, same figures)")
      ->needs(samples)
      ->capture_default_str();
  sub->callback([o, &exit_code] { exit_code = RunSimulate(*o); });
}

}  // namespace pplab::cli
