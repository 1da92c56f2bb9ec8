// `pplab` hands train, profile, generate and export-model to `pplab-train`
// (tools/cmd_forward_train.cpp): they work from the same command and keep
// the command-line guarantees of the offline commands.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/run_pplab.h"

namespace pplab::train_forward_test {

TEST_CASE("pplab train works through pplab, workers included", "[train][cli]") {
  for (const char* ranks : {"-k 1 -m 1", "-k 2 -m 2"}) {
    const PplabRun r =
        Pplab(std::string("train --model tiny --synthetic --steps 1 --batch-size 4 --seq-len 16 --out '' -q --json ") +
              ranks);
    INFO(ranks << "\n" << r.out);
    REQUIRE(r.code == 0);
    const auto j = nlohmann::json::parse(r.out.substr(r.out.find('{')));
    CHECK(j["losses"].size() == 1);
  }
  const PplabRun help = Pplab("train --help");
  CHECK(help.code == 0);
  CHECK_THAT(help.out, Catch::Contains("--lr") && Catch::Contains("--comm-timeout"));
}

TEST_CASE("every floating-point flag of train, profile and generate refuses NaN and infinities by name",
          "[train][cli]") {
  std::string seen;
  for (const char* command : {"train", "profile", "generate", "export-model"}) {
    for (const std::string& flag : FloatFlags(command)) {
      for (const char* value : {"nan", "inf", "-inf"}) {
        const PplabRun r = Pplab(std::string(command) + " " + flag + " " + value);
        INFO(command << " " << flag << " " << value << ": " << r.out);
        CHECK(r.code == 105);
        CHECK_THAT(r.out,
                   Catch::StartsWith("pplab: error: " + flag + ": ") && Catch::Contains(std::string("got ") + value) ||
                       Catch::Contains(std::string("Value ") + value + " not in range"));
      }
      seen += " " + flag;
    }
  }
  // The flags of the issue are among them.
  for (const char* flag : {" --lr", " --clip-norm", " --val-fraction", " --comm-timeout", " --temperature"}) {
    CHECK_THAT(seen, Catch::Contains(flag));
  }
}

TEST_CASE("every unsigned flag of train, profile and generate refuses a negative value by name", "[train][cli]") {
  std::string seen;
  for (const char* command : {"train", "profile", "generate", "export-model"}) {
    for (const std::string& flag : TypedFlags(command, "UINT")) {
      const PplabRun r = Pplab(std::string(command) + " " + flag + " -5");
      INFO(command << " " << flag << ": " << r.out);
      CHECK(r.code == 105);
      CHECK(r.out == "pplab: error: " + flag + ": must be a non-negative integer, got -5\n");  // one line
      seen += std::string(" ") + command + " " + flag;
    }
  }
  for (const char* flag : {" train --seed", " profile --seed", " generate --seed"})
    CHECK_THAT(seen, Catch::Contains(flag));
}

}  // namespace pplab::train_forward_test
