// The work of a training step after the executor's actions, shared by the
// trainer, which does it, and the profiler, which times exactly it
// (runtime/train/profile.cc): a stage's data-parallel gradient bucket, the
// squared gradient norm and clipping.
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "runtime/comm/process_group.h"
#include "runtime/exec/stage.h"

namespace pplab {

struct PendingCollective;

// One stage's gradients summed over its data-parallel replicas as one flat
// bucket (one all-reduce per stage rather than one per parameter): started
// by the constructor, as soon as the stage's backward is done, and finished
// by Finish(), after the step. `grads` are the stage's gradient tensors
// (GradientsOf): a flat gradient buffer on the group's device is summed
// where it lies; anything else is concatenated into a bucket, summed and
// copied back.
class StageBucket {
 public:
  StageBucket(const std::vector<at::Tensor>& grads, ProcessGroupHandle& dp_group);
  ~StageBucket();
  void Finish(std::chrono::milliseconds timeout);

 private:
  std::vector<at::Tensor> grads_;
  at::Tensor bucket_;
  std::shared_ptr<PendingCollective> pending_;
};

// The sum of the squares of the elements of `grads` (gradient tensors: flat
// buffers, or each parameter's), as a 0-dim float64 tensor where they live,
// zero when `grads` is empty: no host read. Each tensor's 2-norm is taken
// in its own dtype over rows of 1024 elements, as torch.nn.utils.clip_grad_norm_
// takes it over each parameter, and the squares are summed in float64: exact
// to about 1e-9 for a flat buffer of 150M elements, whose norm() in one call
// lost 2 % on the CPU.
at::Tensor GradSquares(const std::vector<at::Tensor>& grads);

// Multiplies every tensor of `grads` by `scale`, in one foreach call.
void ScaleGradients(const std::vector<at::Tensor>& grads, double scale);

}  // namespace pplab
