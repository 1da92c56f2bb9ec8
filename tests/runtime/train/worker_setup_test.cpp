// Device and backend choices of a worker, checked without a GPU: the
// round-robin mapping of local ranks to GPUs, and the one-line refusals.
#include "runtime/train/worker_setup.h"

#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <thread>

#include "runtime/train/threads.h"
#include "schedules/error.h"

namespace pplab::worker_setup_test {

TEST_CASE("local ranks map to GPUs round-robin, shared when there are fewer GPUs than ranks", "[worker]") {
  // 8 ranks on 8 GPUs: one each.
  for (int r = 0; r < 8; ++r) {
    CHECK(MapLocalRank(r, 8, 8).gpu == r);
    CHECK_FALSE(MapLocalRank(r, 8, 8).shared);
  }
  // 4 ranks on 1 GPU (every multi-rank GPU test): all on GPU 0, shared.
  for (int r = 0; r < 4; ++r) {
    CHECK(MapLocalRank(r, 4, 1).gpu == 0);
    CHECK(MapLocalRank(r, 4, 1).shared);
  }
  // 6 ranks on 4 GPUs: 0 1 2 3 0 1.
  const int expected[] = {0, 1, 2, 3, 0, 1};
  for (int r = 0; r < 6; ++r) CHECK(MapLocalRank(r, 6, 4).gpu == expected[r]);
  CHECK_THROWS_WITH(MapLocalRank(0, 2, 0), Catch::Contains("no GPU"));
}

TEST_CASE("CUDA_DEVICE_MAX_CONNECTIONS below 2 is raised to CUDA's default, with a warning", "[worker]") {
  const char* before = std::getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  const std::string saved = before != nullptr ? before : "";
  ::unsetenv("CUDA_DEVICE_MAX_CONNECTIONS");
  CHECK(KeepSeparateStreamQueues().empty());  // unset: CUDA's default
  CHECK(std::getenv("CUDA_DEVICE_MAX_CONNECTIONS") == nullptr);
  ::setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 1);
  CHECK(KeepSeparateStreamQueues().empty());
  CHECK(std::string(std::getenv("CUDA_DEVICE_MAX_CONNECTIONS")) == "32");
  for (const char* bad : {"1", "0", "one"}) {
    ::setenv("CUDA_DEVICE_MAX_CONNECTIONS", bad, 1);
    const std::string warning = KeepSeparateStreamQueues();
    CHECK(warning.rfind(std::string("CUDA_DEVICE_MAX_CONNECTIONS=") + bad + " replaced by 8", 0) == 0);
    CHECK(std::string(std::getenv("CUDA_DEVICE_MAX_CONNECTIONS")) == "8");
  }
  if (before != nullptr) {
    ::setenv("CUDA_DEVICE_MAX_CONNECTIONS", saved.c_str(), 1);
  } else {
    ::unsetenv("CUDA_DEVICE_MAX_CONNECTIONS");
  }
}

TEST_CASE("CUDA kernels load at start-up unless the user chose otherwise, with a warning", "[worker]") {
  const char* before = std::getenv("CUDA_MODULE_LOADING");
  const std::string saved = before != nullptr ? before : "";
  ::unsetenv("CUDA_MODULE_LOADING");
  CHECK(LoadCudaKernelsEagerly().empty());
  CHECK(std::string(std::getenv("CUDA_MODULE_LOADING")) == "EAGER");
  CHECK(LoadCudaKernelsEagerly().empty());  // EAGER stays, silently
  ::setenv("CUDA_MODULE_LOADING", "LAZY", 1);
  CHECK(LoadCudaKernelsEagerly().rfind("CUDA_MODULE_LOADING=LAZY kept", 0) == 0);
  CHECK(std::string(std::getenv("CUDA_MODULE_LOADING")) == "LAZY");
  if (before != nullptr) {
    ::setenv("CUDA_MODULE_LOADING", saved.c_str(), 1);
  } else {
    ::unsetenv("CUDA_MODULE_LOADING");
  }
}

