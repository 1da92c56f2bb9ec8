// Autocast: bf16 mixed-precision compute for a stage's forward, through
// LibTorch's autocast, in one place for LibTorch 1.13 and 2.x (whose
// autocast API differs; autocast.cc picks by TORCH_VERSION_*).
//
// Under autocast, matmuls and linear layers run in bf16 (their fp32 inputs
// and weights are cast on the way in); the ops autocast keeps in fp32 stay
// fp32, and the rest follow their inputs (bf16 + fp32 gives fp32). The
// parameters stay fp32 leaves, so their gradients are fp32 ("master
// weights"), and backward runs outside autocast, each op in the dtypes its
// forward recorded.
#pragma once

#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>

#include <memory>

#include "runtime/exec/stage.h"

namespace pplab {

// While alive, autocast to `dtype` is on for `device` (kCPU or kCUDA) in this
// thread; destruction restores the state it found. Leaving the outermost
// guard clears autocast's cache of cast weights, so that the next forward
// casts the weights as the optimizer left them (the cache would otherwise
// hand out bf16 copies of weights from before the update). Throws
// pplab::Error for a device autocast does not support here.
class AutocastGuard {
 public:
  explicit AutocastGuard(c10::DeviceType device, c10::ScalarType dtype = c10::ScalarType::BFloat16);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  c10::DeviceType device_;
  bool was_enabled_ = false;
  c10::ScalarType was_dtype_ = c10::ScalarType::Float;
};

// Whether autocast is on for `device` in this thread.
bool AutocastEnabled(c10::DeviceType device);

// `stage` in bf16 mixed precision on `device`: its Forward runs under an
// AutocastGuard, and its bf16 outputs leave as fp32 (on a Llama stage: the
// logits; the hidden state is already fp32, as the residual stream adds
// bf16 matmul outputs to fp32 inputs), so the loss is computed in fp32 and
// the stage's inputs and outputs keep the dtypes of an fp32 run. Parameters
// and ReceivedSpec are the inner stage's.
std::unique_ptr<Stage> MixedPrecisionStage(std::unique_ptr<Stage> stage, c10::DeviceType device);

}  // namespace pplab
