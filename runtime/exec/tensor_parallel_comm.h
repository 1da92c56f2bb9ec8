// What a tensor-parallel model needs from its group (models/tensor_parallel.h):
// a sum over the group, and for sequence parallelism an all-gather and a
// reduce-scatter along a dimension. The runtime implements them over a
// process group (runtime/train/worker_setup.h); the model calls them from
// its forward and from autograd's backward.
#pragma once

#include <ATen/core/Tensor.h>

namespace pplab {

class TensorParallelComm {
 public:
  virtual ~TensorParallelComm() = default;
  // Sums `tensor` over the group, in place. Every rank of the group calls it
  // the same number of times in the same order; a peer that does not come
  // within the run's --comm-timeout makes it throw pplab::Error.
  virtual void AllReduceSum(at::Tensor& tensor) = 0;
  // Every rank's `tensor` (all of one shape) side by side along `dim`, in
  // rank order, in a new tensor of `tensor`'s dtype and device.
  virtual at::Tensor AllGather(const at::Tensor& tensor, int64_t dim) = 0;
  // The sum over the group of `tensor`, cut along `dim` into one equal piece
  // per rank: this rank's piece, in a new tensor. `tensor.size(dim)` must
  // be a multiple of the group's size.
  virtual at::Tensor ReduceScatter(const at::Tensor& tensor, int64_t dim) = 0;
};

}  // namespace pplab
