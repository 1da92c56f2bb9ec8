// Replays the fuzzing corpus kept in the repository (the seeds, and every
// input a fuzzer once found, tests/data/fuzz/<harness>/) through the parsers
// the harnesses feed: each input is accepted or refused with pplab::Error.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <vector>

#include "models/llama_config.h"
#include "models/safetensors.h"
#include "schedules/error.h"
#include "schedules/file_io.h"
#include "schedules/schedule_io.h"
#include "schedules/validate.h"
#include "sim/cost_model.h"

namespace pplab::seeds_test {
namespace {

// Runs `parse` on every file of tests/data/fuzz/HARNESS/; returns how many.
int Replay(const std::string& harness, const std::function<void(const std::string&)>& parse) {
  int files = 0;
  const std::string dir = std::string(PPLAB_TEST_DATA_DIR) + "/fuzz/" + harness;
  for (const std::string& name : ListDirectory(dir)) {
    std::ifstream in(dir + "/" + name, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    INFO(dir + "/" + name);
    try {
      parse(text.str());
    } catch (const Error&) {
      // refused with a message: fine
    }
    ++files;
  }
  return files;
}

}  // namespace

TEST_CASE("every kept fuzz input is accepted or refused with pplab::Error", "[fuzz]") {
  CHECK(Replay("schedule_json", [](const std::string& t) {
          const Schedule s = ScheduleFromJson(t, "fuzz.json");
          if (ShapeProblems(s).empty()) Validate(s);
        }) > 0);
  CHECK(Replay("schedule_csv", [](const std::string& t) {
          const Schedule s = ScheduleFromPytorchCsv(t, "fuzz.csv", "fuzz");
          if (ShapeProblems(s).empty()) Validate(s);
        }) > 0);
  CHECK(Replay("cost_model", [](const std::string& t) {
          const CostModel m = CostModel::FromJson(t, "fuzz.json");
          m.CheckStages(m.NumStages(), "fuzz");
          (void)m.Profile();
        }) > 0);
  CHECK(Replay("llama_config", [](const std::string& t) { (void)LlamaConfigFromJson(t, "fuzz.json").ToJson(); }) > 0);
  CHECK(Replay("safetensors", [](const std::string& t) {
          const std::string path = std::string(PPLAB_TEST_TMP_DIR) + "/fuzz-replay.safetensors";
          {
            std::ofstream out(path, std::ios::binary | std::ios::trunc);
            out << t;
          }
          for (const auto& [name, tensor] : ReadSafetensorsHeader(path)) {
            std::vector<float> values(static_cast<size_t>(tensor.Elements()));
            if (tensor.dtype == "F32" || tensor.dtype == "BF16" || tensor.dtype == "F16") {
              ReadAsFloat32(name, tensor, values.data());
            }
          }
        }) > 0);
}

}  // namespace pplab::seeds_test
