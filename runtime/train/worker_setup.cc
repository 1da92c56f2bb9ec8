#include "runtime/train/worker_setup.h"

#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>

#include "runtime/comm/c10d_transport.h"
#include "runtime/comm/collectives.h"
#include "runtime/comm/device_wait.h"
#include "runtime/comm/fake_transport.h"
#include "runtime/comm/poll.h"
#include "runtime/comm/wire_cast_transport.h"
#include "runtime/data/fnv.h"
#include "runtime/exec/autocast.h"
#include "runtime/exec/tensor_parallel_comm.h"
#include "runtime/train/launcher.h"
#include "runtime/train/threads.h"
#include "schedules/error.h"

namespace pplab {

GpuChoice MapLocalRank(int local_rank, int local_ranks, int gpus) {
  if (gpus < 1) throw Error("no GPU to map local rank " + std::to_string(local_rank) + " to");
  return {local_rank % gpus, local_ranks > gpus};
}

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
  const GpuChoice choice = MapLocalRank(local_rank, local_ranks, gpus);
  if (shared != nullptr) *shared = choice.shared;
  return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(choice.gpu));
}

RankDevice RankDeviceOf(const Worker& w, int threads, int cores) {
  RankDevice d;
  d.node = w.world_rank - w.local_rank;
  d.gpu = w.device.is_cuda() ? w.device.index() : -1;
  d.threads = std::max(1, threads);
  d.cores = std::max(1, cores);
  return d;
}

std::vector<int64_t> RankDeviceWords(const RankDevice& d) { return {d.node, d.gpu, d.threads, d.cores}; }

RankDevice RankDeviceFromWords(const std::vector<int64_t>& w) {
  if (w.size() != 4) throw Error("a rank's device description has " + std::to_string(w.size()) + " words, not 4");
  return {w[0], w[1], w[2], w[3]};
}

std::vector<RankDevice> WorldRankDevices(const Worker& worker, std::chrono::milliseconds timeout) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const std::vector<int64_t> mine = RankDeviceWords(RankDeviceOf(worker, ThreadsInUse(), cores));
  if (worker.group == nullptr) return {RankDeviceFromWords(mine)};
  std::vector<RankDevice> out;
  for (const std::vector<int64_t>& words : AllGatherWords(*worker.group, mine, timeout)) {
    out.push_back(RankDeviceFromWords(words));
  }
  return out;
}

DeviceMap MapRankDevices(const std::vector<RankDevice>& ranks) {
  if (ranks.empty()) throw Error("no ranks to map to devices");
  DeviceMap out;
  std::map<std::pair<int64_t, int64_t>, int> ids;  // (node, gpu) -> dense id
  for (const RankDevice& r : ranks) {
    const auto [it, added] = ids.emplace(std::make_pair(r.node, r.gpu), static_cast<int>(ids.size()));
    out.devices.push_back(it->second);
    if (added) out.device_slots.push_back(1);
    // A CPU's cores are shared by threads: as many actions at once as the
    // cores hold ranks of the largest thread count.
    if (r.gpu < 0) {
      int& slots = out.device_slots[it->second];
      const int fit = static_cast<int>(std::max<int64_t>(1, r.cores / r.threads));
      slots = added ? fit : std::min(slots, fit);
    }
  }
  return out;
}

DeviceMap PipelineDeviceMap(const std::vector<RankDevice>& world, const std::vector<int>& pipeline) {
  const DeviceMap all = MapRankDevices(world);
  std::vector<int> world_on(all.device_slots.size(), 0), pipeline_on(all.device_slots.size(), 0);
  for (int d : all.devices) ++world_on[d];
  DeviceMap out;
  std::map<int, int> ids;  // the world map's id -> dense id in the pipeline's order
  for (int w : pipeline) {
    if (w < 0 || w >= static_cast<int>(world.size())) {
      throw Error("pipeline rank at world rank " + std::to_string(w) + " of " + std::to_string(world.size()));
    }
    const int d = all.devices[w];
    ++pipeline_on[d];
    const auto [it, added] = ids.emplace(d, static_cast<int>(ids.size()));
    out.devices.push_back(it->second);
  }
  out.device_slots.assign(ids.size(), 1);
  for (const auto& [d, id] : ids) {
    out.device_slots[id] = std::max(1, all.device_slots[d] * pipeline_on[d] / world_on[d]);
  }
  return out;
}

