// WaitForDevice on a CUDA device (compiled only in CUDA builds): an event
// recorded on the current stream, polled rather than synchronized.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include <chrono>
#include <string>

#include "runtime/comm/poll.h"
#include "schedules/error.h"

// The event class moved from ATen to c10 in LibTorch 2.x.
#if __has_include(<c10/cuda/CUDAEvent.h>)
#include <c10/cuda/CUDAEvent.h>
using CudaWaitEvent = c10::cuda::CUDAEvent;
#else
#include <ATen/cuda/CUDAEvent.h>
using CudaWaitEvent = at::cuda::CUDAEvent;
#endif

namespace pplab {

bool WaitForCudaStream(const c10::Device& device, std::chrono::milliseconds timeout) {
  c10::cuda::CUDAGuard guard(device);
  CudaWaitEvent done;  // timing off: only its completion is asked
  done.record(at::cuda::getCurrentCUDAStream(device.index()));
  return PollUntil([&done] { return done.query(); }, timeout);
}

}  // namespace pplab
