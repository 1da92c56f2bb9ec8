// What a tensor-parallel model needs from its group (models/tensor_parallel.h):
// a sum over the group, in place. The runtime implements it over a process
// group (runtime/train/worker_setup.h); the model calls it from its forward
// and from autograd's backward.
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
};

}  // namespace pplab
