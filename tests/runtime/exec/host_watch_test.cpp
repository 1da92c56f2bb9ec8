// The host watch (runtime/exec/host_watch.h): a host stuck inside an action
// is reported with its stack, one that leaves in time never is.
#include "runtime/exec/host_watch.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "models/llama.h"
#include "models/partition.h"
#include "runtime/comm/fake_transport.h"
#include "runtime/exec/executor.h"
#include "schedules/error.h"
#include "schedules/generators.h"
#include "schedules/lowering.h"
#include "tests/runtime/exec/executor_test_support.h"

namespace pplab::host_watch_test {
namespace {

// A stage whose forwards wait, at most 60 s, until Release: a host blocked
// inside an action, as one blocked in a CUDA call is.
class BlockedStage : public Stage {
 public:
  explicit BlockedStage(std::unique_ptr<Stage> inner) : inner_(std::move(inner)) {}
  TensorList Forward(const TensorList& inputs) override {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!released_.wait_for(lock, std::chrono::seconds(60), [&] { return open_; })) {
      throw Error("test: the blocked forward was never released");
    }
    return inner_->Forward(inputs);
  }
  std::vector<std::pair<std::string, at::Tensor>> NamedParameters() override { return inner_->NamedParameters(); }
  void Release() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      open_ = true;
    }
    released_.notify_all();
  }

 private:
  std::unique_ptr<Stage> inner_;
  std::mutex mutex_;
  std::condition_variable released_;
  bool open_ = false;
};

}  // namespace

TEST_CASE("a host that stays inside an action past the watch's bound is reported, naming the action and step",
          "[executor]") {
  const LlamaConfig c = Tiny(1);
  const Schedule schedule = Lower(Generate1F1B(1, 1));
  BlockedStage stage(BuildLlamaStage(c, PartitionUniform(c, 1), 0, 1, torch::kCPU));
  std::vector<std::string> lines;  // written on the watch's thread, read after it is gone
  std::vector<std::string> stack;
  std::optional<HostWatch> watch;
  watch.emplace(std::chrono::milliseconds(50), "the test's bound",
                [&](const std::string& line, const std::vector<std::string>& frames) {
                  lines.push_back(line);
                  stack = frames;
                  stage.Release();  // a real caller ends the process here
                });
  watch->SetStep(7);
  ExecutorOptions options;
  options.host_watch = &*watch;
  auto network = std::make_shared<FakeNetwork>();
  FakeTransport transport(0, network);
  Executor executor(schedule, 0, {{0, &stage}}, transport, CrossEntropy(), options);
  const Batch batch = MakeBatch(c, 2, 4, 1);
  const StepResult r =
      executor.RunStep({{{batch.inputs, batch.mask}, batch.targets}}, 1.0, std::chrono::steady_clock::now());
  CHECK(r.losses.size() == 1);  // the step went on once released
  watch.reset();
  REQUIRE(lines.size() == 1);
  CHECK_THAT(lines[0], Catch::StartsWith("the host has been inside 0F0 of step 7 for ") &&
                           Catch::Contains("s, more than the test's bound: a CUDA call there is blocked"));
  // The host's stack then: the stage waits on a condition variable (a timed
  // wait: libc's pthread_cond_clockwait or timedwait), the caller's frames outside it.
  std::string frames;
  for (const std::string& f : stack) frames += f + "\n";
  INFO(frames);
  REQUIRE(stack.size() >= 3);
  CHECK_THAT(frames, Catch::Contains("(pthread_cond_"));
}

TEST_CASE("HostStack names a waiting thread's frames, and the thread's wait goes on after the signal", "[executor]") {
  std::mutex m;
  std::condition_variable cv;
  bool release = false;
  std::thread waiter([&] {
    std::unique_lock<std::mutex> lock(m);
    cv.wait(lock, [&] { return release; });
  });
  // Taken until the waiter is inside its wait (it may still be starting).
  std::string frames;
  for (int i = 0; i < 100 && frames.find("(pthread_cond_wait+") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    frames.clear();
    for (const std::string& f : HostStack(waiter.native_handle(), std::chrono::seconds(2))) frames += f + "\n";
  }
  INFO(frames);
  CHECK_THAT(frames, Catch::Contains("(pthread_cond_wait+"));
  {
    std::lock_guard<std::mutex> lock(m);  // the wait went on after the signal (SA_RESTART)
    release = true;
  }
  cv.notify_all();
  waiter.join();
  CHECK(release);
}

TEST_CASE("a host that leaves its actions in time is never reported", "[executor]") {
  int reports = 0;
  {
    HostWatch watch(std::chrono::seconds(30), "30 s",
                    [&](const std::string&, const std::vector<std::string>&) { ++reports; });
    watch.SetStep(1);
    watch.Enter({ActionKind::kForward, 0, 0});
    watch.Leave();
    watch.Enter({ActionKind::kBackward, 0, 0});
  }  // gone while inside an action, long before its bound: no report
  CHECK(reports == 0);
}

}  // namespace pplab::host_watch_test
