#include "runtime/exec/device_info.h"

#include <ATen/Context.h>

#ifdef PPLAB_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

namespace pplab {

std::string DeviceName(const c10::Device& device) {
  if (device.is_cpu()) return "cpu";
#ifdef PPLAB_WITH_CUDA
  if (device.is_cuda()) {
    const auto index = device.has_index() ? device.index() : static_cast<c10::DeviceIndex>(at::cuda::current_device());
    return at::cuda::getDeviceProperties(index)->name;
  }
#endif
  return device.str();
}

std::string Fp32MatmulPrecision(const c10::Device& device) {
  return device.is_cuda() && at::globalContext().allowTF32CuBLAS() ? "tf32" : "fp32";
}

}  // namespace pplab
