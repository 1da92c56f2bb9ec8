#include "runtime/train/worker_setup.h"

#include <torch/torch.h>
#include <unistd.h>

#include <cstdlib>

#include "runtime/comm/c10d_transport.h"
#include "runtime/comm/fake_transport.h"
#include "schedules/error.h"

namespace pplab {

c10::Device ResolveDevice(const std::string& text, int local_rank, int local_ranks, bool* shared) {
  if (shared != nullptr) *shared = false;
  c10::Device device(c10::kCPU);
  try {
    device = c10::Device(text);
  } catch (const std::exception& e) {
    const std::string what = e.what();
    throw Error("--device '" + text + "': " + what.substr(0, what.find('\n')));
  }
  if (device.is_cpu()) return device;
  if (!device.is_cuda()) throw Error("--device '" + text + "': expected cpu, cuda or cuda:N");
  if (!torch::cuda::is_available()) throw Error("--device " + text + ": this LibTorch has no CUDA device");
  const int gpus = static_cast<int>(torch::cuda::device_count());
  if (device.has_index()) {
    if (device.index() >= gpus) {
      throw Error("--device " + text + ": this machine has " + std::to_string(gpus) + " GPU(s)");
    }
    if (shared != nullptr) *shared = local_ranks > 1;
    return device;
  }
  if (shared != nullptr) *shared = local_ranks > gpus;
  return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(local_rank % gpus));
}

std::string CheckWorkerOptions(const WorkerOptions& o, int local_ranks) {
  bool shared = false;
  const c10::Device device = ResolveDevice(o.device, 0, local_ranks, &shared);
  ParseBackend(o.backend, device);
  if (o.pipeline_ranks < 1 || o.dp < 1) throw Error("--ranks and --dp must be at least 1");
  if (!shared) return "";
  const int gpus = device.is_cuda() && !c10::Device(o.device).has_index()
                       ? static_cast<int>(torch::cuda::device_count())
                       : 1;
  return std::to_string(local_ranks) + " local ranks share " + std::to_string(gpus) +
         " GPU(s) round-robin: the run checks correctness, it is not a multi-GPU speed-up";
}

Worker SetUpWorker(const WorkerOptions& o, RankId world_rank, int world_size) {
  Worker w;
  const int K = o.pipeline_ranks;
  if (world_size != o.dp * K) {
    throw Error("world size " + std::to_string(world_size) + " but --dp " + std::to_string(o.dp) + " x " +
                std::to_string(K) + " pipeline ranks = " + std::to_string(o.dp * K));
  }
  w.world_rank = world_rank;
  w.world_size = world_size;
  w.replica = world_rank / K;
  w.rank = world_rank % K;
  const int local_rank = EnvInt("LOCAL_RANK", world_rank);
  const int local_ranks = EnvInt("LOCAL_WORLD_SIZE", world_size);
  bool shared = false;
  w.device = ResolveDevice(o.device, local_rank, local_ranks, &shared);
  w.backend = ParseBackend(o.backend, w.device);
  if (w.backend == Backend::kNccl && shared && std::getenv("NCCL_HOSTID") == nullptr) {
    // NCCL treats ranks with different host ids as different machines, and
    // then lets them share a GPU (over loopback sockets).
    char host[256] = "host";
    ::gethostname(host, sizeof host - 1);
    ::setenv("NCCL_HOSTID", (std::string(host) + "-pplab-rank" + std::to_string(world_rank)).c_str(), 1);
  }
  w.clock = MakeStepClock(w.device);
  if (world_size == 1) {
    w.transport = std::make_unique<FakeTransport>(0, std::make_shared<FakeNetwork>());
    return w;
  }
  GroupOptions g;
  g.rank = world_rank;
  g.world_size = world_size;
  g.backend = w.backend;
  g.device = w.backend == Backend::kNccl ? w.device : c10::Device(c10::kCPU);
  g.timeout = o.comm_timeout;
  w.group = ConnectFromEnv(g);
  w.transport = std::make_unique<C10dTransport>(w.group, w.device, w.replica * K, DefaultWireFormat(*w.group));
  if (o.dp > 1) {
    // The replicas of this pipeline rank's stages.
    std::vector<RankId> members;
    for (int d = 0; d < o.dp; ++d) members.push_back(d * K + w.rank);
    w.dp_group = Subgroup(*w.group, "dp" + std::to_string(w.rank) + "/", members, o.comm_timeout);
  }
  return w;
}

}  // namespace pplab
