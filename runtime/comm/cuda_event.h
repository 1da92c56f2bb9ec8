// CUDA builds only: the CUDA event class, which moved from ATen to c10 in
// LibTorch 2.x.
#pragma once

#if __has_include(<c10/cuda/CUDAEvent.h>)
#include <c10/cuda/CUDAEvent.h>
namespace pplab {
using CudaEvent = c10::cuda::CUDAEvent;
}  // namespace pplab
#else
#include <ATen/cuda/CUDAEvent.h>
namespace pplab {
using CudaEvent = at::cuda::CUDAEvent;
}  // namespace pplab
#endif
