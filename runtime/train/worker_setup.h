// WorkerSetup: one rank of a run, assembled from options, the same way for
// `pplab train` and `pplab profile`: where it sits in the D x T x K grid, its
// device, its process groups (world, data- and tensor-parallel) on the chosen
// backend, its transport and its step clock. Backend, device and precision
// are decided here once, not in each command.
#pragma once

#include <c10/core/Device.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/comm/process_group.h"
#include "runtime/comm/transport.h"
#include "runtime/exec/stage.h"
#include "runtime/exec/step_clock.h"
#include "sim/precision.h"

namespace pplab {

class TensorParallelComm;

// World ranks: a run holds D x T pipelines of K ranks each (D data-parallel
// replicas, each of T tensor-parallel pipelines). Pipeline rank k of
// replica d and tensor-parallel rank t is world rank (d K + k) T + t
// (WorldRankOf): a tensor-parallel group is T consecutive ranks, inside a
// node whenever T divides the node's GPUs, as Megatron-LM places them;
// without tensor parallelism, d K + k. Pipeline p = d T + t (replica d's
// t-th) has ranks T apart, from d K T + t; replica d is world ranks
// [d K T, (d+1) K T).
struct WorkerOptions {
  int pipeline_ranks = 1;          // K
  int dp = 1;                      // D
  int tp = 1;                      // T: world = D x T x K
  std::string device = "cpu";      // cpu, cuda (one GPU per local rank) or cuda:N
  std::string backend = "auto";    // auto, gloo or nccl
  std::string precision = "fp32";  // fp32 or bf16 (sim/precision.h)
  std::chrono::milliseconds comm_timeout{60000};
  // A fingerprint of the command line this rank was started with (0: none);
  // the ranks of one run must agree on it (see AgreeOnRunId).
  uint64_t flags_fingerprint = 0;
};

// The world rank of pipeline rank `rank` of `replica`, tensor-parallel rank
// `tp_rank`, in a grid of K pipeline ranks and T tensor-parallel ones.
inline RankId WorldRankOf(int replica, int tp_rank, RankId rank, int K, int T) {
  return (static_cast<RankId>(replica) * K + rank) * T + tp_rank;
}

// Which of `gpus` GPUs local rank `local_rank` of `local_ranks` uses: GPU
// local_rank mod gpus, as torchrun does; `shared` when there are fewer GPUs
// than local ranks (then they take turns round-robin).
struct GpuChoice {
  int gpu = 0;
  bool shared = false;
};
GpuChoice MapLocalRank(int local_rank, int local_ranks, int gpus);

// Streams share hardware queues when CUDA_DEVICE_MAX_CONNECTIONS is 1
// (Megatron's setting): a receive posted at a step's start on NCCL's stream
// would then hold up compute queued behind it on another stream, which the
// peer may need before it sends. Below 2 (or not a number) the variable is
// set to CUDA's default, 8, and the warning to print is returned; else "".
// Call before the process's first CUDA context.
std::string KeepSeparateStreamQueues();

// CUDA (12.2 on, by default) loads a kernel's module at its first launch,
// and that load can wait for the kernels already running on the device
// (NVIDIA's Lazy Loading guide, "Potential hazards"). A posted NCCL receive
// is one: it runs until its peer sends. When two ranks each post a receive
// and then launch a kernel for the first time, as DualPipe's ranks do at the
// start of the first step, each load waits for a send that the other rank
// issues only after its own load. So CUDA_MODULE_LOADING is set to EAGER
// when unset; a value the user gave is kept, and for any other than EAGER
// the warning to print is returned; else "". Call before the process's first
// CUDA context.
std::string LoadCudaKernelsEagerly();

// For a CUDA `device` (--device cuda or cuda:N; nothing for another):
// KeepSeparateStreamQueues and LoadCudaKernelsEagerly, the first time it is
// called in this process: their warnings then (those not ""), none after.
// CUDA reads both variables when it starts in a process, so this comes
// before anything in the process touches CUDA: the launcher calls it before
// its checks resolve the device (a one-rank run then trains in the
// launcher's process; workers inherit what it set), SetUpWorker in every
// worker.
std::vector<std::string> PrepareCudaEnvironment(const std::string& device);

// The device of local rank `local_rank` among `local_ranks` for --device
// `text`: "cuda" alone maps local rank r to GPU r mod (GPUs on this machine),
// as torchrun does, so ranks share GPUs round-robin when there are fewer GPUs
// than local ranks. Throws pplab::Error naming --device for a bad name, a
// build without CUDA, or no GPU. `shared` (when given) is set when ranks
// share a GPU.
c10::Device ResolveDevice(const std::string& text, int local_rank, int local_ranks, bool* shared = nullptr);

// Checks what a worker would refuse, without connecting to anyone: the
// device, the backend, the precision and the grid. Throws pplab::Error naming the flag. The
// launcher calls it before starting any worker. Returns a warning to print
// once ("" when none), e.g. that ranks share a GPU.
std::string CheckWorkerOptions(const WorkerOptions& options, int local_ranks);

struct Worker {
  RankId world_rank = 0;
  int world_size = 1;
  int local_rank = 0;   // LOCAL_RANK: this process's index on its node
  int local_ranks = 1;  // LOCAL_WORLD_SIZE: processes on its node
  int replica = 0;      // d in [0, D)
  int tp_rank = 0;      // t in [0, T)
  int tp_size = 1;      // T
  int pipeline = 0;     // p = d T + t: which of the D x T pipelines
  RankId rank = 0;      // pipeline rank in [0, K)
  c10::Device device{c10::kCPU};
  Backend backend = Backend::kGloo;
  std::shared_ptr<ProcessGroupHandle> group;     // the world; null in a single-process run
  std::shared_ptr<ProcessGroupHandle> dp_group;  // this pipeline rank's replicas (same t); null when D = 1
  std::shared_ptr<ProcessGroupHandle> tp_group;  // this rank's tensor-parallel group (same d, k); null when T = 1
  std::shared_ptr<TensorParallelComm> tp_comm;   // the model's collectives over tp_group; null when T = 1
  Precision precision = Precision::kFp32;
  // What floating activations and gradients travel as between ranks: float32,
  // or bfloat16 in a bf16 run (the transport casts; see WireCastTransport).
  c10::ScalarType wire_dtype = c10::ScalarType::Float;
  std::unique_ptr<Transport> transport;  // to the other pipeline ranks of this replica
  std::unique_ptr<StepClock> clock;      // host clock on the CPU, CUDA events on a GPU
  std::string run_id;                    // the same on every rank (see SetUpWorker)
};

// Sets up world rank `world_rank` of `world_size` (= D x T x K). With
// world_size > 1 it rendezvouses at MASTER_ADDR:MASTER_PORT; LOCAL_RANK and
// LOCAL_WORLD_SIZE pick the device. When ranks share a GPU under NCCL and
// NCCL_HOSTID is unset, it sets a distinct one per rank (NCCL refuses two
// ranks of one host on one GPU otherwise). Throws pplab::Error.
//
// The ranks agree on a run id when they join: PPLAB_RUN_ID (set by pplab's
// launcher) or TORCHELASTIC_RUN_ID (torchrun) when given, else rank 0's
// fresh one. A peer that brings another run's id (two runs on one
// MASTER_ADDR:MASTER_PORT) is refused by every rank with one line naming it.
Worker SetUpWorker(const WorkerOptions& options, RankId world_rank, int world_size);

// Where one rank computes, as it knows it: its node (the world rank of the
// node's local rank 0, as torchrun and pplab's launcher number ranks), its
// GPU index (-1 on the CPU), its compute threads and its node's cores.
struct RankDevice {
  int64_t node = 0;
  int64_t gpu = -1;
  int64_t threads = 1;
  int64_t cores = 1;
};
RankDevice RankDeviceOf(const Worker& worker, int threads, int cores);
// Its four words, for a gather, and back.
std::vector<int64_t> RankDeviceWords(const RankDevice& d);
RankDevice RankDeviceFromWords(const std::vector<int64_t>& words);
// Where every world rank computes, by world rank, on every rank: each
// rank's RankDeviceOf (its intra-op threads, the machine's cores), gathered
// once at start-up over the worker's group (this rank alone without one).
std::vector<RankDevice> WorldRankDevices(const Worker& worker, std::chrono::milliseconds timeout);

// Which ranks share a device (Timeline::devices and device_slots, the cost
// model's devices and device_slots): ranks[r] for rank r. A device is a GPU
// of a node, or a node's CPU, which all its ranks share; ids are dense, in
// order of first use by rank. A GPU runs one compute action at a time (1
// slot); a CPU runs cores / threads of them, the largest thread count of its
// ranks, at least 1. Throws pplab::Error for an empty list.
struct DeviceMap {
  std::vector<int> devices;       // per rank
  std::vector<int> device_slots;  // per device id
};
DeviceMap MapRankDevices(const std::vector<RankDevice>& ranks);
// The devices of one pipeline's ranks (`pipeline`: their world ranks, the
// first replica's first tensor-parallel ranks), as the simulator takes them:
// each pipeline rank stands for every world rank computing beside it (its
// tensor-parallel group, the other replicas), so a device's slots are its
// world ranks' slots shared out among them: slots x (pipeline ranks on it) /
// (world ranks on it), at least 1. Two pipeline ranks of 2 tensor-parallel
// ranks each on 2 one-thread cores get 1 slot: they time-slice the host.
DeviceMap PipelineDeviceMap(const std::vector<RankDevice>& world, const std::vector<int>& pipeline);
// Whether some device holds more ranks than it has slots, so that ranks
// computing at once would time-slice it.
bool Oversubscribed(const DeviceMap& map);
// Per device id: its slots, raised to the number of ranks on it, so that
// none of them waits for it (ranks timed together, whose times already hold
// their sharing of the device).
std::vector<int> SlotsForRanks(const DeviceMap& map);
// In which turn each rank times its actions so that no device runs more of
// them at once than it has slots: the i-th rank of a device (in rank order)
// goes in turn i / slots. All 0 when nothing is oversubscribed. The profile
// times costs this way, and the simulator then queues the ranks that share a
// device; times taken all at once would already hold the time-slicing, and
// the queue would count it a second time. Ranks that compute together
// (a tensor-parallel group: `group_size` consecutive ranks, whose actions
// hold collectives) take the same turn, the first with room for all of
// them; a group with more ranks on a device than its slots has the device
// to itself in its turn.
std::vector<int> MeasureTurns(const DeviceMap& map, int group_size = 1);
// `stage` as this worker runs it: as it is in fp32; in bf16, under autocast
// with its bf16 outputs returned as fp32 (MixedPrecisionStage).
std::unique_ptr<Stage> WorkerStage(const Worker& worker, std::unique_ptr<Stage> stage);

// The model's collectives (models/tensor_parallel.h) over `group`, every wait
// bounded by `timeout`.
std::shared_ptr<TensorParallelComm> MakeTensorParallelComm(std::shared_ptr<ProcessGroupHandle> group,
                                                           std::chrono::milliseconds timeout);

// The run id rank 0 proposes, checked against every rank's (see above),
// and each rank's `flags` fingerprint against rank 0's (where both are not
// 0): ranks started by hand or by torchrun with other flags (another --lr,
// seed or model) would otherwise train apart, or wait on each other until
// the timeout. `group` null: this process alone.
std::string AgreeOnRunId(ProcessGroupHandle* group, std::chrono::milliseconds timeout, uint64_t flags = 0);

// Every rank of `group` gives `mine`; throws, naming the first rank whose
// value is not rank 0's, "rank R <differs>" + what, when they differ. For
// what the ranks read after they joined (the text, its tokenizer): ranks
// started by hand, each reading its own copy of a --data of one name, had
// trained on two corpora unseen.
void AgreeOnFingerprint(ProcessGroupHandle& group, std::chrono::milliseconds timeout, uint64_t mine,
                        const std::string& differs);

}  // namespace pplab
