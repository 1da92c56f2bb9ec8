// The trainer's step events on the actions' clock: the last step's work
// after its actions (the tied weights' swap, the loss's all-reduce, the clip
// and the update) is marked on the clock the executor times the actions on,
// so on a GPU it is on CUDA events like them, resolved once after the update.
#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <vector>

#include "models/llama.h"
#include "runtime/comm/fake_transport.h"
#include "runtime/exec/step_clock.h"
#include "runtime/train/trainer.h"
#include "schedules/error.h"
#include "schedules/generators.h"
#include "schedules/lowering.h"
#include "tests/runtime/train/trainer_test_support.h"

namespace pplab::trainer_clock_test {
namespace {

constexpr TimeNs kMs = 1'000'000;

// A device clock whose mark i of a step is at i ms: every time it gives is a
// whole number of milliseconds, which no host clock reading would be.
class CountingClock : public StepClock {
 public:
  void BeginStep(std::chrono::steady_clock::time_point) override { marks_ = 0; }
  int Mark() override { return marks_++; }
  std::vector<TimeNs> Resolve(std::chrono::milliseconds timeout) override {
    ++resolves;
    if (resolves == fail_at) {
      bound = timeout;
      throw Error("the GPU has not reached this mark");
    }
    return Times();
  }
  std::vector<TimeNs> HostMarks() const override { return Times(); }
  const char* Name() const override { return "counting"; }
  int resolves = 0;
  int fail_at = 0;  // the resolve (1, 2, ...) that times out; 0: none
  std::chrono::milliseconds bound{0};

 private:
  std::vector<TimeNs> Times() const {
    std::vector<TimeNs> t;
    for (int i = 0; i < marks_; ++i) t.push_back(i * kMs);
    return t;
  }
  int marks_ = 0;
};

// `steps` steps of a one-rank plan of two stages with tied embeddings, every
// step clipping, timed on `clock`.
TrainSummary TrainOnClock(StepClock& clock, int steps) {
  at::set_num_threads(1);
  LlamaConfig c = LlamaPreset("tiny");
  c.tie_word_embeddings = true;
  // Both halves of the tied weight on the one rank: its swap is a step event.
  const Schedule schedule = Lower(Generate("interleaved-1f1b", {1, 2, 2}));
  const Partition partition = PartitionUniform(c, 2);
  TrainerOptions options;
  options.steps = steps;
  options.clip_norm = 1e-6;  // every step clips
  options.tied_parameters = {kEmbeddingWeight, kLmHeadWeight};
  options.clock = &clock;
  FakeTransport transport(0, std::make_shared<FakeNetwork>());
  const StageFactory make_stage = [&](StageId s) { return BuildLlamaStage(c, partition, s, 3, torch::kCPU); };
  const BatchFn batch = [&](int step) { return RandomTokenBatch(c, 4, 8, 2, 7 + step); };
  return Train(schedule, 0, transport, nullptr, make_stage, batch, SummedTokenLoss(), options);
}

}  // namespace

TEST_CASE("the last step's work after the actions is marked on the actions' clock", "[trainer]") {
  CountingClock clock;
  const TrainSummary summary = TrainOnClock(clock, 3);

  // One resolve a step by the executor, one more after the last update.
  CHECK(clock.resolves == 3 + 1);
  const Timeline& t = summary.last_step;
  REQUIRE(!t.events.empty());
  TimeNs actions_end = 0;
  for (const TimelineEvent& e : t.events) actions_end = std::max(actions_end, e.end);
  REQUIRE(t.step_events.size() == 4);
  const std::vector<std::string> names = {"tied_exchange", "loss_allreduce", "clip", "optimizer"};
  for (size_t i = 0; i < names.size(); ++i) {
    const StepEvent& e = t.step_events[i];
    INFO(e.name);
    CHECK(e.name == names[i]);
    CHECK(e.rank == 0);
    // Two marks taken back to back on the counting clock: 1 ms apart, on
    // whole milliseconds (the trace starts at the first action's start mark).
    CHECK(e.end - e.start == kMs);
    CHECK(e.start % kMs == 0);
    // After the actions, the step's end mark between them; each event's
    // begin mark right after the previous one's end.
    CHECK(e.start == (i == 0 ? actions_end + 2 * kMs : t.step_events[i - 1].end + kMs));
  }
}

TEST_CASE("a device that never finishes the last update is an error naming the rank, within the comm timeout",
          "[trainer]") {
  CountingClock clock;
  clock.fail_at = 3;  // two steps' resolves by the executor, then the trainer's
  CHECK_THROWS_WITH(TrainOnClock(clock, 2), "rank 0 after the last step's update: the GPU has not reached this mark");
  CHECK(clock.bound == std::chrono::milliseconds(60000));  // TrainerOptions' comm_timeout
}

}  // namespace pplab::trainer_clock_test
