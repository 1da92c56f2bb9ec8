// pplab train reports model FLOPs utilisation (MFU) per pipeline rank, in
// --json, the progress line, the text summary and the metrics file.
#include <catch2/catch.hpp>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "models/flops.h"
#include "schedules/file_io.h"
#include "tests/run_pplab.h"

namespace pplab::train_mfu_test {
namespace {

const char kTinyRun[] = "train --model tiny --synthetic --steps 2 --batch-size 4 --seq-len 16 --out '' ";

nlohmann::json JsonOf(const PplabRun& r) { return nlohmann::json::parse(r.out.substr(r.out.find('{'))); }

TEST_CASE("train --json reports model FLOPs per rank and MFU against --peak-tflops", "[train][mfu]") {
  const PplabRun r = Pplab(std::string(kTinyRun) + "-k 2 -m 2 -q --json --peak-tflops 0.5");
  INFO(r.out);
  REQUIRE(r.code == 0);
  const nlohmann::json j = JsonOf(r);
  // The FLOPs of models/flops.h: tiny on 2 stages, 4 sequences of 16 tokens per step.
  const LlamaConfig c = LlamaPreset("tiny");
  const std::vector<double> flops = RankTrainingFlops(c, PartitionUniform(c, 2), {0, 1}, 2, 4, 16);
  REQUIRE(j["model_flops_per_rank"].size() == 2);
  CHECK(j["model_flops_per_rank"][0].get<double>() == flops[0]);
  CHECK(j["model_flops_per_rank"][1].get<double>() == flops[1]);
  CHECK(j["model_flops_per_step"].get<double>() == flops[0] + flops[1]);
  CHECK(j["peak_tflops"].get<double>() == 0.5);
  CHECK(j["peak_source"] == "--peak-tflops");
  // MFU = FLOPs / (mean step time x peak), from the step times it reports.
  double ms = 0;
  for (const auto& t : j["step_times_ms"]) ms += t.get<double>();
  const double seconds = ms / 1000 / j["step_times_ms"].size();
  REQUIRE(j["mfu_per_rank"].size() == 2);
  for (int r = 0; r < 2; ++r) CHECK(j["mfu_per_rank"][r].get<double>() == Approx(flops[r] / (seconds * 0.5e12)));
  CHECK(j["mfu"].get<double>() == Approx((flops[0] + flops[1]) / 2 / (seconds * 0.5e12)));
  CHECK(j["device_name"] == "cpu");
}

TEST_CASE("dualpipe's model FLOPs: each rank runs half the batch through each of its two parts", "[train][mfu]") {
  const PplabRun r = Pplab(std::string(kTinyRun) + "-s dualpipe -k 2 -m 4 -q --json");
  INFO(r.out);
  REQUIRE(r.code == 0);
  const nlohmann::json j = JsonOf(r);
  // Rank 0 holds part 0 of copy 0 and part 1 of copy 1, each fed 2 of the 4 sequences; rank 1 the reverse.
  const LlamaConfig c = LlamaPreset("tiny");
  const std::vector<double> whole = RankTrainingFlops(c, PartitionUniform(c, 2), {0, 1}, 2, 4, 16);
  REQUIRE(j["model_flops_per_rank"].size() == 2);
  for (int rank = 0; rank < 2; ++rank) {
    CHECK(j["model_flops_per_rank"][rank].get<double>() == Approx((whole[0] + whole[1]) / 2).epsilon(1e-12));
  }
  CHECK(j["model_flops_per_step"].get<double>() == Approx(whole[0] + whole[1]).epsilon(1e-12));
}

TEST_CASE("train on the CPU reports no MFU without --peak-tflops, and shows it with one", "[train][mfu]") {
  const PplabRun none = Pplab(std::string(kTinyRun) + "-k 1 -m 1 -q --json");
  INFO(none.out);
  REQUIRE(none.code == 0);
  const nlohmann::json j = JsonOf(none);
  CHECK(j["mfu"].is_null());
  CHECK(j["mfu_per_rank"].is_null());
  CHECK(j["peak_tflops"].is_null());
  CHECK_THAT(j["peak_source"].get<std::string>(), Catch::Contains("no peak known for cpu"));
  CHECK(j["model_flops_per_step"].get<double>() > 0);

  // The text summary and the progress line (stderr is not a terminal: it
  // prints every 5 % and the last step) carry it with a peak, and so does
  // every line of the metrics file.
  const std::string metrics = std::string(PPLAB_TEST_TMP_DIR) + "/mfu-metrics.jsonl";
  std::remove(metrics.c_str());
  const PplabRun shown = Pplab(std::string(kTinyRun) + "-k 1 -m 1 --peak-tflops 0.25 --metrics " + metrics);
  INFO(shown.out);
  REQUIRE(shown.code == 0);
  CHECK_THAT(shown.out, Catch::Contains("step 2/2") && Catch::Contains("tok/s  bubble") && Catch::Contains("  MFU "));
  CHECK_THAT(shown.out, Catch::Contains("tokens/s, MFU "));
  const std::string lines = ReadTextFile(metrics);
  const nlohmann::json last = nlohmann::json::parse(lines.substr(lines.rfind('{')));
  CHECK(last["mfu_per_rank"].size() == 1);
}

}  // namespace
}  // namespace pplab::train_mfu_test