std::vector<int> SlotsForRanks(const DeviceMap& map) {
  std::vector<int> slots = map.device_slots;
  std::vector<int> on(slots.size(), 0);
  for (int d : map.devices) ++on.at(d);
  for (size_t d = 0; d < slots.size(); ++d) slots[d] = std::max(slots[d], on[d]);
  return slots;
}

bool Oversubscribed(const DeviceMap& map) {
  std::vector<int> on(map.device_slots.size(), 0);
  for (int d : map.devices) ++on.at(d);
  for (size_t d = 0; d < on.size(); ++d) {
    if (on[d] > map.device_slots[d]) return true;
  }
  return false;
}

std::vector<int> MeasureTurns(const DeviceMap& map, int group_size) {
  const int n = static_cast<int>(map.devices.size());
  const int g = std::max(1, group_size);
  if (n % g != 0) {
    throw Error("measure turns: " + std::to_string(n) + " ranks are not groups of " + std::to_string(g));
  }
  const size_t D = map.device_slots.size();
  std::vector<std::vector<int>> load;  // load[turn][device]: ranks timed at once
  std::vector<int> turns(n, 0);
  for (int first = 0; first < n; first += g) {
    std::vector<int> members(D, 0);
    for (int r = first; r < first + g; ++r) ++members.at(map.devices[r]);
    // The first turn with room on each of the group's devices; a group with
    // more ranks on a device than its slots has that device to itself.
    size_t t = 0;
    for (;; ++t) {
      if (t == load.size()) load.emplace_back(D, 0);
      bool fits = true;
      for (size_t d = 0; d < D && fits; ++d) {
        if (members[d] == 0) continue;
        fits = load[t][d] + members[d] <= std::max(map.device_slots[d], members[d]);
      }
      if (fits) break;
    }
    for (size_t d = 0; d < D; ++d) load[t][d] += members[d];
    for (int r = first; r < first + g; ++r) turns[r] = static_cast<int>(t);
  }
  return turns;
}

std::string CheckWorkerOptions(const WorkerOptions& o, int local_ranks) {
  bool shared = false;
  const c10::Device device = ResolveDevice(o.device, 0, local_ranks, &shared);
  const Backend backend = ParseBackend(o.backend, device);
  ParsePrecision(o.precision);
  if (o.pipeline_ranks < 1 || o.dp < 1 || o.tp < 1) throw Error("--ranks, --dp and --tp must be at least 1");
  if (device.is_cuda() && backend == Backend::kGloo && o.pipeline_ranks * o.dp * o.tp > 1) {
    return "--backend gloo on a CUDA device: every message and gradient bucket goes through the host, with a "
           "host synchronisation each (--backend auto uses NCCL)";
  }
  if (!shared) return "";
  const int gpus =
      device.is_cuda() && !c10::Device(o.device).has_index() ? static_cast<int>(torch::cuda::device_count()) : 1;
  return std::to_string(local_ranks) + " local ranks share " + std::to_string(gpus) +
         " GPU(s) round-robin: the run checks correctness, it is not a multi-GPU speed-up";
}

std::string KeepSeparateStreamQueues() {
  const char* given = std::getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  if (given == nullptr) return "";
  char* end = nullptr;
  const long n = std::strtol(given, &end, 10);
  if (*given != '\0' && end != nullptr && *end == '\0' && n >= 2) return "";
  const std::string was = given;
  ::setenv("CUDA_DEVICE_MAX_CONNECTIONS", "8", 1);
  return "CUDA_DEVICE_MAX_CONNECTIONS=" + was +
         " replaced by 8 (CUDA's default): with one hardware queue for all streams, a receive posted ahead on "
         "NCCL's stream would hold up the compute its peer waits for";
}

