#include "runtime/train/profile_steps.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>

#include "runtime/comm/collectives.h"
#include "runtime/comm/device_wait.h"
#include "runtime/comm/fake_transport.h"
#include "runtime/exec/step_clock.h"
#include "runtime/train/adamw.h"
#include "runtime/train/profile_timing.h"
#include "runtime/train/step_work.h"
#include "schedules/generators.h"
#include "schedules/lowering.h"

namespace pplab::profile_detail {

// The executor's own time per action outside F and B: the real Executor runs
// a one-rank 1F1B plan of this rank's first stage (its loss, when it is not
// the last stage, is the dot product with the output gradient, so B does the
// same work as in training). 1F1B on one rank holds one microbatch's
// activations at a time: a 64 x 512 microbatch of the default preset holds
// about 36 GB, so four at once (GPipe) would not fit an 80 GB GPU.
ActionOverhead MeasureActionOverhead(Stage& stage, const TensorList& inputs, const TensorList& output_grads, bool last,
                                     const MicrobatchData& data, const LossFn& loss, double loss_scale,
                                     const ProfileOptions& options) {
  const int M = options.overhead_microbatches;
  const Schedule schedule = Lower(Generate("1f1b", {1, M, 1}));
  const TensorList grads = output_grads;
  LossFn surrogate = [grads](const TensorList& outputs, const at::Tensor&) {
    at::Tensor sum = torch::zeros({}, outputs.at(0).options().dtype(torch::kFloat32));
    size_t g = 0;
    for (const at::Tensor& t : outputs) {
      if (t.defined() && at::isFloatingType(t.scalar_type())) sum = sum + (t * grads.at(g++)).sum();
    }
    return sum;
  };
  FakeTransport transport(0, std::make_shared<FakeNetwork>());
  ExecutorOptions exec_options;
  exec_options.comm_timeout = options.comm_timeout;
  exec_options.clock = options.clock;
  // Graphed stages cast their weights in each capture (as pplab train).
  exec_options.share_weight_casts = !options.graphed;
  Executor executor(schedule, 0, {{0, &stage}}, transport, last ? loss : surrogate, exec_options);
  std::vector<MicrobatchData> microbatches(M, MicrobatchData{inputs, data.targets});
  std::vector<double> per_action, lags, action_ms;
  for (int i = 0; i < 1 + options.repeats; ++i) {
    // The step's span and its actions' times on one clock: on a GPU both are
    // CUDA events, so the overhead is the time the GPU waited for the host.
    const StepResult r = executor.RunStep(microbatches, last ? loss_scale : 1.0, Clock::now());
    const double wall = NsToMs(r.clock_span_ns);
    double busy = 0;
    int actions = 0;
    for (const TimelineEvent& e : r.events) {
      if (!IsCompute(e.action.kind)) continue;
      busy += NsToMs(e.end - e.start);
      ++actions;
      if (i >= 1) action_ms.push_back(NsToMs(e.end - e.start));
    }
    if (i >= 1 && actions > 0) {
      per_action.push_back(std::max(0.0, wall - busy) / actions);
      lags.push_back(MedianDeviceLagMs(r));
    }
  }
  for (auto& [name, p] : stage.NamedParameters()) {
    if (p.grad().defined()) p.mutable_grad().zero_();
  }
  const bool host_clock = options.clock == nullptr || std::string(options.clock->Name()) == "host";
  return {Median(per_action), host_clock ? std::nan("") : Median(lags), Median(action_ms)};
}

void PingPong(RankId rank, RankId a, RankId b, Transport& transport, const ProfileOptions& options, int64_t& tag,
              LinkProfile& link, StepClock& clock, const c10::Device& device) {
  std::vector<Bytes> sizes = {1};
  sizes.insert(sizes.end(), options.link_payload_bytes.begin(), options.link_payload_bytes.end());
  link.from = a;
  link.to = b;
  for (const Bytes size : sizes) {
    const int64_t n = std::max<Bytes>(size, 1);
    const TensorList message = {torch::zeros({n}, torch::TensorOptions(torch::kUInt8).device(device))};
    const MessageSpec spec = {{c10::ScalarType::Byte, {n}}};
    std::vector<double> one_way;
    for (int i = 0; i < options.warmup + options.repeats; ++i, tag += 2) {
      if (rank == a) {
        transport.PostRecv(b, tag + 1, spec);
        const double round_trip = TimeMs(clock, options.comm_timeout, [&] {
          transport.Send(b, tag, message);
          transport.WaitRecv(b, tag + 1, options.comm_timeout);
        });
        if (i >= options.warmup) one_way.push_back(round_trip / 2);
      } else if (rank == b) {
        transport.PostRecv(a, tag, spec);
        transport.WaitRecv(a, tag, options.comm_timeout);
        transport.Send(a, tag + 1, message);
      }
      transport.WaitSends(options.comm_timeout);
    }
    if (rank == a) link.samples.push_back({WireBytes(message), Median(one_way)});
  }
  if (rank == a) FitLink(link);
}

// The work of a training step after the executor's actions, as the trainer
// does it (runtime/train/trainer.cc, with runtime/train/step_work.h): the
// step's one all-reduce and host read (loss, busy time and squared norm,
// three doubles), each stage's REDUCE_GRAD with replicas (StageBucket), the
// squared gradient norm (GradSquares), clipping (ScaleGradients) and the
// AdamW step. The gradients are those the F/B phases left.
StepProfile MeasureStepWork(const std::map<StageId, Stage*>& stages, const std::map<StageId, FlatBuffer>& flats,
                            ProcessGroupHandle* group, const ProfileOptions& options, StepClock& clock,
                            std::map<StageId, StageProfile>& profiles) {
  std::vector<at::Tensor> grads;
  std::vector<std::pair<std::string, at::Tensor>> named;
  std::vector<FlatBuffer> buffers;
  for (auto& [s, stage] : stages) {
    for (const at::Tensor& g : GradientsOf(flats.at(s), stage->NamedParameters())) grads.push_back(g);
    for (auto& [name, p] : stage->NamedParameters()) named.emplace_back(name, p);
    buffers.push_back(flats.at(s));
  }
  StepProfile step;
  if (group != nullptr) {
    step.loss_allreduce = Repeat(clock, group, options, [&] {
      // Made on the group's device, as the trainer stacks its sums there (a
      // host tensor's copy would add a synchronisation the step does not have).
      at::Tensor sums = torch::full({3}, 1.0, torch::TensorOptions(torch::kFloat64).device(GroupDevice(*group)));
      AllReduceSumInPlace(*group, sums, options.comm_timeout);
      (void)HostCopy(sums, options.comm_timeout, "the loss all-reduce")[0].item<double>();
    });
  }
  if (options.dp_group != nullptr && options.dp > 1) {
    for (auto& [s, stage] : stages) {
      // Every rank takes part in each barrier of Repeat, so a stage without
      // gradients (its replicas have none either) still takes its turns.
      const std::vector<at::Tensor> stage_grads = GradientsOf(flats.at(s), stage->NamedParameters());
      profiles[s].reduce_grad = Repeat(
          clock, group, options, [&] { StageBucket(stage_grads, *options.dp_group).Finish(options.comm_timeout); });
    }
  }
  // The norm's squares; their sum rides on the loss's all-reduce above, and
  // their read on its host read, so they are timed (by the step clock: CUDA
  // events on a GPU) without a read of their own.
  step.norm_allreduce = Repeat(clock, group, options, [&] { (void)GradSquares(grads); });
  step.clip = Repeat(clock, group, options, [&] { ScaleGradients(grads, 1.0); });
  AdamW optimizer(named, AdamWConfig{}, buffers);
  step.optimizer = Repeat(clock, group, options, [&] { optimizer.Step(1e-6); });
  return step;
}

}  // namespace pplab::profile_detail
