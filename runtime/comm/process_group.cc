#define USE_C10D_GLOO 1
#include "runtime/comm/process_group.h"

#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "runtime/comm/c10d_group.h"

namespace pplab {

const char* BackendName(Backend backend) { return backend == Backend::kNccl ? "nccl" : "gloo"; }

bool NcclCompiled() {
#ifdef PPLAB_WITH_NCCL
  return true;
#else
  return false;
#endif
}

Backend ParseBackend(std::string_view text, const c10::Device& device) {
  if (text == "auto") return device.is_cuda() && NcclCompiled() ? Backend::kNccl : Backend::kGloo;
  if (text == "gloo") return Backend::kGloo;
  if (text == "nccl") {
    if (!NcclCompiled()) throw Error("--backend nccl: this build's LibTorch has no CUDA/NCCL");
    if (!device.is_cuda()) throw Error("--backend nccl needs a CUDA --device (NCCL moves CUDA tensors only)");
    return Backend::kNccl;
  }
  throw Error("--backend '" + std::string(text) + "': expected auto, gloo or nccl");
}

void Wait(Backend backend, const c10::intrusive_ptr<c10d::Work>& work, std::chrono::milliseconds timeout,
          const std::string& what) {
  bool done = false;
  if (backend == Backend::kNccl) {
    // A work that already failed is reported as it is: its wait() would
    // first abort the communicator on this thread (ncclCommAbort, which can
    // hang), the teardown a failed worker skips.
    if (const std::exception_ptr failed = work->exception()) Guard(what, [&] { std::rethrow_exception(failed); });
    Guard(what, [&] { done = work->wait(); });  // stream order only: no timeout, no host wait
  } else {
    Guard(what, [&] { done = work->wait(timeout); });
  }
  if (!done) throw Error(what + ": timed out after " + std::to_string(timeout.count()) + " ms");
}

#ifndef PPLAB_WITH_NCCL
c10::intrusive_ptr<C10dBackend> MakeNcclBackend(const c10::intrusive_ptr<c10d::Store>&, RankId, int, c10::Device,
                                                std::chrono::milliseconds) {
  throw Error("NCCL: this build's LibTorch has no CUDA/NCCL");
}
#endif

namespace {

c10::intrusive_ptr<C10dBackend> MakeBackend(const c10::intrusive_ptr<c10d::Store>& store, RankId rank, int size,
                                            Backend backend, c10::Device device, std::chrono::milliseconds timeout,
                                            const std::string& host) {
  if (backend == Backend::kNccl) return MakeNcclBackend(store, rank, size, device, timeout);
  auto options = c10d::ProcessGroupGloo::Options::create(timeout);
  options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(host));
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, options);
}

}  // namespace