TEST_CASE("CUDA's environment is prepared once a process, its warnings returned the first time only", "[worker]") {
  const char* names[] = {"CUDA_DEVICE_MAX_CONNECTIONS", "CUDA_MODULE_LOADING"};
  std::string saved[2];
  bool had[2];
  for (int i = 0; i < 2; ++i) {
    const char* v = std::getenv(names[i]);
    had[i] = v != nullptr;
    saved[i] = had[i] ? v : "";
  }
  // Nothing else in this test process prepares it (ctest runs each case alone).
  ::setenv("CUDA_DEVICE_MAX_CONNECTIONS", "1", 1);
  ::setenv("CUDA_MODULE_LOADING", "LAZY", 1);
  const std::vector<std::string> first = PrepareCudaEnvironment("cuda");
  REQUIRE(first.size() == 2);
  CHECK(first[0].rfind("CUDA_DEVICE_MAX_CONNECTIONS=1 replaced by 8", 0) == 0);
  CHECK(first[1].rfind("CUDA_MODULE_LOADING=LAZY kept", 0) == 0);
  CHECK(std::string(std::getenv("CUDA_DEVICE_MAX_CONNECTIONS")) == "8");
  // Later calls (SetUpWorker in the launcher's own process) change nothing and say nothing.
  ::setenv("CUDA_DEVICE_MAX_CONNECTIONS", "1", 1);
  CHECK(PrepareCudaEnvironment("cuda").empty());
  CHECK(std::string(std::getenv("CUDA_DEVICE_MAX_CONNECTIONS")) == "1");
  for (int i = 0; i < 2; ++i) {
    if (had[i]) {
      ::setenv(names[i], saved[i].c_str(), 1);
    } else {
      ::unsetenv(names[i]);
    }
  }
}

TEST_CASE("the device and backend flags are checked in one line each", "[worker]") {
  CHECK(ResolveDevice("cpu", 0, 2).is_cpu());
  CHECK_THROWS_WITH(ResolveDevice("tpu", 0, 1), Catch::StartsWith("--device 'tpu'"));
  if (!torch::cuda::is_available()) {
    CHECK_THROWS_WITH(ResolveDevice("cuda", 0, 1), Catch::Contains("--device cuda: this LibTorch has no CUDA device"));
  }
  const c10::Device cpu(c10::kCPU);
  CHECK(ParseBackend("auto", cpu) == Backend::kGloo);
  CHECK(ParseBackend("gloo", cpu) == Backend::kGloo);
  CHECK_THROWS_WITH(ParseBackend("nccl", cpu), Catch::StartsWith("--backend nccl"));
  CHECK_THROWS_WITH(ParseBackend("mpi", cpu), Catch::Contains("expected auto, gloo or nccl"));
  WorkerOptions o;
  o.pipeline_ranks = 2;
  CHECK(CheckWorkerOptions(o, 2).empty());  // the CPU: no warning
  o.backend = "nccl";
  CHECK_THROWS_WITH(CheckWorkerOptions(o, 2), Catch::StartsWith("--backend nccl"));
}

}  // namespace pplab::worker_setup_test

namespace pplab::worker_setup_test {

TEST_CASE("ranks map to devices: a node's CPU shared by all its ranks, each GPU its own, slots from cores",
          "[worker]") {
  // Two CPU ranks of 1 thread on a 2-core node: one device of 2 slots.
  DeviceMap m = MapRankDevices({{0, -1, 1, 2}, {0, -1, 1, 2}});
  CHECK(m.devices == std::vector<int>{0, 0});
  CHECK(m.device_slots == std::vector<int>{2});
  // Four of 1 thread on 2 cores (oversubscribed): still 2 slots; of 2 threads: 1.
  CHECK(MapRankDevices({{0, -1, 1, 2}, {0, -1, 1, 2}, {0, -1, 1, 2}, {0, -1, 1, 2}}).device_slots ==
        std::vector<int>{2});
  CHECK(MapRankDevices({{0, -1, 2, 2}, {0, -1, 2, 2}}).device_slots == std::vector<int>{1});
  // Two nodes of 2 CPU ranks each: two devices.
  m = MapRankDevices({{0, -1, 4, 8}, {0, -1, 4, 8}, {2, -1, 4, 8}, {2, -1, 4, 8}});
  CHECK(m.devices == std::vector<int>{0, 0, 1, 1});
  CHECK(m.device_slots == std::vector<int>{2, 2});
  // GPUs: ranks on GPU 0, 1, 0 of one node (MapLocalRank's round-robin on 2 GPUs), 1 slot each.
  m = MapRankDevices({{0, 0, 1, 16}, {0, 1, 1, 16}, {0, 0, 1, 16}});
  CHECK(m.devices == std::vector<int>{0, 1, 0});
  CHECK(m.device_slots == std::vector<int>{1, 1});
  // GPU 0 of two nodes are two devices.
  CHECK(MapRankDevices({{0, 0, 1, 16}, {1, 0, 1, 16}}).devices == std::vector<int>{0, 1});
  const RankDevice d{3, 1, 2, 16};
  const RankDevice back = RankDeviceFromWords(RankDeviceWords(d));
  CHECK((back.node == 3 && back.gpu == 1 && back.threads == 2 && back.cores == 16));
  CHECK_THROWS_AS(MapRankDevices({}), Error);
  CHECK_THROWS_AS(RankDeviceFromWords({1, 2}), Error);
}

}  // namespace pplab::worker_setup_test