std::string LoadCudaKernelsEagerly() {
  const char* given = std::getenv("CUDA_MODULE_LOADING");
  if (given == nullptr) {
    ::setenv("CUDA_MODULE_LOADING", "EAGER", 1);
    return "";
  }
  if (std::string(given) == "EAGER") return "";
  return std::string("CUDA_MODULE_LOADING=") + given +
         " kept: a kernel's first launch may then wait for a posted NCCL receive, and ranks that both start by "
         "receiving (dualpipe) can hang in their first step; unset it to load CUDA's kernels at start-up";
}

std::vector<std::string> PrepareCudaEnvironment(const std::string& device) {
  static bool prepared = false;
  if (prepared || device.rfind("cuda", 0) != 0) return {};
  prepared = true;
  std::vector<std::string> warnings;
  for (std::string warning : {KeepSeparateStreamQueues(), LoadCudaKernelsEagerly()}) {
    if (!warning.empty()) warnings.push_back(std::move(warning));
  }
  return warnings;
}

namespace {

// This process's run id as a number (0: none given).
uint64_t GivenRunId() {
  if (const char* id = std::getenv("PPLAB_RUN_ID")) {
    char* end = nullptr;
    const uint64_t v = std::strtoull(id, &end, 16);
    if (*id != '\0' && end != nullptr && *end == '\0' && v != 0) return v;
    return Fnv1a64(std::string(id));
  }
  if (const char* id = std::getenv("TORCHELASTIC_RUN_ID")) return Fnv1a64(std::string(id));
  return 0;
}

std::string Hex(uint64_t v) { return FnvHex(v); }

// Tells a local launcher (runtime/train/launcher.cc) that this rank is past
// the rendezvous: a file joined-R beside the store's. A rank that fails
// before every rank has one cannot be waited for.
void MarkJoined(RankId world_rank) {
  const char* store = std::getenv("PPLAB_STORE_FILE");
  if (store == nullptr) return;
  const std::string path =
      (std::filesystem::path(store).parent_path() / ("joined-" + std::to_string(world_rank))).string();
  if (FILE* f = std::fopen(path.c_str(), "w")) std::fclose(f);
}

// LibTorch bounds the store's and Gloo's waits by the timeout, but not every
// read: a TCPStore client whose server accepted the connection and never
// answers (another program at MASTER_PORT, a rank 0 stopped) waits forever.
// The rendezvous as a whole gets twice the timeout (the store's wait for all
// ranks, then Gloo's connections) and 10 s; past that the process says so
// and ends.
class RendezvousDeadline {
 public:
  RendezvousDeadline(std::chrono::milliseconds timeout, RankId rank, int world) {
    const auto bound = 2 * timeout + std::chrono::seconds(10);
    const char* addr = std::getenv("MASTER_ADDR");
    const char* port = std::getenv("MASTER_PORT");
    const std::string line = "connecting to " + std::string(addr != nullptr ? addr : "127.0.0.1") + ":" +
                             (port != nullptr ? port : "29500") + " as rank " + std::to_string(rank) +
                             " of WORLD_SIZE " + std::to_string(world) +
                             ": no rendezvous within 2 x --comm-timeout + 10 s (" +
                             std::to_string(std::chrono::duration_cast<std::chrono::seconds>(bound).count()) +
                             " s); is this run's rank 0 serving MASTER_ADDR:MASTER_PORT, and has every rank started?";
    thread_ = std::thread([this, bound, rank, line] {
      std::unique_lock<std::mutex> lock(mutex_);
      if (wake_.wait_for(lock, bound, [this] { return done_; })) return;
      ReportWorkerError(rank, line);
      std::_Exit(2);
    });
  }
  ~RendezvousDeadline() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }
  RendezvousDeadline(const RendezvousDeadline&) = delete;
  RendezvousDeadline& operator=(const RendezvousDeadline&) = delete;

