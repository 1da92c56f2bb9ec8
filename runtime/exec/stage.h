// Stage: the part of a model one pipeline stage runs. The executor runs any
// Stage; it does not know which model it is (tools/ wires Llama in).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <string>
#include <utility>
#include <vector>

#include "schedules/units.h"

namespace pplab {

using TensorList = std::vector<at::Tensor>;

// The dtype and shape of one tensor of a message, known before it arrives.
struct TensorSpec {
  c10::ScalarType dtype = c10::ScalarType::Float;
  std::vector<int64_t> shape;
};
// Every tensor of a message, in order; empty when not known in advance.
using MessageSpec = std::vector<TensorSpec>;

class Stage {
 public:
  virtual ~Stage() = default;
  // Runs the stage on one microbatch. Inputs and outputs are lists so that
  // masks and positions travel with activations. Floating-point tensors carry
  // gradients between stages; integer ones (tokens, masks) do not.
  virtual TensorList Forward(const TensorList& inputs) = 0;
  // Parameters with their global names (the same whatever the partition).
  virtual std::vector<std::pair<std::string, at::Tensor>> NamedParameters() = 0;
  // What this stage receives for a microbatch of `rows` sequences of
  // `seq_len` tokens: its inputs from the previous stage (forward), or the
  // gradients of its floating-point outputs from the next one (backward).
  // The transports post their receives with these (C10dTransport refuses
  // an empty spec); the default, an empty spec, means "not known", which
  // only FakeTransport accepts.
  virtual MessageSpec ReceivedSpec(bool forward, int64_t rows, int64_t seq_len) const {
    (void)forward, (void)rows, (void)seq_len;
    return {};
  }
  // Memory the stage keeps from one step to the next for its activations,
  // beyond its parameters and gradients: graphed stages' slots
  // (GraphStats::slot_bytes). A step's measured peak activation bytes
  // include it, as the simulator holds graphs' slots for the whole step.
  virtual Bytes HeldBytes() const { return 0; }
};

}  // namespace pplab
