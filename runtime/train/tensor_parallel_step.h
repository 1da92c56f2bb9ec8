// The trainer's share of tensor parallelism (models/tensor_parallel.h):
// what a step and a checkpoint do beyond one rank's stages when a group of
// ranks holds the shares of the same stages. The layout comes in as a
// function from parameter name to the dimension its share is cut along.
#pragma once

#include <ATen/core/Tensor.h>

#include <chrono>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/train/checkpoint.h"

namespace pplab {

struct ProcessGroupHandle;

using SplitDim = std::function<int(const std::string& name)>;  // -1: held whole

// Sums over `group`, in place, the gradients of `params`: whole weights
// inside a split region, whose gradient each rank computed from its own
// share. One all-reduce for all of them (none when there are none; every
// rank of the group passes the same parameters in the same order).
void SumPartialGradients(const std::vector<at::Tensor>& params, ProcessGroupHandle& group,
                         std::chrono::milliseconds timeout);

// Checkpoint maps (runtime/train/checkpoint.h): a share put back together
// from the whole `group` (a collective: every rank of the group calls it
// for the same names in the same order), and a whole tensor cut down to
// share `rank` of `size`. Names held whole pass as they are.
TensorMap GatherShares(ProcessGroupHandle& group, SplitDim split_dim, std::chrono::milliseconds timeout);
TensorMap CutShare(int rank, int size, SplitDim split_dim);

}  // namespace pplab
