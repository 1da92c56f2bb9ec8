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
// by the constructor, as soon as the stage's backward is done, and copied
// back into the gradients by Finish(), after the step.
class StageBucket {
 public:
  StageBucket(Stage& stage, ProcessGroupHandle& dp_group);
  ~StageBucket();
  void Finish(std::chrono::milliseconds timeout);

 private:
  std::vector<at::Tensor> grads_;
  at::Tensor bucket_;
  std::shared_ptr<PendingCollective> pending_;
};

// The sum of the squares of the gradients of `params`, as a 0-dim float64
// tensor where they live (zero when none has a gradient): no host read.
at::Tensor GradSquares(const std::vector<at::Tensor>& params);

// Multiplies every defined gradient of `params` by `scale`, in one foreach call.
void ScaleGradients(const std::vector<at::Tensor>& params, double scale);

}  // namespace pplab