 private:
  std::mutex mutex_;
  std::condition_variable wake_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace

std::string AgreeOnRunId(ProcessGroupHandle* group, std::chrono::milliseconds timeout, uint64_t flags) {
  uint64_t mine = GivenRunId();
  const RankId rank = group != nullptr ? GroupRank(*group) : 0;
  if (mine == 0 && rank == 0) mine = std::strtoull(NewRunId().c_str(), nullptr, 16) | 1;
  if (group == nullptr) return Hex(mine);
  // Each rank's id and flags' fingerprint in its row as 16-bit parts (exact
  // in float64).
  const int world = GroupSize(*group);
  at::Tensor ids = torch::zeros({world, 8}, torch::kFloat64);
  for (int part = 0; part < 4; ++part) {
    ids[rank][part] = static_cast<double>((mine >> (16 * part)) & 0xffff);
    ids[rank][4 + part] = static_cast<double>((flags >> (16 * part)) & 0xffff);
  }
  ids = ids.to(GroupDevice(*group));
  AllReduceSumInPlace(*group, ids, timeout);
  ids = HostCopy(ids, timeout, "rank " + std::to_string(rank) + " agreeing on the run id");
  auto word = [&ids](int r, int first) {
    uint64_t v = 0;
    for (int part = 0; part < 4; ++part) {
      v |= static_cast<uint64_t>(ids[r][first + part].item<double>()) << (16 * part);
    }
    return v;
  };
  const uint64_t run = word(0, 0), run_flags = word(0, 4);
  for (int r = 1; r < world; ++r) {
    const uint64_t theirs = word(r, 0), their_flags = word(r, 4);
    if (theirs != 0 && theirs != run) {
      throw Error("rank " + std::to_string(r) + " belongs to another run (run id " + Hex(theirs) + ", this run's " +
                  Hex(run) + "): two runs share MASTER_ADDR:MASTER_PORT; refusing it");
    }
    if (their_flags != 0 && run_flags != 0 && their_flags != run_flags) {
      throw Error("rank " + std::to_string(r) + " was started with other flags than rank 0 (fingerprints " +
                  Hex(their_flags) + " and " + Hex(run_flags) +
                  "): every rank of a run takes the same command line; compare the ranks' flags");
    }
  }
  return Hex(run);
}

void AgreeOnFingerprint(ProcessGroupHandle& group, std::chrono::milliseconds timeout, uint64_t mine,
                        const std::string& differs) {
  // Each rank's value in its row as 16-bit parts (exact in float64), as
  // AgreeOnRunId does.
  const int world = GroupSize(group);
  const RankId rank = GroupRank(group);
  at::Tensor values = torch::zeros({world, 4}, torch::kFloat64);
  for (int part = 0; part < 4; ++part) values[rank][part] = static_cast<double>((mine >> (16 * part)) & 0xffff);
  values = values.to(GroupDevice(group));
  AllReduceSumInPlace(group, values, timeout);
  values = HostCopy(values, timeout, "rank " + std::to_string(rank) + " comparing what the ranks read");
  const auto value = [&values](int r) {
    uint64_t v = 0;
    for (int part = 0; part < 4; ++part) v |= static_cast<uint64_t>(values[r][part].item<double>()) << (16 * part);
    return v;
  };
  for (int r = 1; r < world; ++r) {
    if (value(r) != value(0)) {
      throw Error("rank " + std::to_string(r) + " " + differs + " (fingerprints " + Hex(value(r)) + " and " +
                  Hex(value(0)) + ")");
    }
  }
}

Worker SetUpWorker(const WorkerOptions& o, RankId world_rank, int world_size) {
  Worker w;
  const int K = o.pipeline_ranks;
  const int T = o.tp;
  if (world_size != o.dp * T * K) {
    throw Error("world size " + std::to_string(world_size) + " but --dp " + std::to_string(o.dp) + " x --tp " +
                std::to_string(T) + " x " + std::to_string(K) + " pipeline ranks = " + std::to_string(o.dp * T * K));
  }
  UseFineTimerSlack();  // this thread polls the GPU (runtime/comm/poll.h)
  w.world_rank = world_rank;
  w.world_size = world_size;
  w.tp_rank = world_rank % T;
  w.tp_size = T;
  w.rank = (world_rank / T) % K;
  w.replica = world_rank / (T * K);
  w.pipeline = w.replica * T + w.tp_rank;
  const int local_rank = EnvInt("LOCAL_RANK", world_rank);
  const int local_ranks = EnvInt("LOCAL_WORLD_SIZE", world_size);
  w.local_rank = local_rank;
  w.local_ranks = local_ranks;
  bool shared = false;
  // Before CUDA starts here. A launching pplab has printed the warnings.
  const std::vector<std::string> cuda_warnings = PrepareCudaEnvironment(o.device);
  if (world_rank == 0 && std::getenv("PPLAB_LAUNCHER_PID") == nullptr) {
    for (const std::string& warning : cuda_warnings) std::fprintf(stderr, "pplab: warning: %s\n", warning.c_str());
  }
  w.device = ResolveDevice(o.device, local_rank, local_ranks, &shared);
  w.backend = ParseBackend(o.backend, w.device);
  if (w.backend == Backend::kNccl && shared) {
    // NCCL treats ranks with different host ids as different machines, and
    // then lets them share a GPU (over loopback sockets). Each rank's id is
    // its own even when the user exported one NCCL_HOSTID for all of them,
    // which would make NCCL refuse the shared GPU as a duplicate.
    char host[256] = "host";
    ::gethostname(host, sizeof host - 1);
    const char* given = std::getenv("NCCL_HOSTID");
    std::string base = given != nullptr ? given : host;
    base = base.substr(0, base.find("-pplab-rank"));  // set by an earlier set-up in this process
    ::setenv("NCCL_HOSTID", (base + "-pplab-rank" + std::to_string(world_rank)).c_str(), 1);
  }
  w.precision = ParsePrecision(o.precision);
  w.wire_dtype = w.precision == Precision::kBf16 ? c10::ScalarType::BFloat16 : c10::ScalarType::Float;
  // A bf16 run's messages travel in bf16 and arrive as fp32.
  auto on_wire = [&w](std::unique_ptr<Transport> t) -> std::unique_ptr<Transport> {
    if (w.wire_dtype == c10::ScalarType::Float) return t;
    return std::make_unique<WireCastTransport>(std::move(t), w.wire_dtype);
  };
  w.clock = MakeStepClock(w.device, o.comm_timeout);
  if (world_size == 1) {
    w.transport = on_wire(std::make_unique<FakeTransport>(0, std::make_shared<FakeNetwork>()));
    w.run_id = AgreeOnRunId(nullptr, o.comm_timeout);
    return w;
  }
  GroupOptions g;
  g.rank = world_rank;
  g.world_size = world_size;
  g.backend = w.backend;
  g.device = w.backend == Backend::kNccl ? w.device : c10::Device(c10::kCPU);
  g.timeout = o.comm_timeout;
  // Rank 0 serves the store at MASTER_PORT: one taken is said in one line,
  // as the launcher says it (LibTorch's glog lines, then a "must start and
  // reach" that blamed the other ranks).
  const char* agent_store = std::getenv("TORCHELASTIC_USE_AGENT_STORE");
  if (world_rank == 0 && std::getenv("PPLAB_STORE_FILE") == nullptr &&
      (agent_store == nullptr || std::string(agent_store) != "True")) {
    const int port = EnvInt("MASTER_PORT", 29500);
    if (port >= 1 && port <= 65535 && BindPort(port) < 0 && errno == EADDRINUSE) {
      throw Error("MASTER_PORT " + std::to_string(port) +
                  " is in use: another run or program holds it; start the ranks with a free MASTER_PORT");
    }
  }
  {
    const RendezvousDeadline deadline(o.comm_timeout, world_rank, world_size);
    w.group = ConnectFromEnv(g);
    w.run_id = AgreeOnRunId(w.group.get(), o.comm_timeout, o.flags_fingerprint);
  }
  MarkJoined(world_rank);
  // This pipeline's ranks: k at WorldRankOf(d, t, k) = d K T + t + k T.
  w.transport = on_wire(
      std::make_unique<C10dTransport>(w.group, w.device, WorldRankOf(w.replica, w.tp_rank, 0, K, T), std::nullopt, T));
  const std::string k = std::to_string(w.rank);
  if (o.dp > 1) {
    // The replicas of this pipeline rank's stages (the same share of them).
    std::vector<RankId> members;
    for (int d = 0; d < o.dp; ++d) members.push_back(WorldRankOf(d, w.tp_rank, w.rank, K, T));
    w.dp_group = Subgroup(*w.group, "dp" + k + "." + std::to_string(w.tp_rank) + "/", members, o.comm_timeout);
  }
  if (T > 1) {
    // The ranks that hold the other shares of this rank's stages.
    std::vector<RankId> members;
    for (int t = 0; t < T; ++t) members.push_back(WorldRankOf(w.replica, t, w.rank, K, T));
    w.tp_group = Subgroup(*w.group, "tp" + std::to_string(w.replica) + "." + k + "/", members, o.comm_timeout);
    w.tp_comm = MakeTensorParallelComm(w.tp_group, o.comm_timeout);
  }
  return w;
}

namespace {

// The model's collectives over a tensor-parallel group. Tensors go to the
// group's device and back when they live elsewhere (Gloo with a CUDA
// device), and Gloo carries a reduced-precision tensor (bf16 autocast's) as
// fp32: its sums are then taken in fp32, and a gather is exact either way.
class GroupTensorParallelComm : public TensorParallelComm {
 public:
  GroupTensorParallelComm(std::shared_ptr<ProcessGroupHandle> group, std::chrono::milliseconds timeout)
      : group_(std::move(group)), timeout_(timeout) {}
  void AllReduceSum(at::Tensor& t) override {
    if (!Widen(t) && t.device() == GroupDevice(*group_) && t.is_contiguous()) {
      AllReduceSumInPlace(*group_, t, timeout_);
      return;
    }
    at::Tensor moved = OnGroup(t);
    AllReduceSumInPlace(*group_, moved, timeout_);
    t.copy_(moved);
  }
  at::Tensor AllGather(const at::Tensor& t, int64_t dim) override { return StartAllGather(t, dim)->Wait(); }
  at::Tensor ReduceScatter(const at::Tensor& t, int64_t dim) override { return StartReduceScatter(t, dim)->Wait(); }
  std::unique_ptr<StartedCollective> StartAllReduceSum(at::Tensor t) override {
    return Started(pplab::StartAllReduceSum(*group_, OnGroup(t)), t);
  }
  std::unique_ptr<StartedCollective> StartAllGather(const at::Tensor& t, int64_t dim) override {
    return Started(StartAllGatherCat(*group_, OnGroup(t), dim), t);
  }
  std::unique_ptr<StartedCollective> StartReduceScatter(const at::Tensor& t, int64_t dim) override {
    return Started(StartReduceScatterAlong(*group_, OnGroup(t), dim), t);
  }

