// The executor's step clock (runtime/exec/step_clock.h): the step's wait for
// the device, bounded and naming the action, and the host's issue times
// against the device's.
#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "models/llama.h"
#include "models/partition.h"
#include "runtime/comm/fake_transport.h"
#include "runtime/exec/executor.h"
#include "runtime/exec/step_clock.h"
#include "schedules/error.h"
#include "schedules/generators.h"
#include "schedules/lowering.h"
#include "tests/runtime/exec/executor_test_support.h"

namespace pplab::executor_clock_test {
namespace {

// A device that never finishes the step: Resolve gives up at its bound, as
// the CUDA clock does when a message never completes.
class StuckDeviceClock : public StepClock {
 public:
  void BeginStep(std::chrono::steady_clock::time_point origin) override { host_.BeginStep(origin); }
  int Mark() override { return host_.Mark(); }
  std::vector<TimeNs> Resolve(std::chrono::milliseconds timeout) override {
    bound = timeout;
    throw Error("the GPU has not finished this step's work");
  }
  int FirstUnfinishedMark() const override { return stuck_at; }
  std::vector<TimeNs> HostMarks() const override { return host_.HostMarks(); }
  const char* Name() const override { return "stuck"; }
  std::chrono::milliseconds bound{0};
  int stuck_at = -1;

 private:
  HostClock host_;
};

// The host clock for the host marks; the "device" reaches mark i exactly
// `lag_per_mark_ns` * (i + 1) after the host took it, as a GPU that falls
// further behind the host with each action would.
class LaggingClock : public StepClock {
 public:
  explicit LaggingClock(TimeNs lag_per_mark_ns) : lag_(lag_per_mark_ns) {}
  void BeginStep(std::chrono::steady_clock::time_point origin) override { host_.BeginStep(origin); }
  int Mark() override { return host_.Mark(); }
  std::vector<TimeNs> Resolve(std::chrono::milliseconds timeout) override {
    std::vector<TimeNs> marks = host_.Resolve(timeout);
    for (size_t i = 0; i < marks.size(); ++i) marks[i] += lag_ * static_cast<TimeNs>(i + 1);
    return marks;
  }
  std::vector<TimeNs> HostMarks() const override { return host_.HostMarks(); }
  const char* Name() const override { return "lagging"; }

