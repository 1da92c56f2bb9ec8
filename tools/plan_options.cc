#include "tools/plan_options.h"

#include <CLI/CLI.hpp>
#include <cmath>

#include "schedules/error.h"
#include "schedules/file_io.h"
#include "schedules/generators.h"
#include "schedules/lowering.h"
#include "schedules/schedule_io.h"
#include "schedules/validate.h"

namespace pplab::cli {
namespace {

// Accepts finite numbers >= 0 and names the flag otherwise.
const CLI::Validator kNonNegative(
    [](std::string& value) -> std::string {
      try {
        size_t used = 0;
        const double x = std::stod(value, &used);
        if (used != value.size()) return "not a number: " + value;
        if (!std::isfinite(x) || x < 0) return "must be a finite number >= 0, got " + value;
      } catch (const std::exception&) {
        return "not a number: " + value;
      }
      return "";
    },
    "NUMBER>=0");

}  // namespace

void AddPlanFlags(CLI::App& app, PlanOptions& o, bool with_schedule) {
  if (with_schedule) {
    app.add_option("--schedule,-s", o.schedule, "schedule generator (see `pplab schedules`)")
        ->capture_default_str();
    app.add_option("--plan", o.plan_file, "a schedule file (pplab JSON or PyTorch CSV) instead of --schedule");
  }
  app.add_option("--ranks,-k", o.ranks, "pipeline ranks K")->capture_default_str()->check(CLI::Range(1, 1 << 20));
  app.add_option("--microbatches,-m", o.microbatches, "microbatches M per step")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 24));
  app.add_option("--virtual,-v", o.virtual_stages, "stages per rank v (interleaved-1f1b, looped-bfs; default 2)")
      ->check(CLI::Range(1, 1 << 10));
}

void AddCostFlags(CLI::App& app, PlanOptions& o) {
  app.add_option("--f-time", o.f_time_ms, "forward of one microbatch through one rank's share of the model, ms")
      ->capture_default_str()
      ->check(kNonNegative);
  app.add_option("--b-time", o.b_time_ms, "full backward (I + W) of one microbatch, one rank's share, ms")
      ->capture_default_str()
      ->check(kNonNegative);
  app.add_option("--w-time", o.w_time_ms,
                 "weight-gradient part of --b-time, ms; split schedules then use I = b - w (default w = b/2)")
      ->check(kNonNegative);
  app.add_option("--comm-latency", o.comm_latency_ms, "latency of one point-to-point message, ms")
      ->capture_default_str()
      ->check(kNonNegative);
  app.add_option("--comm-bandwidth", o.comm_bandwidth_gbps, "link bandwidth in GB/s (0 = infinite)")
      ->capture_default_str()
      ->check(kNonNegative);
  app.add_option("--message-bytes", o.message_bytes, "bytes of one activation/gradient message between stages")
      ->check(kNonNegative);
  app.add_option("--activation-bytes", o.activation_bytes,
                 "activation bytes one microbatch keeps on a rank from F until B/I (one rank's share)")
      ->check(kNonNegative);
  app.add_option("--weight-grad-bytes", o.weight_grad_bytes,
                 "bytes an I keeps for its W (split schedules; one rank's share)")
      ->check(kNonNegative);
  app.add_option("--cost", o.cost_file, "cost model JSON file (overrides the uniform flags)");
}

Schedule BuildSchedule(const PlanOptions& o, const std::string& name) {
  if (!o.plan_file.empty()) {
    Schedule s = LoadScheduleFile(o.plan_file);
    const ValidationReport shape{ShapeProblems(s)};
    if (shape.ok() && !s.HasComm() && s.ranks > 1) s = Lower(s);
    // Generated plans are valid by construction (tested); files are checked
    // before anything runs them.
    const ValidationReport report = shape.ok() ? Validate(s) : shape;
    if (!report.ok()) {
      throw Error(o.plan_file + ": invalid schedule: " + report.problems.front().message + " (run `pplab validate " +
                  o.plan_file + "` for the full report)");
    }
    return s;
  }
  const std::string gen = name.empty() ? o.schedule : name;
  const GeneratorInfo& info = FindGenerator(gen);
  int v = o.virtual_stages;
  if (!info.accepts_virtual) v = info.default_virtual;  // compare passes one --virtual to every schedule
  return Lower(Generate(gen, {o.ranks, o.microbatches, v}));
}

CostModel BuildCostModel(const PlanOptions& o, const Schedule& schedule) {
  if (!o.cost_file.empty()) {
    CostModel m = CostModel::FromJson(ReadTextFile(o.cost_file), o.cost_file);
    m.CheckStages(schedule.stages, o.cost_file);
    return m;
  }
  const int v = std::max(1, schedule.StagesPerRank());
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
  return CostModel::Uniform(schedule.stages, c, Link{MsToNs(o.comm_latency_ms), o.comm_bandwidth_gbps});
}

}  // namespace pplab::cli
