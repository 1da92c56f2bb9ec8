// A stage's parameters as views into one contiguous buffer, and their
// gradients as views into a second one of the same layout. The step's work
// after the executor then runs on a few whole buffers instead of every
// parameter: zeroing the gradients, their norm, clipping and AdamW are a
// handful of kernels per rank, and a data-parallel all-reduce sums the
// gradient buffer where it lies, with no copy in or out (docs/runtime.md,
// "Flat parameter buffers").
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <utility>
#include <vector>

namespace pplab {

struct FlatBuffer {
  at::Tensor values;  // 1-D; parameter i is values[offsets[i], offsets[i] + numel_i)
  at::Tensor grads;   // 1-D, the same layout: each parameter's .grad is a view into it
  std::vector<std::string> names;
  std::vector<int64_t> offsets;

  bool defined() const { return values.defined(); }
};

// Moves `params` into one buffer: each tensor keeps its identity (modules,
// optimizers and lists holding it see the view) and its values, and gets a
// gradient that is a view into the gradient buffer, holding the gradient it
// had or zeros. Autograd then accumulates into that view in place (a
// gradient that is already defined is added to, not replaced).
//
// A consequence: a parameter no microbatch reached has a zero gradient
// rather than none, so AdamW decays it and its moments like any other (as
// torch's DistributedDataParallel does with gradients as bucket views).
//
// Returns an undefined buffer, and changes nothing, where one buffer cannot
// hold them: no parameters, mixed dtypes or devices, or two entries sharing
// storage.
FlatBuffer FlattenParameters(const std::vector<std::pair<std::string, at::Tensor>>& params);

// The gradients of `params` (one stage's, `flat` made from them or
// undefined) as few tensors as there are: the gradient buffer, or each
// defined gradient.
std::vector<at::Tensor> GradientsOf(const FlatBuffer& flat,
                                    const std::vector<std::pair<std::string, at::Tensor>>& params);

// Whether `view` is element `offset` onwards of `flat`'s storage (the
// parameter or gradient is still the buffer's view, not a tensor put in its
// place since).
bool IsViewAt(const at::Tensor& view, const at::Tensor& flat, int64_t offset);

}  // namespace pplab
