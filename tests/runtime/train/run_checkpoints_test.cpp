// A training run's checkpoints in one process (runtime/train/run_checkpoints.h):
// which steps save, what a resumed run loads, what pruning keeps, and the
// resume that --steps does not reach.
#include "runtime/train/run_checkpoints.h"

#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "runtime/train/adamw.h"
#include "schedules/error.h"
#include "schedules/file_io.h"
#include "schedules/generators.h"

namespace fs = std::filesystem;

namespace pplab::run_checkpoints_test {
namespace {

// Two parameters, "a" (2x3) and "b" (4), with AdamW over them.
struct Toy {
  explicit Toy(float start) : a(torch::arange(6, torch::kFloat).reshape({2, 3}) + start), b(torch::full({4}, start)) {}
  at::Tensor a, b;
  AdamW optimizer{{{"a", a}, {"b", b}}, AdamWConfig{}};
};

TrainerOptions Options(const std::string& dir) {
  TrainerOptions o;
  o.checkpoint_dir = dir;
  o.checkpoint_every = 3;
  o.steps = 10;
  o.keep_checkpoints = 2;
  o.run_id = "run-a";
  o.manifest_json = nlohmann::json({{"seed", 1}}).dump();  // what a resumed run must match
  o.manifest_for_step = [](int) { return nlohmann::json({{"parameter_elements", 10}}).dump(); };
  return o;
}

}  // namespace

TEST_CASE("a run saves on the steps due, keeps the newest, and a resumed run loads the latest's values and step",
          "[checkpoint]") {
  const std::string dir = std::string(PPLAB_TEST_TMP_DIR) + "/run_checkpoints";
  RemoveTree(dir);
  const Schedule schedule = GenerateGPipe(1, 1);
  const TrainerOptions options = Options(dir);
  RunCheckpoints run(schedule, 0, 0, nullptr, options, /*split=*/false, /*sharded=*/false);
  std::vector<int> due;
  for (int done = 1; done <= options.steps; ++done) {
    if (run.Due(done)) due.push_back(done);
  }
  CHECK(due == std::vector<int>{3, 6, 9, 10});  // every 3, and the last

  Toy toy(0.0F);
  for (int done : due) {
    torch::NoGradGuard no_grad;
    toy.a.add_(1.0);  // each checkpoint holds other values
    CHECK(run.Save(done, toy.optimizer, {"a", "b"}) >= 0);
  }
  // Two kept (keep_checkpoints): steps 9 and 10.
  CHECK_FALSE(fs::exists(CheckpointDirName(dir, 3)));
  CHECK_FALSE(fs::exists(CheckpointDirName(dir, 6)));
  CHECK(fs::exists(CheckpointDirName(dir, 9)));
  CHECK(LatestCheckpoint(dir) == CheckpointDirName(dir, 10));

  TrainerOptions again = options;
  again.resume = true;
  again.steps = 12;
  Toy resumed(5.0F);
  double load_ms = -1;
  RunCheckpoints second(schedule, 0, 0, nullptr, again, false, false);
  CHECK(second.Resume(resumed.optimizer, load_ms) == 10);
  CHECK(load_ms >= 0);
  CHECK(torch::equal(resumed.a, toy.a));
  CHECK(torch::equal(resumed.b, toy.b));

  // Without --resume, or with --steps below the checkpoint's step.
  TrainerOptions fresh = options;
  double none = -1;
  CHECK(RunCheckpoints(schedule, 0, 0, nullptr, fresh, false, false).Resume(resumed.optimizer, none) == 0);
  CHECK(none == 0);
  TrainerOptions short_run = again;
  short_run.steps = 8;
  RunCheckpoints third(schedule, 0, 0, nullptr, short_run, false, false);
  CHECK_THROWS_WITH(
      third.Resume(resumed.optimizer, none),
      Catch::Contains("--steps 8 is below the step of the checkpoint to resume") && Catch::Contains("step 10"));
  RemoveTree(dir);
}

}  // namespace pplab::run_checkpoints_test
