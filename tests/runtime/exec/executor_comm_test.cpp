// The executor's messages: the ranks its transport connects to, receives
// posted one compute action ahead, and a receive that times out.
#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "models/llama.h"
#include "models/partition.h"
#include "runtime/comm/fake_transport.h"
#include "runtime/exec/executor.h"
#include "schedules/generators.h"
#include "schedules/lowering.h"
#include "tests/runtime/exec/executor_test_support.h"

namespace pplab::executor_comm_test {
namespace {

// Counts the receives posted and not yet waited for.
class PostCounter : public FakeTransport {
 public:
  using FakeTransport::FakeTransport;
  void PostRecv(RankId peer, int64_t tag, const MessageSpec& spec) override {
    FakeTransport::PostRecv(peer, tag, spec);
    most = std::max(most, ++outstanding);
  }
  TensorList WaitRecv(RankId peer, int64_t tag, std::chrono::milliseconds timeout) override {
    TensorList got = FakeTransport::WaitRecv(peer, tag, timeout);
    --outstanding;
    return got;
  }
  int outstanding = 0, most = 0;
};

// Records the peers the executor connects to.
class ConnectRecorder : public FakeTransport {
 public:
  using FakeTransport::FakeTransport;
  void Connect(const std::vector<RankId>& peers, std::chrono::milliseconds) override {
    connected.insert(peers.begin(), peers.end());
  }
  std::set<RankId> connected;
};

}  // namespace

TEST_CASE("a rank whose peer never sends times out naming the action", "[executor]") {
  const LlamaConfig c = Tiny(2);
  const Schedule schedule = Lower(Generate1F1B(2, 1));
  auto stage = BuildLlamaStage(c, PartitionUniform(c, 2), 1, 1, torch::kCPU);
  auto network = std::make_shared<FakeNetwork>();
  FakeTransport transport(1, network);
  Executor executor(schedule, 1, {{1, stage.get()}}, transport, CrossEntropy(), {std::chrono::milliseconds(200), {}});
  const Batch batch = MakeBatch(c, 2, 4, 1);
  std::vector<MicrobatchData> mbs = {{{batch.inputs, batch.mask}, batch.targets}};
  CHECK_THROWS_WITH(
      executor.RunStep(mbs, 1.0, std::chrono::steady_clock::now()),
      Catch::Contains("rank 1 waiting on 1RECV_F0 from rank 0") && Catch::Contains("timed out after 200 ms"));
}

TEST_CASE("an executor connects its transport to exactly the ranks its program exchanges messages with", "[executor]") {
  const LlamaConfig c = Tiny(3);
  auto network = std::make_shared<FakeNetwork>();
  const Schedule pipeline = Lower(Generate1F1B(3, 3));
  const auto partition = PartitionUniform(c, 3);
  const std::vector<std::set<RankId>> want = {{1}, {0, 2}, {1}};
  for (RankId r = 0; r < 3; ++r) {
    auto stage = BuildLlamaStage(c, partition, r, 1, torch::kCPU);
    ConnectRecorder transport(r, network);
    Executor executor(pipeline, r, {{r, stage.get()}}, transport, CrossEntropy(), {});
    CHECK(transport.connected == want[r]);
  }
  const Schedule single = Lower(Generate1F1B(1, 2));
  auto stage = BuildLlamaStage(c, PartitionUniform(c, 1), 0, 1, torch::kCPU);
  ConnectRecorder transport(0, network);
  Executor executor(single, 0, {{0, stage.get()}}, transport, CrossEntropy(), {});
  CHECK(transport.connected.empty());
}

TEST_CASE("under DualPipe an executor also connects the ranks that hold the other copy of its model parts",
          "[executor]") {
  // K=4: rank r holds part r of the first copy and part 3-r of the second.
  // Rank 0's messages go to rank 1 only, but both its parts' other copies
  // are on rank 3, with which it sums gradients after each step.
  const LlamaConfig c = Tiny(4);
  const Schedule dual = Lower(GenerateDualPipe(4, 8));
  REQUIRE(dual.NumPipelines() == 2);
  const auto partition = PartitionUniform(c, 4);
  const std::vector<std::set<RankId>> want = {{1, 3}, {0, 2}, {1, 3}, {2, 0}};
  auto network = std::make_shared<FakeNetwork>();
  for (RankId r = 0; r < 4; ++r) {
    std::vector<std::unique_ptr<Stage>> owned;
    std::map<StageId, Stage*> stages;
    for (StageId s : dual.StagesOf(r)) {
      owned.push_back(BuildLlamaStage(c, partition, dual.ModelStage(s), 1, torch::kCPU));
      stages[s] = owned.back().get();
    }
    ConnectRecorder transport(r, network);
    Executor executor(dual, r, stages, transport, CrossEntropy(), {});
    CHECK(transport.connected == want[r]);
  }
}

TEST_CASE("receives are posted one compute action ahead, so a step holds a few receive buffers, not M", "[executor]") {
  at::set_num_threads(1);
  const LlamaConfig c = Tiny(2);
  const Batch batch = MakeBatch(c, 8, 8, 3);
  for (const std::string name : {"1f1b", "gpipe", "zb-h1"}) {
    const Schedule schedule = Lower(Generate(name, {2, 8, 0}));
    const Partition partition = MakePartition(c, 2, "uniform");
    std::vector<std::unique_ptr<Stage>> stages;
    for (int s = 0; s < 2; ++s) stages.push_back(BuildLlamaStage(c, partition, s, 1, torch::kCPU));
    std::vector<MicrobatchData> mbs;
    const auto inputs = batch.inputs.chunk(8), masks = batch.mask.chunk(8), targets = batch.targets.chunk(8);
    for (int m = 0; m < 8; ++m) mbs.push_back({{inputs[m], masks[m]}, targets[m]});
    auto network = std::make_shared<FakeNetwork>();
    std::vector<int> most(2, 0), left(2, -1);
    std::vector<std::string> errors(2);
    std::vector<std::thread> threads;
    for (RankId r = 0; r < 2; ++r) {
      threads.emplace_back([&, r] {
        try {
          PostCounter transport(r, network);
          Executor executor(schedule, r, {{r, stages[r].get()}}, transport, CrossEntropy(),
                            {std::chrono::milliseconds(20000), {}});
          executor.RunStep(mbs, 1.0 / static_cast<double>(batch.valid_tokens), std::chrono::steady_clock::now());
          left[r] = transport.outstanding;  // checked after the join: Catch2 is not thread-safe
          most[r] = transport.most;
        } catch (const std::exception& e) {
          errors[r] = e.what();
        }
      });
    }
    for (auto& t : threads) t.join();
    INFO(name << ": most receives outstanding on rank 0 " << most[0] << ", rank 1 " << most[1]);
    REQUIRE(errors == std::vector<std::string>(2));
    CHECK(left == std::vector<int>(2, 0));  // every posted receive was waited for
    // Rank 1 of GPipe gets its 8 activations while it computes; each is
    // posted one action ahead of its F. Rank 0 waits for gradients.
    CHECK(most[0] <= 2);
    CHECK(most[1] <= 2);
  }
}

}  // namespace pplab::executor_comm_test
