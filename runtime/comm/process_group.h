// Process groups: the ranks of a run, connected through torch's c10d over
// a TCPStore rendezvous, with a Gloo backend (CPU tensors) or an NCCL one
// (CUDA tensors; only in builds against a LibTorch with CUDA).
//
// A group knows the device its tensors live on: the collectives
// (runtime/comm/collectives.h) and the transport (runtime/comm/c10d_transport.h)
// place what they send there, so callers never branch on the backend.
#pragma once

#include <c10/core/Device.h>

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "schedules/units.h"

namespace pplab {

enum class Backend { kGloo, kNccl };

// "gloo", "nccl".
const char* BackendName(Backend backend);
// --backend: "auto" is NCCL for a CUDA device and Gloo for the CPU. Throws
// pplab::Error naming the flag for an unknown name, NCCL on a CPU device,
// or NCCL in a build whose LibTorch has no NCCL.
Backend ParseBackend(std::string_view text, const c10::Device& device);
// True when this build's LibTorch has CUDA and NCCL (the NCCL sources were compiled).
bool NcclCompiled();

struct ProcessGroupHandle;  // owns the c10d objects (c10d_group.h)

struct GroupOptions {
  std::string host = "127.0.0.1";  // where rank 0 serves the TCPStore
  int port = 29500;
  RankId rank = 0;
  int world_size = 1;
  Backend backend = Backend::kGloo;
  // Where the group's tensors live: the CPU for Gloo, this rank's GPU for NCCL.
  c10::Device device{c10::kCPU};
  std::chrono::milliseconds timeout{60000};  // every wait of the group, the rendezvous included
  // When set, the ranks rendezvous through this file (a c10d FileStore, all
  // ranks on one machine) instead of a TCPStore at host:port, so no port is
  // listened on for the store.
  std::string store_file;
};

// Connects to the TCPStore (rank 0 serves it) and creates the group. Throws
// pplab::Error naming the address after `timeout`.
std::shared_ptr<ProcessGroupHandle> Connect(const GroupOptions& options);

// Connect at MASTER_ADDR (default 127.0.0.1) and MASTER_PORT (default 29500)
// from the environment, as torchrun sets them, or through the file
// PPLAB_STORE_FILE names (pplab's local launcher sets it); the other fields
// from `options`.
std::shared_ptr<ProcessGroupHandle> ConnectFromEnv(GroupOptions options);

// A group of some ranks of `world` (e.g. the data-parallel replicas of one
// stage) with the world's backend and device, rendezvousing under `name` in
// the world's store. Every member calls it with the same name and members;
// `members` lists world ranks and must hold the caller's.
std::shared_ptr<ProcessGroupHandle> Subgroup(const ProcessGroupHandle& world, const std::string& name,
                                             const std::vector<RankId>& members, std::chrono::milliseconds timeout);

// This process's rank in `group`, the group's size, backend and device.
RankId GroupRank(const ProcessGroupHandle& group);
int GroupSize(const ProcessGroupHandle& group);
Backend GroupBackend(const ProcessGroupHandle& group);
c10::Device GroupDevice(const ProcessGroupHandle& group);

// The integer environment variable `name`, or `fallback` when unset. Throws
// pplab::Error naming the variable when it is not an integer.
int EnvInt(const char* name, int fallback);

}  // namespace pplab