namespace pplab::worker_setup_test {

TEST_CASE("ranks that would time-slice a device take turns to be timed, as many at once as it has slots", "[worker]") {
  // Two CPU ranks of 1 thread on 2 cores fit: one turn, nothing oversubscribed.
  DeviceMap m = MapRankDevices({{0, -1, 1, 2}, {0, -1, 1, 2}});
  CHECK_FALSE(Oversubscribed(m));
  CHECK(MeasureTurns(m) == std::vector<int>{0, 0});
  // Four of 1 thread on 2 cores: 2 slots, so two ranks at a time.
  m = MapRankDevices({{0, -1, 1, 2}, {0, -1, 1, 2}, {0, -1, 1, 2}, {0, -1, 1, 2}});
  CHECK(Oversubscribed(m));
  CHECK(MeasureTurns(m) == std::vector<int>{0, 0, 1, 1});
  // Two ranks on one GPU (1 slot): one at a time.
  m = MapRankDevices({{0, 0, 1, 16}, {0, 0, 1, 16}});
  CHECK(Oversubscribed(m));
  CHECK(MeasureTurns(m) == std::vector<int>{0, 1});
  // Ranks on GPU 0, 1, 0, 1: each GPU's second rank waits for its first.
  m = MapRankDevices({{0, 0, 1, 16}, {0, 1, 1, 16}, {0, 0, 1, 16}, {0, 1, 1, 16}});
  CHECK(MeasureTurns(m) == std::vector<int>{0, 0, 1, 1});
  // One GPU each: all at once.
  m = MapRankDevices({{0, 0, 1, 16}, {0, 1, 1, 16}});
  CHECK_FALSE(Oversubscribed(m));
  CHECK(MeasureTurns(m) == std::vector<int>{0, 0});
}

TEST_CASE("a pipeline rank's device slots are shared with the world ranks computing beside it", "[worker]") {
  const RankDevice cpu{0, -1, 1, 2}, gpu0{0, 0, 1, 16}, gpu1{0, 1, 1, 16};
  // K=2 alone on 2 one-thread cores: both at once (2 slots).
  DeviceMap m = PipelineDeviceMap({cpu, cpu}, {0, 1});
  CHECK(m.devices == std::vector<int>{0, 0});
  CHECK(m.device_slots == std::vector<int>{2});
  // K=2 x T=2 there (world ranks 0, 2 lead the groups): 4 processes on 2
  // cores, so the 2 pipeline ranks take 1 slot: they time-slice.
  m = PipelineDeviceMap({cpu, cpu, cpu, cpu}, {0, 2});
  CHECK(m.devices == std::vector<int>{0, 0});
  CHECK(m.device_slots == std::vector<int>{1});
  // 2 replicas of K=2 (world ranks 0, 1 the first): the same.
  CHECK(PipelineDeviceMap({cpu, cpu, cpu, cpu}, {0, 1}).device_slots == std::vector<int>{1});
  // On 4 cores, 2 pipeline ranks of 2: 2 slots.
  const RankDevice wide{0, -1, 1, 4};
  CHECK(PipelineDeviceMap({wide, wide, wide, wide}, {0, 2}).device_slots == std::vector<int>{2});
  // A GPU each: K=2 x T=2 over GPUs 0, 1 (the groups' second ranks on GPUs
  // of their own are not in the pipeline's map): 1 slot each, ids dense.
  const RankDevice gpu2{0, 2, 1, 16}, gpu3{0, 3, 1, 16};
  m = PipelineDeviceMap({gpu0, gpu1, gpu2, gpu3}, {0, 2});
  CHECK(m.devices == std::vector<int>{0, 1});
  CHECK(m.device_slots == std::vector<int>{1, 1});
  // All four on one GPU: the pipeline ranks share it, 1 slot.
  m = PipelineDeviceMap({gpu0, gpu0, gpu0, gpu0}, {0, 2});
  CHECK(m.devices == std::vector<int>{0, 0});
  CHECK(m.device_slots == std::vector<int>{1});
  CHECK_THROWS_WITH(PipelineDeviceMap({gpu0, gpu1}, {0, 2}), Catch::Contains("world rank 2 of 2"));
}

TEST_CASE("a tensor-parallel group is timed in one turn, the first with room for all its ranks", "[worker]") {
  const RankDevice cpu{0, -1, 1, 2}, gpu0{0, 0, 1, 16}, gpu1{0, 1, 1, 16};
  // K=2 x T=2 on 2 cores of 1 thread a rank: 2 slots, each group fills them.
  DeviceMap m = MapRankDevices({cpu, cpu, cpu, cpu});
  CHECK(MeasureTurns(m, 2) == std::vector<int>{0, 0, 1, 1});
  // A group of 2 on one GPU (1 slot) has it to itself; the next group waits.
  m = MapRankDevices({gpu0, gpu0, gpu0, gpu0});
  CHECK(MeasureTurns(m, 2) == std::vector<int>{0, 0, 1, 1});
  // Groups on GPUs 0+1 then 0+1: the second waits for both; groups 0+0 and
  // 1+1 do not share a device, so they run at once.
  m = MapRankDevices({gpu0, gpu1, gpu0, gpu1});
  CHECK(MeasureTurns(m, 2) == std::vector<int>{0, 0, 1, 1});
  m = MapRankDevices({gpu0, gpu0, gpu1, gpu1});
  CHECK(MeasureTurns(m, 2) == std::vector<int>{0, 0, 0, 0});
  // Groups of 2 on 4 slots (1-thread ranks on 4 cores): all at once.
  const RankDevice wide{0, -1, 1, 4};
  m = MapRankDevices({wide, wide, wide, wide});
  CHECK(MeasureTurns(m, 2) == std::vector<int>{0, 0, 0, 0});
  // A third group on 2 slots takes turn 2; groups of 1 are the rule of i / slots.
  m = MapRankDevices({cpu, cpu, cpu, cpu, cpu, cpu});
  CHECK(MeasureTurns(m, 2) == std::vector<int>{0, 0, 1, 1, 2, 2});
  CHECK(MeasureTurns(m, 1) == std::vector<int>{0, 0, 1, 1, 2, 2});
  CHECK(MeasureTurns(m, 3) == std::vector<int>{0, 0, 0, 1, 1, 1});
  CHECK_THROWS_WITH(MeasureTurns(m, 4), Catch::Contains("not groups of 4"));
}

}  // namespace pplab::worker_setup_test

