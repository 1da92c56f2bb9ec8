#include "runtime/train/metrics_file.h"

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "schedules/error.h"
#include "schedules/file_io.h"

namespace fs = std::filesystem;

namespace pplab {

MetricsFile::MetricsFile(const std::string& path, int resumed_at) : path_(path) {
  if (path.empty()) return;
  const fs::path parent = fs::path(path).parent_path();
  std::error_code ec;
  if (!parent.empty()) fs::create_directories(parent, ec);
  if (resumed_at >= 0 && fs::exists(path, ec)) DropStepsAfter(resumed_at);
  // A new run starts the file over: appended, two runs' steps mixed in it.
  file_ = std::fopen(path.c_str(), resumed_at >= 0 ? "a" : "w");
  if (file_ == nullptr) throw Error("metrics file " + path + ": cannot open for writing: " + std::strerror(errno));
}

MetricsFile::~MetricsFile() {
  if (file_ != nullptr) std::fclose(file_);
}

void MetricsFile::DropStepsAfter(int step) {
  const std::string text = ReadTextFile(path_);
  std::string kept;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.contains("step") && j["step"].is_number_integer() && j["step"].get<int64_t>() > step) {
      continue;
    }
    // A last line without its newline that does not parse is a write the
    // crash cut short: the steps appended next would follow invalid JSON.
    if (end == text.size() && j.is_discarded()) {
      dropped_cut_line_ = true;
      continue;
    }
    if (!line.empty()) kept += line + "\n";
  }
  if (kept != text) WriteTextFile(path_, kept);
}

void MetricsFile::Write(const nlohmann::json& record) {
  if (file_ == nullptr) return;
  const std::string line = record.dump() + "\n";
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fflush(file_) != 0) {
    throw Error("metrics file " + path_ + ": write failed: " + std::strerror(errno));
  }
}

}  // namespace pplab
