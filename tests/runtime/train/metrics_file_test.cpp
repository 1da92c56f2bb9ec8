// The metrics file: one line per step, a new run's file started over, and a
// resumed run's view of the steps an interrupted run wrote past its
// checkpoint.
#include "runtime/train/metrics_file.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>

#include "schedules/error.h"
#include "schedules/file_io.h"

namespace pplab::metrics_file_test {
namespace {

std::string TmpDir(const std::string& name) {
  const std::string dir = std::string(PPLAB_TEST_TMP_DIR) + "/metrics_file_" + name + "_" + std::to_string(::getpid());
  RemoveTree(dir);
  return dir;
}

void AppendTextFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::app | std::ios::binary);
  out << text;
}

void WriteSteps(const std::string& path, int resumed_at, int first, int last) {
  MetricsFile file(path, resumed_at);
  for (int step = first; step <= last; ++step) file.Write({{"step", step}, {"loss", 1.0 / step}});
}

}  // namespace

TEST_CASE("metrics lines, one JSON object per step in a folder made for them, and a new run starts the file over",
          "[metrics]") {
  const std::string path = TmpDir("append") + "/run/metrics.jsonl";
  WriteSteps(path, -1, 1, 2);
  CHECK(ReadTextFile(path) == "{\"loss\":1.0,\"step\":1}\n{\"loss\":0.5,\"step\":2}\n");
  // Another run into the same file: its steps alone (they were appended, two
  // runs' steps 1, 2, 1 in one file).
  WriteSteps(path, -1, 1, 1);
  CHECK(ReadTextFile(path) == "{\"loss\":1.0,\"step\":1}\n");
}

TEST_CASE("a resumed run drops the steps written past its checkpoint and keeps other lines", "[metrics]") {
  const std::string path = TmpDir("resume") + "/metrics.jsonl";
  // An interrupted run: steps 1..5 written, its last checkpoint at step 3;
  // a line that is not a step's stays where it is.
  {
    MetricsFile file(path, -1);
    for (int step = 1; step <= 2; ++step) file.Write({{"step", step}, {"loss", 1.0 / step}});
    file.Write({{"note", "not a step"}});
    file.Write({{"step", "3"}});  // not an integer step: kept
    for (int step = 3; step <= 5; ++step) file.Write({{"step", step}, {"loss", 1.0 / step}});
  }
  WriteSteps(path, 3, 4, 4);
  CHECK(ReadTextFile(path) ==
        "{\"loss\":1.0,\"step\":1}\n{\"loss\":0.5,\"step\":2}\n{\"note\":\"not a step\"}\n{\"step\":\"3\"}\n"
        "{\"loss\":0.3333333333333333,\"step\":3}\n{\"loss\":0.25,\"step\":4}\n");
  // Resumed at 0 (no checkpoint): every step's line goes.
  WriteSteps(path, 0, 1, 1);
  CHECK(ReadTextFile(path) == "{\"note\":\"not a step\"}\n{\"step\":\"3\"}\n{\"loss\":1.0,\"step\":1}\n");
}

TEST_CASE("an empty metrics path writes nothing and an unwritable one is refused by name", "[metrics]") {
  MetricsFile none("", -1);
  none.Write({{"step", 1}});  // no file, no error
  const std::string dir = TmpDir("unwritable");
  std::filesystem::create_directories(dir + "/metrics.jsonl");  // a folder where the file should be
  try {
    MetricsFile file(dir + "/metrics.jsonl", -1);
    FAIL("opened a folder for appending");
  } catch (const Error& e) {
    CHECK_THAT(e.what(), Catch::Contains(dir + "/metrics.jsonl"));
  }
}

TEST_CASE("a resumed run drops a last line a crash cut short, so every line of the file parses", "[metrics]") {
  const std::string path = TmpDir("cut") + "/metrics.jsonl";
  WriteSteps(path, -1, 1, 2);
  AppendTextFile(path, "{\"bubble\":0.3,\"grad_no");  // the write a crash cut short
  WriteSteps(path, 2, 3, 3);
  CHECK(ReadTextFile(path) ==
        "{\"loss\":1.0,\"step\":1}\n{\"loss\":0.5,\"step\":2}\n{\"loss\":0.3333333333333333,\"step\":3}\n");
  // A last line that parses stays, newline or not.
  AppendTextFile(path, "{\"note\":1}");
  WriteSteps(path, 3, 4, 4);
  CHECK_THAT(ReadTextFile(path), Catch::EndsWith("\"step\":3}\n{\"note\":1}\n{\"loss\":0.25,\"step\":4}\n"));
  // It says when it dropped one, for the run to tell (that step's line is lost).
  AppendTextFile(path, "{\"step\":5,\"lo");
  CHECK(MetricsFile(path, 4).DroppedCutLine());
  CHECK_FALSE(MetricsFile(path, 4).DroppedCutLine());  // dropped: the file is whole now
}

}  // namespace pplab::metrics_file_test
