// The NCCL backend: compiled only when the found LibTorch has CUDA (CMake
// defines PPLAB_WITH_NCCL then). Bounded waits: NCCL's watchdog aborts any
// operation older than the group's timeout and ends the process with a
// message, so a dead peer never leaves a rank hanging.
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
  options->timeout = timeout;
  return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, world_size, options);
}

}  // namespace pplab
