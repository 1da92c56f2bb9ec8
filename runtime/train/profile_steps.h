// The profile's measurements of what runs around the stages' F, B, I and W
// (runtime/train/profile.h): the executor's own time per action, a link's
// one-way times, and the work of a training step after the actions (the
// all-reduces, clipping and the AdamW step), each as training runs it.
#pragma once

#include <map>

#include "runtime/exec/executor.h"
#include "runtime/train/flat_params.h"
#include "runtime/train/profile.h"

namespace pplab {

struct ProcessGroupHandle;
class StepClock;

namespace profile_detail {

// The executor's time per action outside F and B, the device's lag behind
// the host and a compute action's time, ms (medians of `options.repeats`
// steps): a one-rank 1F1B plan of `stage` run by the real Executor on
// `options.overhead_microbatches` copies of `inputs`. Unless the stage is
// the last, its loss is the dot product of the outputs with
// `output_grads`, so B does the work of training. Leaves the stage's
// gradients zero.
ActionOverhead MeasureActionOverhead(Stage& stage, const TensorList& inputs, const TensorList& output_grads, bool last,
                                     const MicrobatchData& data, const LossFn& loss, double loss_scale,
                                     const ProfileOptions& options);

// Ping-pong between ranks `a` (which times and fits `link`) and `b`: a
// one-byte message and each of options.link_payload_bytes, made on
// `device`; every other rank returns at once. `tag` advances past the tags
// used.
void PingPong(RankId rank, RankId a, RankId b, Transport& transport, const ProfileOptions& options, int64_t& tag,
              LinkProfile& link, StepClock& clock, const c10::Device& device);

// The step's work after the actions on this rank's stages, each timed as
// the spread of `options.repeats` runs after a barrier; fills each stage's
// reduce_grad in `profiles` when there are data-parallel replicas.
StepProfile MeasureStepWork(const std::map<StageId, Stage*>& stages, const std::map<StageId, FlatBuffer>& flats,
                            ProcessGroupHandle* group, const ProfileOptions& options, StepClock& clock,
                            std::map<StageId, StageProfile>& profiles);

}  // namespace profile_detail
}  // namespace pplab
