#include "runtime/exec/autocast.h"

#include <ATen/autocast_mode.h>
#include <c10/core/GradMode.h>
#include <torch/torch.h>
#include <torch/version.h>

#include <string>
#include <vector>

#include "schedules/error.h"

// LibTorch 2.4 made autocast's state per device type
// (set_autocast_enabled(DeviceType, bool)) and deprecated the per-device
// functions that 1.13 has (set_cpu_enabled, set_enabled for CUDA, ...).
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
#define PPLAB_AUTOCAST_BY_DEVICE_TYPE 1
#else
#define PPLAB_AUTOCAST_BY_DEVICE_TYPE 0
#endif

namespace pplab {
namespace {

void CheckDevice(c10::DeviceType device) {
  if (device != c10::DeviceType::CPU && device != c10::DeviceType::CUDA) {
    throw Error(std::string("bf16 autocast runs on the CPU or CUDA, not on ") + c10::DeviceTypeName(device));
  }
}

bool IsEnabled(c10::DeviceType device) {
#if PPLAB_AUTOCAST_BY_DEVICE_TYPE
  return at::autocast::is_autocast_enabled(device);
#else
  return device == c10::DeviceType::CPU ? at::autocast::is_cpu_enabled() : at::autocast::is_enabled();
#endif
}

void SetEnabled(c10::DeviceType device, bool enabled) {
#if PPLAB_AUTOCAST_BY_DEVICE_TYPE
  at::autocast::set_autocast_enabled(device, enabled);
#else
  if (device == c10::DeviceType::CPU) {
    at::autocast::set_cpu_enabled(enabled);
  } else {
    at::autocast::set_enabled(enabled);
  }
#endif
}

c10::ScalarType GetDtype(c10::DeviceType device) {
#if PPLAB_AUTOCAST_BY_DEVICE_TYPE
  return at::autocast::get_autocast_dtype(device);
#else
  return device == c10::DeviceType::CPU ? at::autocast::get_autocast_cpu_dtype()
                                        : at::autocast::get_autocast_gpu_dtype();
#endif
}

void SetDtype(c10::DeviceType device, c10::ScalarType dtype) {
#if PPLAB_AUTOCAST_BY_DEVICE_TYPE
  at::autocast::set_autocast_dtype(device, dtype);
#else
  if (device == c10::DeviceType::CPU) {
    at::autocast::set_autocast_cpu_dtype(dtype);
  } else {
    at::autocast::set_autocast_gpu_dtype(dtype);
  }
#endif
}

// This thread's AutocastCacheScopes: how many are alive, and the grad mode
// the outermost began in.
thread_local int cache_scopes = 0;
thread_local bool cache_scope_grad_mode = true;

// CachedStackedCast's casts in this thread while a scope lives, by what
// they cast: storage, first element, shape and dtype.
struct StackedCast {
  const void* storage;
  int64_t offset;
  std::vector<int64_t> sizes;
  c10::ScalarType dtype;
  at::Tensor cast;
};
thread_local std::vector<StackedCast> stacked_casts;
// How many AutocastCacheOffs are alive in this thread.
thread_local int caches_off = 0;

class MixedPrecision : public Stage {
 public:
  MixedPrecision(std::unique_ptr<Stage> inner, c10::DeviceType device) : inner_(std::move(inner)), device_(device) {
    CheckDevice(device);
  }
  TensorList Forward(const TensorList& inputs) override {
    TensorList outputs;
    {
      AutocastGuard autocast(device_);
      outputs = inner_->Forward(inputs);
    }
    // Outside autocast: the casts are ordinary ops, and their backward
    // brings the gradient back to bf16 for the op that made the output.
    for (at::Tensor& t : outputs) {
      if (t.defined() && t.scalar_type() == c10::ScalarType::BFloat16) t = t.to(c10::ScalarType::Float);
    }
    return outputs;
  }
  std::vector<std::pair<std::string, at::Tensor>> NamedParameters() override { return inner_->NamedParameters(); }
  MessageSpec ReceivedSpec(bool forward, int64_t rows, int64_t seq_len) const override {
    return inner_->ReceivedSpec(forward, rows, seq_len);
  }
  Bytes HeldBytes() const override { return inner_->HeldBytes(); }

 private:
  std::unique_ptr<Stage> inner_;
  c10::DeviceType device_;
};

}  // namespace

AutocastGuard::AutocastGuard(c10::DeviceType device, c10::ScalarType dtype) : device_(device) {
  CheckDevice(device);
  was_enabled_ = IsEnabled(device);
  was_dtype_ = GetDtype(device);
  SetEnabled(device, true);
  SetDtype(device, dtype);
  was_cache_enabled_ = at::autocast::is_autocast_cache_enabled();
  // LibTorch 1.13 and 2.6 cache a cast made under no_grad as it is, without
  // the graph node that leads to the weight (PyTorch issue 158232, fixed
  // later): see AutocastCacheScope.
  if (cache_scopes > 0 && c10::GradMode::is_enabled() != cache_scope_grad_mode) {
    at::autocast::set_autocast_cache_enabled(false);
  }
  at::autocast::increment_nesting();
}

AutocastGuard::~AutocastGuard() {
  // As torch.autocast's __exit__: the cache lives as long as the outermost
  // region, guard or AutocastCacheScope, since both count in the nesting.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  at::autocast::set_autocast_cache_enabled(was_cache_enabled_);
  SetEnabled(device_, was_enabled_);
  SetDtype(device_, was_dtype_);
}

AutocastCacheScope::AutocastCacheScope() {
  if (cache_scopes++ == 0) cache_scope_grad_mode = c10::GradMode::is_enabled();
  at::autocast::increment_nesting();
}

AutocastCacheScope::~AutocastCacheScope() {
  if (--cache_scopes == 0) stacked_casts.clear();
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
}

AutocastCacheOff::AutocastCacheOff() : was_cache_enabled_(at::autocast::is_autocast_cache_enabled()) {
  at::autocast::set_autocast_cache_enabled(false);
  ++caches_off;
}

AutocastCacheOff::~AutocastCacheOff() {
  --caches_off;
  at::autocast::set_autocast_cache_enabled(was_cache_enabled_);
}

at::Tensor CachedStackedCast(const at::Tensor& stacked, c10::ScalarType dtype) {
  if (cache_scopes == 0 || caches_off > 0) return stacked.to(dtype);
  const void* storage = stacked.storage().unsafeGetStorageImpl();
  for (const StackedCast& c : stacked_casts) {
    if (c.storage == storage && c.offset == stacked.storage_offset() && c.dtype == dtype &&
        stacked.sizes().equals(c.sizes)) {
      return c.cast;
    }
  }
  at::Tensor cast = stacked.to(dtype);
  stacked_casts.push_back({storage, stacked.storage_offset(), stacked.sizes().vec(), dtype, cast});
  return cast;
}

bool AutocastEnabled(c10::DeviceType device) {
  CheckDevice(device);
  return IsEnabled(device);
}

c10::ScalarType AutocastComputeDtype(c10::DeviceType device, c10::ScalarType otherwise) {
  if (device != c10::DeviceType::CPU && device != c10::DeviceType::CUDA) return otherwise;
  return IsEnabled(device) ? GetDtype(device) : otherwise;
}

std::unique_ptr<Stage> MixedPrecisionStage(std::unique_ptr<Stage> stage, c10::DeviceType device) {
  return std::make_unique<MixedPrecision>(std::move(stage), device);
}

}  // namespace pplab