 private:
  HostClock host_;
  TimeNs lag_;
};

}  // namespace

TEST_CASE("the step's wait for the device is bounded by the comm timeout and names the rank", "[executor]") {
  const LlamaConfig c = Tiny(2);
  const Schedule schedule = Lower(Generate1F1B(1, 1));
  auto stage = BuildLlamaStage(c, PartitionUniform(c, 1), 0, 1, torch::kCPU);
  FakeTransport transport(0, std::make_shared<FakeNetwork>());
  ExecutorOptions options{std::chrono::milliseconds(1234), {}};
  StuckDeviceClock clock;
  options.clock = &clock;
  Executor executor(schedule, 0, {{0, stage.get()}}, transport, CrossEntropy(), options);
  const Batch batch = MakeBatch(c, 2, 4, 1);
  std::vector<MicrobatchData> mbs = {{{batch.inputs, batch.mask}, batch.targets}};
  CHECK_THROWS_WITH(executor.RunStep(mbs, 1.0, std::chrono::steady_clock::now()),
                    Catch::Contains("rank 0 at the end of the step: the GPU has not finished"));
  CHECK(clock.bound == std::chrono::milliseconds(1234));
  // A device stuck at a mark: the error names the first action whose end
  // mark it has not reached. Marks: 0 the step's start (one rank: no
  // receive is posted), then each action's start and end in program order
  // (0F0: 1 and 2, 0B0: 3 and 4), then 5 the step's end.
  for (const auto& [stuck, name] : std::vector<std::pair<int, std::string>>{{2, "0F0"}, {3, "0B0"}, {4, "0B0"}}) {
    clock.stuck_at = stuck;
    CHECK_THROWS_WITH(executor.RunStep(mbs, 1.0, std::chrono::steady_clock::now()),
                      Catch::EndsWith("the first action it has not finished is " + name));
  }
  // Stuck past every action (the step's tail), or a clock that cannot tell:
  // no action is named.
  for (const int stuck : {5, -1}) {
    clock.stuck_at = stuck;
    CHECK_THROWS_WITH(executor.RunStep(mbs, 1.0, std::chrono::steady_clock::now()),
                      !Catch::Contains("the first action"));
  }
}

TEST_CASE("a step reports when the host issued each action and how far the device trailed it", "[executor]") {
  const LlamaConfig c = Tiny(2);
  auto stage = BuildLlamaStage(c, PartitionUniform(c, 1), 0, 1, torch::kCPU);
  const Batch batch = MakeBatch(c, 2, 4, 1);
  const std::vector<MicrobatchData> mbs = {{{batch.inputs, batch.mask}, batch.targets}};
  FakeTransport transport(0, std::make_shared<FakeNetwork>());
  // zb-h1 with one rank and one microbatch: F, I, W, whose start marks are
  // 1, 3 and 5 (0: the step's start); with the device 1 ms further behind at
  // each mark, they start 2, 4 and 6 ms after the host issued them: the
  // median is 4 ms.
  const Schedule zb = Lower(GenerateZeroBubbleH1(1, 1));
  ExecutorOptions options;
  LaggingClock lagging(1'000'000);
  options.clock = &lagging;
  Executor executor(zb, 0, {{0, stage.get()}}, transport, CrossEntropy(), options);
  const StepResult r = executor.RunStep(mbs, 1.0, std::chrono::steady_clock::now());
  REQUIRE(r.events.size() == 3);
  REQUIRE(r.host_times.size() == 3);
  for (size_t i = 0; i < 3; ++i) {
    const TimeNs mark = 1 + 2 * static_cast<TimeNs>(i);  // the start mark's index
    CHECK(r.events[i].start - r.host_times[i].first == (mark + 1) * 1'000'000);
    CHECK(r.events[i].end - r.host_times[i].second == (mark + 2) * 1'000'000);
    CHECK(r.host_times[i].first <= r.host_times[i].second);
  }
  CHECK(MedianDeviceLagMs(r) == 4.0);
  // The device trails by 8 ms at the step's end mark (7, after W's 5 and 6)
  // and 1 ms at its start (0): the step spans 7 ms more on the device.
  CHECK(r.clock_span_ns - r.host_span_ns == 7'000'000);
  CHECK(r.host_span_ns > 0);

  // 1f1b with two microbatches: four actions, starts at marks 1, 3, 5, 7,
  // lags 2, 4, 6, 8 ms: the median of an even count is the mean of the
  // middle two, 5 ms.
  const Schedule two = Lower(Generate1F1B(1, 2));
  Executor executor2(two, 0, {{0, stage.get()}}, transport, CrossEntropy(), options);
  const std::vector<MicrobatchData> two_mbs = {mbs[0], mbs[0]};
  CHECK(MedianDeviceLagMs(executor2.RunStep(two_mbs, 0.5, std::chrono::steady_clock::now())) == 5.0);

  // On the host clock the host's times are the events' own: no lag.
  ExecutorOptions host_options;
  Executor on_host(zb, 0, {{0, stage.get()}}, transport, CrossEntropy(), host_options);
  const StepResult h = on_host.RunStep(mbs, 1.0, std::chrono::steady_clock::now());
  REQUIRE(h.host_times.size() == h.events.size());
  for (size_t i = 0; i < h.events.size(); ++i) {
    CHECK(h.host_times[i] == std::make_pair(h.events[i].start, h.events[i].end));
  }
  CHECK(MedianDeviceLagMs(h) == 0.0);
  CHECK(h.host_span_ns == h.clock_span_ns);
}

}  // namespace pplab::executor_clock_test