 private:
  // A collective of the group started for `like`: its result comes back on
  // `like`'s device, in its dtype.
  std::unique_ptr<StartedCollective> Started(std::shared_ptr<PendingCollective> pending, const at::Tensor& like) {
    struct OnGroupStarted : StartedCollective {
      at::Tensor Wait() override { return WaitResult(*pending, timeout).to(device, dtype); }
      std::shared_ptr<PendingCollective> pending;
      std::chrono::milliseconds timeout{};
      c10::Device device = c10::kCPU;
      c10::ScalarType dtype = at::kFloat;
    };
    auto started = std::make_unique<OnGroupStarted>();
    started->pending = std::move(pending);
    started->timeout = timeout_;
    started->device = like.device();
    started->dtype = like.scalar_type();
    return started;
  }
  bool Widen(const at::Tensor& t) const {
    return GroupBackend(*group_) == Backend::kGloo && t.scalar_type() != at::kFloat && t.scalar_type() != at::kDouble;
  }
  // `t` on the group's device, contiguous, widened where Gloo needs it (a
  // copy only where something changes).
  at::Tensor OnGroup(const at::Tensor& t) const {
    return t.to(GroupDevice(*group_), Widen(t) ? at::kFloat : t.scalar_type()).contiguous();
  }

  std::shared_ptr<ProcessGroupHandle> group_;
  std::chrono::milliseconds timeout_;
};

}  // namespace

std::shared_ptr<TensorParallelComm> MakeTensorParallelComm(std::shared_ptr<ProcessGroupHandle> group,
                                                           std::chrono::milliseconds timeout) {
  return std::make_shared<GroupTensorParallelComm>(std::move(group), timeout);
}

std::unique_ptr<Stage> WorkerStage(const Worker& worker, std::unique_ptr<Stage> stage) {
  if (worker.precision == Precision::kFp32) return stage;
  return MixedPrecisionStage(std::move(stage), worker.device.type());
}

}  // namespace pplab