std::shared_ptr<ProcessGroupHandle> Connect(const GroupOptions& o) {
  auto handle = std::make_shared<ProcessGroupHandle>();
  handle->rank = o.rank;
  handle->world_size = o.world_size;
  handle->backend = o.backend;
  handle->device = o.device;
  handle->timeout = o.timeout;
  // The rank is not named: a worker's error line is "rank N: " + this.
  const std::string where = "connecting to " + o.host + ":" + std::to_string(o.port);
  if (!o.store_file.empty()) {
    Guard("joining the store " + o.store_file + " failed", [&] {
      auto store = c10::make_intrusive<c10d::FileStore>(o.store_file, o.world_size);
      store->setTimeout(o.timeout);
      handle->store = store;
      handle->group = MakeBackend(handle->store, o.rank, o.world_size, o.backend, o.device, o.timeout, o.host);
    });
    return handle;
  }
  // Under torchrun (LibTorch 2.4 and later) the agent already serves a
  // TCPStore at MASTER_ADDR:MASTER_PORT and says so: every rank is then its
  // client, under the key prefix of the agent's current attempt, as
  // torch.distributed's own rendezvous does.
  const char* agent_store = std::getenv("TORCHELASTIC_USE_AGENT_STORE");
  const bool use_agent_store = agent_store != nullptr && std::string(agent_store) == "True";
  // Only a worker started by torchrun, Slurm or a shell (RANK and WORLD_SIZE
  // set) comes here; the line says so, for one that was not meant to be.
  const std::string as = " (as rank " + std::to_string(o.rank) + " of WORLD_SIZE " + std::to_string(o.world_size) +
                         ", from RANK and WORLD_SIZE in the environment)";
  // A rank that never started, or another MASTER_ADDR:MASTER_PORT, shows as
  // LibTorch's "Socket Timeout" alone: the line says what it means.
  // LibTorch's store takes its timeout in whole seconds ("timed out after
  // 0s" at --comm-timeout 0.5, however soon the ranks came): at least 1 s.
  const std::chrono::milliseconds store_timeout = std::max(o.timeout, std::chrono::milliseconds(1000));
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%g", static_cast<double>(store_timeout.count()) / 1000);
  const std::string what = where + as + " failed (every one of the WORLD_SIZE ranks must start and reach " + o.host +
                           ":" + std::to_string(o.port) + " within --comm-timeout, " + seconds + " s" +
                           (store_timeout > o.timeout ? ", at least 1 s here" : "") + ")";
  Guard(what, [&] {
    c10d::TCPStoreOptions options;
    options.port = static_cast<std::uint16_t>(o.port);
    options.isServer = o.rank == 0 && !use_agent_store;
    options.numWorkers = o.world_size;
    options.waitWorkers = true;
    options.timeout = store_timeout;
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
    // LibTorch 2.4+ defaults to the libuv store, which Debian's build lacks;
    // the classic store works in every build.
    options.useLibUV = false;
#endif
    handle->store = c10::make_intrusive<c10d::TCPStore>(o.host, options);
    if (use_agent_store) {
      const int attempt = EnvInt("TORCHELASTIC_RESTART_COUNT", 0);
      handle->store =
          c10::make_intrusive<c10d::PrefixStore>("/worker/attempt_" + std::to_string(attempt), handle->store);
    }
    handle->group = MakeBackend(handle->store, o.rank, o.world_size, o.backend, o.device, o.timeout, o.host);
  });
  return handle;
}

std::shared_ptr<ProcessGroupHandle> ConnectFromEnv(GroupOptions options) {
  const char* addr = std::getenv("MASTER_ADDR");
  options.host = addr != nullptr ? addr : "127.0.0.1";
  options.port = EnvInt("MASTER_PORT", 29500);
  if (options.port < 1 || options.port > 65535) {
    throw Error("MASTER_PORT " + std::to_string(options.port) + " is not a port number (1 to 65535)");
  }
  if (const char* file = std::getenv("PPLAB_STORE_FILE")) options.store_file = file;
  return Connect(options);
}

std::shared_ptr<ProcessGroupHandle> Subgroup(const ProcessGroupHandle& world, const std::string& name,
                                             const std::vector<RankId>& members, std::chrono::milliseconds timeout) {
  auto handle = std::make_shared<ProcessGroupHandle>();
  const auto me = std::find(members.begin(), members.end(), world.rank);
  if (me == members.end())
    throw Error("subgroup " + name + ": rank " + std::to_string(world.rank) + " is not a member");
  handle->rank = static_cast<RankId>(me - members.begin());
  handle->world_size = static_cast<int>(members.size());
  handle->backend = world.backend;
  handle->device = world.device;
  handle->timeout = timeout;
  handle->store = world.store;
  handle->store_prefix = world.store_prefix + name;
  Guard("rank " + std::to_string(world.rank) + ": creating group " + name + " failed", [&] {
    auto store = c10::make_intrusive<c10d::PrefixStore>(name, world.store);
    if (world.backend == Backend::kNccl) {
      handle->group = MakeNcclBackend(store, handle->rank, handle->world_size, world.device, timeout);
      return;
    }
    auto options = c10d::ProcessGroupGloo::Options::create(timeout);
    options->devices = static_cast<c10d::ProcessGroupGloo&>(*world.group).getOptions()->devices;
    handle->group = c10::make_intrusive<c10d::ProcessGroupGloo>(store, handle->rank, handle->world_size, options);
  });
  return handle;
}

RankId GroupRank(const ProcessGroupHandle& group) { return group.rank; }
int GroupSize(const ProcessGroupHandle& group) { return group.world_size; }
Backend GroupBackend(const ProcessGroupHandle& group) { return group.backend; }
c10::Device GroupDevice(const ProcessGroupHandle& group) { return group.device; }

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr) return fallback;
  try {
    size_t used = 0;
    const int value = std::stoi(v, &used);
    if (used != std::string(v).size()) throw std::invalid_argument(v);
    return value;
  } catch (const std::exception&) {
    throw Error(std::string("environment variable ") + name + "='" + v + "' is not an integer");
  }
}

}  // namespace pplab
