// pplab train --attention: which attention path a run takes on this LibTorch,
// reported in --json, and the refusal of sdpa where LibTorch has no SDPA.
#include <torch/version.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/run_pplab.h"

namespace pplab::train_attention_test {
namespace {

const char kTinyRun[] = "train --model tiny --synthetic --steps 2 --batch-size 4 --seq-len 16 --out '' ";

nlohmann::json JsonOf(const PplabRun& r) { return nlohmann::json::parse(r.out.substr(r.out.find('{'))); }

TEST_CASE("train --attention: auto runs sdpa on LibTorch 2.x and explicit on 1.x, where sdpa is refused",
          "[train][llama]") {
  const PplabRun r = Pplab(std::string(kTinyRun) + "-k 1 -m 1 -q --json");
  REQUIRE(r.code == 0);
#if TORCH_VERSION_MAJOR >= 2
  CHECK(JsonOf(r)["attention"] == "sdpa");
  const PplabRun sdpa = Pplab(std::string(kTinyRun) + "-k 1 -m 1 -q --json --attention sdpa");
  REQUIRE(sdpa.code == 0);
  CHECK(JsonOf(sdpa)["attention"] == "sdpa");
#else
  // LibTorch 1.13 (Debian's, on the development machine) has no SDPA.
  CHECK(JsonOf(r)["attention"] == "explicit");
  const PplabRun sdpa = Pplab(std::string(kTinyRun) + "-k 2 -m 2 --attention sdpa");
  CHECK(sdpa.code == 2);
  CHECK_THAT(sdpa.out, Catch::StartsWith("pplab: error: --attention sdpa needs at::scaled_dot_product_attention"));
  CHECK(std::count(sdpa.out.begin(), sdpa.out.end(), '\n') == 1);
#endif
  const PplabRun explicit_run = Pplab(std::string(kTinyRun) + "-k 1 -m 1 -q --json --attention explicit");
  REQUIRE(explicit_run.code == 0);
  CHECK(JsonOf(explicit_run)["attention"] == "explicit");
  const PplabRun bad = Pplab(std::string(kTinyRun) + "-k 1 -m 1 --attention flash");
  CHECK(bad.code == 2);
  CHECK_THAT(bad.out, Catch::Contains("--attention 'flash' is not one of auto, sdpa, explicit"));
}

}  // namespace
}  // namespace pplab::train_attention_test
