// The Llama stages' linear projections as autograd nodes of pplab's own, and
// tensor parallelism's entries to and exits from a split region (LibTorch;
// included by the models' sources only, models/llama.cc).
//
// A projection computes its weights' gradients itself rather than through
// autograd's graph, for three reasons:
// - under a DeferWeightGradsScope the weights' products wait for a split
//   backward's W pass (runtime/exec/weight_grads.h);
// - weights that lie end to end, as a flat buffer holds one module's
//   projections (q, k, v; gate, up), run as one matrix product each way, and
//   the weights' products sum straight into their gradients;
// - under autocast each weight is cast once a step, through autocast's cache.
//
// Tensor parallelism (models/tensor_parallel.h) follows Megatron-LM's f and
// g: where a split region starts, its input passes as it is and its gradient
// is summed over the group (fused here with the column-parallel projections
// that read it); where it ends, the partial outputs are summed and their
// gradient passes as it is. Under sequence parallelism the entry gathers the
// positions and the exit reduce-scatters them. Shapes: x (..., in), outputs
// (..., out); under sequence parallelism the positions are dimension 1 of
// (B, S, C) tensors.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <vector>

#include "models/tensor_parallel.h"
#include "runtime/exec/tensor_parallel_comm.h"

namespace pplab {

// A tensor-parallel group, with this rank's place in it, as it travels
// through an autograd context (in a capsule). A null GroupRef: no tensor
// parallelism.
struct GroupHolder : torch::CustomClassHolder {
  GroupHolder(std::shared_ptr<TensorParallelComm> c, const TensorParallel& t) : comm(std::move(c)), tp(t) {}
  std::shared_ptr<TensorParallelComm> comm;
  TensorParallel tp;
};
using GroupRef = c10::intrusive_ptr<GroupHolder>;

// `a` and `b`, laid out alike, as one view of their storage where `b`
// continues `a` along `dim` (the same strides, every other size the same,
// b's first element where a's dimension `dim` would go on); undefined
// otherwise.
torch::Tensor ContinuedAlong(const torch::Tensor& a, const torch::Tensor& b, int64_t dim);

// `parts`, each continuing the one before along `dim` (ContinuedAlong), as
// one view of their storage: a flat buffer's weights or gradients of one
// module's projections along their rows (runtime/train/flat_params.h),
// SwiGLU's gradients along their last dimension; undefined otherwise, and
// for fewer than two.
torch::Tensor EndToEnd(const std::vector<torch::Tensor>& parts, int64_t dim);

// `weight` (out, in) and `bias` (out) of a linear layer as x (..., in) ->
// (..., out), with no group.
torch::Tensor Project(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias = {});
torch::Tensor Project(const torch::nn::Linear& layer, const torch::Tensor& x);

// Column-parallel projections of x, the start of a split region: one output
// per projection, (..., out / T) each. With sequence parallelism x is this
// rank's positions and the outputs have every position. Without a group,
// the same linear layers of one input. Throws pplab::Error where some
// projections have a bias and others not.
torch::autograd::variable_list ColumnParallel(const torch::Tensor& x, std::vector<torch::nn::Linear> projections,
                                              const GroupRef& group);

// A projection whose output the group sums (row-parallel): x (..., in / T)
// -> (..., out), with its bias, held whole, added once after the sum; under
// sequence parallelism the sum is reduce-scattered over the positions.
// Without a group, the plain linear layer.
torch::Tensor RowParallel(torch::nn::Linear proj, const torch::Tensor& x, const GroupRef& group);

// A split region's exit without a projection (the vocabulary-parallel
// embedding's): `partial` (B,S,C) summed over the group, or under sequence
// parallelism reduce-scattered to this rank's positions (B,S/T,C).
torch::Tensor ExitSplitRegion(const torch::Tensor& partial, const GroupRef& group);

}  // namespace pplab
