// WaitForDevice on a CUDA device (compiled only in CUDA builds): an event
// recorded on the current stream, polled rather than synchronized.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include <chrono>
#include <string>

#include "runtime/comm/cuda_event.h"
#include "runtime/comm/poll.h"

namespace pplab {

bool WaitForCudaStream(const c10::Device& device, std::chrono::milliseconds timeout) {
  c10::cuda::CUDAGuard guard(device);
  CudaEvent done;  // timing off: only its completion is asked
  done.record(at::cuda::getCurrentCUDAStream(device.index()));
  return PollUntil([&done] { return done.query(); }, timeout);
}

}  // namespace pplab
