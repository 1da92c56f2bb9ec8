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

#include <ATen/core/Tensor.h>
#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>

#include <memory>

#include "runtime/exec/stage.h"

namespace pplab {

// While alive, autocast to `dtype` is on for `device` (kCPU or kCUDA) in this
// thread; destruction restores the state it found. While a region lasts,
// autocast caches the bf16 cast of each weight it is handed as it is (an
// fp32 leaf that requires grad; not a view, such as the W^T that CPU
// autocast sees of nn::Linear's weight, where CUDA autocast sees W). Leaving
// the outermost guard clears that cache, unless an AutocastCacheScope is
// alive, so that the next forward casts the weights as the optimizer left
// them (the cache would otherwise hand out bf16 copies of weights from before
// the update). Throws pplab::Error for a device autocast does not support here.
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
  bool was_cache_enabled_ = true;
};

// While alive, autocast's cache of cast weights outlives the guards in this
// thread: every forward in the scope uses the bf16 copy of a weight that the
// first one made (and the graph node of that cast, which the backwards share)
// instead of casting again. The outermost scope's end clears the cache. It
// does not turn autocast on: backwards run inside it, outside autocast.
// Contract: the weights do not change while a scope is alive (a scope ends
// before the optimizer step), and it ends on the thread that made it. A
// forward in another grad mode than the outermost scope began in (a
// NoGradGuard evaluation inside a training scope, or the reverse) neither
// uses nor fills the cache: a cast made without grad has no graph node, and
// handed to a forward that trains it would leave its weight without a
// gradient. Threads: the cache is per thread in LibTorch 1.13 but one per
// process in 2.x, while the nesting that keeps it is per thread; there a
// thread leaving its outermost guard or scope clears the casts of all (they
// are cast again, never stale). pplab runs a process's steps on one thread.
class AutocastCacheScope {
 public:
  AutocastCacheScope();
  ~AutocastCacheScope();
  AutocastCacheScope(const AutocastCacheScope&) = delete;
  AutocastCacheScope& operator=(const AutocastCacheScope&) = delete;
};

// `stacked`, several weights end to end seen as one matrix (a view into a
// flat buffer, models/projections.h), in `dtype`: cast once while an
// AutocastCacheScope lives in this thread, as autocast's cache casts a
// single weight once (it keeps leaves only, never such a view), and at
// every call outside one. The cast carries no graph node: its user
// computes the weights' gradients itself. The outermost scope's end drops
// the casts. Same contract as the scope: the weights do not change while it
// lives.
at::Tensor CachedStackedCast(const at::Tensor& stacked, c10::ScalarType dtype);

// While alive, no cast in this thread is taken from a cache or put in one:
// neither autocast's cache nor CachedStackedCast's, whatever guards and
// scopes are alive around it; destruction restores both. For work a CUDA
// graph captures (runtime/exec/graphed_stage.h): a replay runs only the
// kernels its capture saw, so the capture must cast the weights itself. A
// cast taken from a cache would leave the graph reading that copy: stale
// after the optimizer's update, and freed when its scope ends.
class AutocastCacheOff {
 public:
  AutocastCacheOff();
  ~AutocastCacheOff();
  AutocastCacheOff(const AutocastCacheOff&) = delete;
  AutocastCacheOff& operator=(const AutocastCacheOff&) = delete;

 private:
  bool was_cache_enabled_ = true;
};

// Whether autocast is on for `device` in this thread.
bool AutocastEnabled(c10::DeviceType device);
// The dtype autocast runs matmuls in on `device` in this thread when it is
// on (bf16 under an AutocastGuard), else `otherwise`. For code that casts
// for itself, such as a custom autograd function's backward, which runs
// where autocast is off.
c10::ScalarType AutocastComputeDtype(c10::DeviceType device, c10::ScalarType otherwise);

// `stage` in bf16 mixed precision on `device`: its Forward runs under an
// AutocastGuard, and its bf16 outputs leave as fp32 (on a Llama stage: the
// logits; the hidden state is already fp32, as the residual stream adds
// bf16 matmul outputs to fp32 inputs), so the loss is computed in fp32 and
// the stage's inputs and outputs keep the dtypes of an fp32 run. Parameters
// and ReceivedSpec are the inner stage's.
std::unique_ptr<Stage> MixedPrecisionStage(std::unique_ptr<Stage> stage, c10::DeviceType device);

}  // namespace pplab
