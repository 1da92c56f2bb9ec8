// The NCCL backend: compiled only when the found LibTorch has CUDA (CMake
// defines PPLAB_WITH_NCCL then). Bounded waits: where the host blocks on
// NCCL's work it polls, at most the group's timeout (device_wait.h); NCCL's
// watchdog aborts any operation 10 s older than that and ends the process,
// so a dead peer never leaves a rank hanging.
#define USE_C10D_NCCL 1
#include <c10/cuda/CUDAFunctions.h>
#include <torch/torch.h>

#include <cstdlib>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

#include "runtime/comm/c10d_group.h"

namespace pplab {

c10::intrusive_ptr<C10dBackend> MakeNcclBackend(const c10::intrusive_ptr<c10d::Store>& store, RankId rank,
                                                int world_size, c10::Device device, std::chrono::milliseconds timeout) {
  if (!device.is_cuda() || !device.has_index()) throw Error("NCCL needs a CUDA device with an index");
  // Asynchronous error handling: a failed or timed-out collective tears the
  // communicator down instead of waiting forever (the user may override it).
  ::setenv("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1", /*overwrite=*/0);
  c10::cuda::set_device(device.index());
  auto options = c10d::ProcessGroupNCCL::Options::create();
  // pplab's own bounded waits (device_wait.h, the step clock's Resolve) use
  // `timeout` and name the rank and what it waited for; the watchdog, a
  // little later, is the backstop that tears the process down.
  options->timeout = timeout + std::chrono::milliseconds(10000);
  return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, world_size, options);
}

}  // namespace pplab