namespace pplab::worker_setup_test {

TEST_CASE("a worker's threads go to one pool: never both LibTorch's and a pthreads OpenBLAS's spin at once",
          "[worker][threads]") {
  ::unsetenv("OMP_NUM_THREADS");
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  SECTION("one worker gets every core") {
    CHECK(ShareCores(1) == cores);
    const ComputeThreads t = CurrentComputeThreads();
    if (t.blas_pthreads) {
      // Debian's LibTorch: the matrix products run in OpenBLAS's own pool.
      CHECK(t.blas == cores);
      CHECK(t.intra_op == 1);
    } else {
      CHECK(t.intra_op == cores);
      CHECK((t.blas == 0 || t.blas == cores));
    }
    CHECK(ThreadsInUse() == cores);
  }
  SECTION("more workers than cores get one thread each, in both pools") {
    CHECK(ShareCores(2 * cores) == 1);
    const ComputeThreads t = CurrentComputeThreads();
    CHECK(t.intra_op == 1);
    CHECK(t.blas <= 1);
    CHECK(ThreadsInUse() == 1);
  }
}

TEST_CASE("OMP_NUM_THREADS set by the user is the worker's thread count, in one pool", "[worker][threads]") {
  ::setenv("OMP_NUM_THREADS", "2", 1);
  ::unsetenv("OPENBLAS_NUM_THREADS");
  at::set_num_threads(2);  // what LibTorch reads from OMP_NUM_THREADS at start
  CHECK(ShareCores(8) == 2);
  const ComputeThreads t = CurrentComputeThreads();
  if (t.blas_pthreads) {
    CHECK(t.intra_op == 1);
    CHECK(t.blas == 2);
  } else {
    CHECK(t.intra_op == 2);
  }
  CHECK(ThreadsInUse() == 2);
}

TEST_CASE("OMP_NUM_THREADS and OPENBLAS_NUM_THREADS set by the user are left as they are", "[worker][threads]") {
  ::setenv("OMP_NUM_THREADS", "2", 1);
  ::setenv("OPENBLAS_NUM_THREADS", "1", 1);
  at::set_num_threads(2);
  const ComputeThreads before = CurrentComputeThreads();
  CHECK(ShareCores(1) == 2);
  const ComputeThreads after = CurrentComputeThreads();
  CHECK(after.intra_op == before.intra_op);
  CHECK(after.blas == before.blas);
}

}  // namespace pplab::worker_setup_test
