// What `pplab train` reports: model FLOPs and MFU, rank 0's progress line and
// metrics record at the end of each step, and at the end of the run its
// traces, the stacked picture and a summary (one JSON object with --json).
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "models/llama_config.h"
#include "models/partition.h"
#include "runtime/train/metrics_file.h"
#include "runtime/train/mfu.h"
#include "runtime/train/trainer.h"
#include "schedules/schedule.h"
#include "sim/step_samples.h"
#include "tools/progress.h"
#include "tools/train_options.h"
#include "traces/timeline.h"

namespace pplab::cli {

// The model FLOPs of a step and the peak they are measured against (MFU).
struct StepFlops {
  std::vector<double> per_rank;  // each pipeline rank of one replica (models/flops.h)
  double world = 0;              // all ranks of all replicas
  PeakFlops peak;
  // MFU of each pipeline rank for a step of `seconds`; empty when no peak is known.
  std::vector<double> Mfu(double seconds) const;
};

// `precision`: what the matmuls run in ("fp32" or "bf16", from --precision);
// fp32 on a GPU whose cuBLAS may use TF32 counts as "tf32".
StepFlops FlopsOf(const TrainOptions& o, const LlamaConfig& config, const Partition& partition,
                  const Schedule& schedule, const c10::Device& device, const std::string& precision);

// Rank 0's report at the end of each step: the progress line on stderr
// (none with --quiet, or with --json when stderr is not a terminal) and one
// record in the metrics file.
class StepReporter {
 public:
  // `o` must outlive the reporter. `epoch_of(done)`: the data epoch after
  // `done` steps; null for synthetic data.
  StepReporter(const TrainOptions& o, StepFlops flops, std::function<int64_t(int)> epoch_of);
  // The run resumed from the checkpoint of step `step` (before the first
  // OnStepEnd): the metrics file drops its later steps.
  void Resumed(int step) { resumed_at_ = step; }
  void OnStepEnd(const StepReport& r);
  // Ends the progress line.
  void Finish();

 private:
  const TrainOptions& o_;
  StepFlops flops_;
  std::function<int64_t(int)> epoch_of_;
  int resumed_at_;  // -1: a new run
  int first_done_ = -1;
  std::unique_ptr<MetricsFile> metrics_;  // opened once the resume point is known
  std::unique_ptr<Progress> progress_;
  std::chrono::steady_clock::time_point start_;
};

// What the summary says of the run besides the trainer's figures.
struct RunFacts {
  const Schedule* schedule = nullptr;
  int vocab_size = 0;
  bool text = false;   // text data, else synthetic tokens
  bool chats = false;  // text with chat records
  std::string partition;
  std::string device;       // as given to LibTorch, e.g. "cuda:0"
  std::string device_name;  // DeviceName
  std::string backend, precision, clock, attention;
  std::string recompute;  // the recomputed stages: none, all, or ids (sim/recompute.h)
  // With --cuda-graphs: the slots (graph pairs) each of rank 0's stages
  // captured, and the memory they hold (GraphStats,
  // runtime/exec/graphed_stage.h).
  struct GraphSlots {
    int slots = 0;
    Bytes bytes = 0;
  };
  std::map<StageId, GraphSlots> cuda_graph_slots;
  StepFlops flops;
};

// What WriteRunTraces simulated: the picture it wrote and, with --sim-cost,
// the prediction the summary sets against the measured run.
struct RunPrediction {
  std::string svg_path;                      // --out's timeline.svg, or "" when none was written
  bool from_cost_file = false;               // simulated with --sim-cost (else the step's own costs, or not at all)
  TimeNs makespan = 0;                       // the simulated step, per-step work included
  std::vector<Bytes> peak_activation_bytes;  // per rank, as the simulator counts them
  // Where the cost file gives spreads (a profile's p10 and p90): the step
  // sampled from them (kPredictionSamples draws, seed kPredictionSeed).
  std::optional<StepTimeSamples> sampled;
};
constexpr int kPredictionSamples = 200;
constexpr std::uint64_t kPredictionSeed = 1;

// Writes `measured`, the last step's timeline with the ranks' devices
// (--trace), and with --sim-trace or --sim-cost the same plan simulated on
// the same devices: with --sim-cost's costs, else with the compute costs
// measured in the step (--sim-trace only). Both stacked go into --out's
// timeline.svg, the simulated block above.
RunPrediction WriteRunTraces(const TrainOptions& o, const Schedule& schedule, const Timeline& measured);

// Whether the GPU waited for the host to launch its kernels: on the CUDA-event
// clock, rank 0's device lag (the median over the steps a prediction is set
// against, of each step's median, StepResult::host_times) is under
// kLaunchBoundShare of its median compute action in `measured`
// (LaunchBoundLag, runtime/exec/executor.h). The host
// then decides the step, and fewer launches (--cuda-graphs) may pay. Unset
// on the host clock, which has no lag, and without a compute action.
struct LaunchBound {
  bool bound = false;
  double lag_ms = 0;     // rank 0's device lag
  double action_ms = 0;  // rank 0's median compute action
};
std::optional<LaunchBound> LaunchBoundOf(const std::string& clock, const std::vector<double>& device_lag_ms,
                                         const Timeline& measured);
// The summary's line for a run the host bound that did not use
// --cuda-graphs: what to try, or what keeps this plan from it. Empty
// otherwise.
std::string LaunchBoundHint(const TrainOptions& o, const Schedule& schedule, const std::optional<LaunchBound>& l);

// Prints the run's summary on stdout: with --json one object (losses, step
// times, clocks, MFU, executor overhead, ...), else a few lines saying what
// was trained and where its outputs are.
// With a --sim-cost prediction it also sets the predicted step time against
// the median of the measured steps after the first two (all, with three or
// fewer), its sampled p10..p90 (where the file has spreads) against the
// measured steps' p10..p90, and with --measure-memory each rank's predicted
// peak against the measured one (`prediction` in --json).
void PrintRunSummary(const TrainOptions& o, const RunFacts& facts, const TrainSummary& summary,
                     const Timeline& measured, const RunPrediction& prediction);

}  // namespace pplab::cli
