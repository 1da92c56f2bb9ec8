// What a tensor-parallel model needs from its group (models/tensor_parallel.h):
// a sum over the group, and for sequence parallelism an all-gather and a
// reduce-scatter along a dimension, each also started apart from its wait
// (the backward computes the weights' gradients while the input's is
// summed). The runtime implements them over a process group
// (runtime/train/worker_setup.h); the model calls them from its forward and
// from autograd's backward.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <utility>

namespace pplab {

// A collective that has started: Wait gives its result, waiting as the
// blocking form would. Called once.
class StartedCollective {
 public:
  virtual ~StartedCollective() = default;
  virtual at::Tensor Wait() = 0;
};

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

  // The three started: the caller computes something else, then waits. The
  // order rule is the blocking forms': every rank starts the group's
  // collectives in one order (a start counts where it is called). By
  // default each runs at once, and Wait gives its result.
  virtual std::unique_ptr<StartedCollective> StartAllReduceSum(at::Tensor tensor) {
    AllReduceSum(tensor);
    return Done(std::move(tensor));
  }
  virtual std::unique_ptr<StartedCollective> StartAllGather(const at::Tensor& tensor, int64_t dim) {
    return Done(AllGather(tensor, dim));
  }
  virtual std::unique_ptr<StartedCollective> StartReduceScatter(const at::Tensor& tensor, int64_t dim) {
    return Done(ReduceScatter(tensor, dim));
  }

 protected:
  // A collective already finished, with its result.
  static std::unique_ptr<StartedCollective> Done(at::Tensor result) {
    struct Finished : StartedCollective {
      explicit Finished(at::Tensor t) : result(std::move(t)) {}
      at::Tensor Wait() override { return result; }
      at::Tensor result;
    };
    return std::make_unique<Finished>(std::move(result));
  }
};

}  // namespace pplab
