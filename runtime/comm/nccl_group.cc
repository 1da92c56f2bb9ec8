// The NCCL backend: compiled only when the found LibTorch has CUDA (CMake
// defines PPLAB_WITH_NCCL then). Bounded waits: where the host blocks on
// NCCL's work it polls, at most the group's timeout (device_wait.h); NCCL's
// watchdog ends the process when an operation is 10 s older than that (and a
// few seconds more), so a dead peer never leaves a rank hanging.
#define USE_C10D_NCCL 1
#include <c10/cuda/CUDAFunctions.h>
#include <dlfcn.h>
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

#include "runtime/comm/c10d_group.h"

namespace pplab {
namespace {

// ProcessGroupNCCL::Options embeds NCCL's ncclConfig_t, whose size changes
// between NCCL releases; pplab allocates it with the nccl.h it was built
// against and LibTorch's NCCL fills it. Says so, once, when the two differ in
// major or minor version (a build that found another nccl.h than the one
// LibTorch was built with).
void WarnOnNcclMismatch() {
  static bool checked = false;
  if (checked) return;
  checked = true;
  using GetVersion = int (*)(int*);  // ncclResult_t ncclGetVersion(int*), ncclSuccess == 0
  const auto get = reinterpret_cast<GetVersion>(::dlsym(RTLD_DEFAULT, "ncclGetVersion"));
  int loaded = 0;
  if (get == nullptr || get(&loaded) != 0) return;
  const int built = NCCL_VERSION_CODE;
  if (loaded / 100 != built / 100) {
    std::fprintf(stderr,
                 "pplab: warning: built against nccl.h %d but the NCCL loaded is %d; build against the nccl.h of "
                 "LibTorch's NCCL (pip's nvidia/nccl/include) if NCCL groups misbehave\n",
                 built, loaded);
  }
}

}  // namespace

c10::intrusive_ptr<C10dBackend> MakeNcclBackend(const c10::intrusive_ptr<c10d::Store>& store, RankId rank,
                                                int world_size, c10::Device device, std::chrono::milliseconds timeout) {
  if (!device.is_cuda() || !device.has_index()) throw Error("NCCL needs a CUDA device with an index");
  // Asynchronous error handling: the watchdog ends the process on a failed
  // or timed-out operation instead of leaving it waiting. Mode 3 (SkipCleanUp,
  // LibTorch 2.x's default) ends it without ncclCommAbort, which can itself
  // hang on a dead peer; mode 1 would abort the communicators first. And the
  // watchdog waits 4 x this dump timeout (default 15 s) before acting: 1 s.
  // The user's settings win.
  ::setenv("TORCH_NCCL_ASYNC_ERROR_HANDLING", "3", /*overwrite=*/0);
  ::setenv("TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC", "1000", /*overwrite=*/0);
  // NCCL (2.22 on) connects a collective's algorithm on its first use, and
  // that handshake blocks the host until the peers reach the same call: a
  // data-parallel bucket's first all-reduce, larger than the 8-byte one that
  // made the communicator before the first step, would wait there, in the
  // middle of a step, for the other replica. Connecting everything when the
  // communicator is made keeps the step free of such waits.
  ::setenv("NCCL_RUNTIME_CONNECT", "0", /*overwrite=*/0);
  // Blocking wait would make every wait block the host until the GPU is done
  // (so a receive would stall the kernel queue) and turns the watchdog off;
  // pplab's waits only order streams and bound themselves by polling.
  for (const char* name : {"TORCH_NCCL_BLOCKING_WAIT", "NCCL_BLOCKING_WAIT"}) {
    const char* given = std::getenv(name);
    if (given == nullptr || std::string(given) == "0") continue;
    if (rank == 0) {
      std::fprintf(stderr, "pplab: warning: %s=%s ignored: pplab's NCCL waits order streams and poll with a bound\n",
                   name, given);
    }
    ::setenv(name, "0", 1);
  }
  WarnOnNcclMismatch();
  c10::cuda::set_device(device.index());
  auto options = c10d::ProcessGroupNCCL::Options::create();
  // pplab's own bounded waits (device_wait.h, the step clock's Resolve) use
  // `timeout` and name the rank and what it waited for; the watchdog, a
  // little later, is the backstop that tears the process down.
  options->timeout = timeout + std::chrono::milliseconds(10000);
  return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, world_size, options);
}

}  // namespace pplab
