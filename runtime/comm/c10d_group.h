// Inside the comm layer only: the c10d objects behind a ProcessGroupHandle,
// and the two helpers that turn c10d failures and timeouts into pplab::Error.
// Includes c10d headers: keep it out of headers other layers include.
#pragma once

#include <torch/version.h>

#include <chrono>
#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "runtime/comm/process_group.h"
#include "schedules/error.h"

#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#else
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#endif

namespace pplab {

// The class Gloo and NCCL derive from: c10d::Backend since LibTorch 2.0,
// c10d::ProcessGroup before. Both offer the same send/recv/allreduce/barrier.
#if TORCH_VERSION_MAJOR >= 2
using C10dBackend = c10d::Backend;
#else
using C10dBackend = c10d::ProcessGroup;
#endif

struct ProcessGroupHandle {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<C10dBackend> group;
  RankId rank = 0;
  int world_size = 1;
  Backend backend = Backend::kGloo;
  c10::Device device{c10::kCPU};
  std::chrono::milliseconds timeout{60000};
  // HostBarrier's keys in `store`: the group's name ("" for the world; the
  // subgroups share the world's store) and how many it has passed, the same
  // count on every member as all call it in the same order.
  std::string store_prefix;
  int64_t host_barriers = 0;
};

// Runs `post` (which starts or waits for c10d operations), turning its
// failure (e.g. a peer already gone) into pplab::Error with `what` and the
// first line of the c10 message (the rest is a stack trace).
template <typename F>
void Guard(const std::string& what, F post) {
  try {
    post();
  } catch (const std::exception& e) {
    std::string message = e.what();
    message = message.substr(0, message.find('\n'));
    // Gloo's own source location ("[./gloo/transport/tcp/unbound_buffer.cc:81]
    // Timed out ..."): the message is the reader's, the location is not.
    if (message.rfind("[", 0) == 0 && message.find("] ") != std::string::npos) {
      message = message.substr(message.find("] ") + 2);
    }
    throw Error(what + ": " + message);
  }
}

// Waits for a c10d work item of a `backend` group. Gloo: blocks the host,
// at most `timeout`, then throws pplab::Error. NCCL: orders the current CUDA
// stream after the work and returns at once, so the host goes on queueing
// kernels while the message is in flight. (ProcessGroupNCCL's wait with a
// timeout would block the host until the GPU is done with the work, polling
// every millisecond; the bound is the host's first read-back after it, a
// poll of at most `timeout` (device_wait.h), and NCCL's watchdog behind that.)
void Wait(Backend backend, const c10::intrusive_ptr<c10d::Work>& work, std::chrono::milliseconds timeout,
          const std::string& what);

// The NCCL backend of `store`'s group (nccl_group.cc; CUDA builds only).
c10::intrusive_ptr<C10dBackend> MakeNcclBackend(const c10::intrusive_ptr<c10d::Store>& store, RankId rank,
                                                int world_size, c10::Device device, std::chrono::milliseconds timeout);

}  // namespace pplab
