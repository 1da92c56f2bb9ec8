// A run's metrics: one JSON object per line, appended as each step ends, so
// that a run cut short keeps every step it finished. No LibTorch.
#pragma once

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

namespace pplab {

class MetricsFile {
 public:
  // Opens `path`, creating its folder; an empty path writes nothing.
  // `resumed_at` >= 0 means a run resumed from that step's checkpoint: the
  // file is appended to, after the lines of later steps (written by the
  // interrupted run past its last checkpoint) are dropped, so it holds each
  // step once, in order. A line is a step's when it is an object whose
  // "step" is an integer; other lines are kept. Below 0, a new run: the file
  // starts over. Throws pplab::Error naming the file.
  MetricsFile(const std::string& path, int resumed_at);
  ~MetricsFile();
  MetricsFile(const MetricsFile&) = delete;
  MetricsFile& operator=(const MetricsFile&) = delete;

  // Appends `record` as one line and flushes it. Throws pplab::Error naming
  // the file when the write fails.
  void Write(const nlohmann::json& record);

  // The resumed file's last line was cut short (the run stopped while
  // writing it) and dropped: that step's line is lost, for the caller to say.
  bool DroppedCutLine() const { return dropped_cut_line_; }

 private:
  void DropStepsAfter(int step);

  std::string path_;
  FILE* file_ = nullptr;
  bool dropped_cut_line_ = false;
};

}  // namespace pplab
