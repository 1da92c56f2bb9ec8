// Stage: the part of a model one pipeline stage runs. The executor runs any
// Stage; it does not know which model it is (tools/ wires Llama in).
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <utility>
#include <vector>

namespace pplab {

using TensorList = std::vector<at::Tensor>;

class Stage {
 public:
  virtual ~Stage() = default;
  // Runs the stage on one microbatch. Inputs and outputs are lists so that
  // masks and positions travel with activations. Floating-point tensors carry
  // gradients between stages; integer ones (tokens, masks) do not.
  virtual TensorList Forward(const TensorList& inputs) = 0;
  // Parameters with their global names (the same whatever the partition).
  virtual std::vector<std::pair<std::string, at::Tensor>> NamedParameters() = 0;
};

}  // namespace pplab
