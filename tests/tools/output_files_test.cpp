// The offline commands' outputs: checked before the work, never written
// over one another or over a file the command reads, and standard output
// that cannot be written is an error.
#include "tools/output_files.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "schedules/error.h"
#include "schedules/file_io.h"
#include "tests/run_pplab.h"
#include "tests/tools/cli_test_support.h"

namespace pplab::output_files_test {
namespace {

using cli::CheckOutputFiles;

std::string ErrorOf(const std::vector<cli::FlagPath>& outputs, const std::vector<cli::FlagPath>& inputs) {
  try {
    CheckOutputFiles(outputs, inputs);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("an output may name neither another output nor an input, but a device or no path is fine", "[output_files]") {
  const std::string a = TempPath("output-files-a.json");
  WriteTextFile(a, "{}");
  CHECK(ErrorOf({{"--trace", a}, {"--svg", a}}, {}) ==
        "--trace and --svg both name " + a + " (one would write over the other)");
  CHECK(ErrorOf({{"--trace", TempPath("output-files-new.json")}, {"--svg", ""}}, {{"--plan", a}}).empty());
  CHECK(ErrorOf({{"--svg", ""}, {"--trace", a}}, {{"--cost", ""}, {"--plan", a}}) ==
        "--trace and --plan both name " + a + " (the output would replace a file the command reads)");
  // Two names of one file (a link): each flag's own is named.
  const std::string link = TempPath("output-files-link.json");
  std::remove(link.c_str());
  REQUIRE(::symlink(a.c_str(), link.c_str()) == 0);
  CHECK(ErrorOf({{"--output", a}}, {{"--plan", link}}) == "--output and --plan name one file (" + a + " and " + link +
                                                              ") (the output would replace a file the command reads)");
  CHECK(ErrorOf({{"--trace", "/dev/null"}, {"--svg", "/dev/null"}}, {{"--plan", "/dev/null"}}).empty());
  CHECK(ErrorOf({{"--svg", TempPath("output-files-no-folder/x.svg")}}, {}).rfind("--svg: cannot write ", 0) == 0);
  CHECK(ErrorOf({{"--svg", "-"}}, {}).rfind("--svg: '-' is standard output only for export and sweep", 0) == 0);
}

TEST_CASE("no offline command writes over a file it reads or over its other output", "[output_files]") {
  const std::string trace = TempPath("output-files-trace.json");
  const std::string plan = TempPath("output-files-plan.csv");
  const std::string cost = WriteProfiledCost("output-files-cost.json");
  REQUIRE(Pplab("simulate -s 1f1b -k 2 -m 4 --trace " + trace).code == 0);
  REQUIRE(Pplab("export -s 1f1b -k 2 -m 4 --format csv-compute -o " + plan).code == 0);
  const std::string trace_text = ReadTextFile(trace), plan_text = ReadTextFile(plan), cost_text = ReadTextFile(cost);
  const std::pair<std::string, std::string> cases[] = {
      {"stats " + trace + " --cost-out " + trace, "--cost-out and the trace both name " + trace},
      {"render " + trace + " -o " + trace, "--output and a trace both name " + trace},
      {"simulate --plan " + plan + " --trace " + plan, "--trace and --plan both name " + plan},
      {"simulate -k 2 -m 4 --cost " + cost + " --svg " + cost, "--svg and --cost both name " + cost},
      {"simulate -k 2 -m 4 --trace " + trace + " --svg " + trace, "--trace and --svg both name " + trace},
      {"sweep -k 2 -m 4 --schedules 1f1b --cost " + cost + " -o " + cost, "--output and --cost both name " + cost},
      {"export --plan " + plan + " --format csv -o " + plan, "--output and --plan both name " + plan},
  };
  for (const auto& [args, says] : cases) {
    INFO(args);
    const PplabRun r = Pplab(args);
    CHECK(r.code == 2);
    CHECK_THAT(r.out, Catch::StartsWith("pplab: error: " + says + " ("));
    CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 1);
  }
  CHECK(ReadTextFile(trace) == trace_text);
  CHECK(ReadTextFile(plan) == plan_text);
  CHECK(ReadTextFile(cost) == cost_text);
}

TEST_CASE("no output replaces the --model config, given as a file or as its model's folder", "[output_files]") {
  const std::string config_text = ReadTextFile(std::string(PPLAB_TEST_DATA_DIR) + "/models/llama3-8b-config.json");
  const std::string file = TempPath("output-files-model.json");
  const std::string folder = TempPath("output-files-model-dir");
  REQUIRE(std::system(("mkdir -p " + folder).c_str()) == 0);
  WriteTextFile(file, config_text);
  WriteTextFile(folder + "/config.json", config_text);
  CHECK(cli::ModelInput(folder).path == folder + "/config.json");
  CHECK(cli::ModelInput(folder + "/").path == folder + "/config.json");
  CHECK(cli::ModelInput(file).path == file);
  CHECK(cli::ModelInput("tiny").path.empty());  // a preset: no file, skipped by CheckOutputFiles
  const std::string cost = WriteProfiledCost("output-files-model-cost.json");
  const std::string plan = "plan --ranks 2 --global-batch 2 --memory-per-rank 80GiB --seq-len 128 ";
  const std::pair<std::string, std::string> cases[] = {
      {plan + "--model " + file + " -o " + file, "--output and --model both name " + file},
      {plan + "--model " + folder + " -o " + folder + "/config.json", "--output and --model both name " + folder},
      {plan + "--model " + file + " --trace " + file, "--trace and --model both name " + file},
      {"simulate -k 2 -m 2 --cost " + cost + " --model " + folder + " --trace " + folder + "/config.json",
       "--trace and --model both name " + folder},
  };
  for (const auto& [args, says] : cases) {
    INFO(args);
    const PplabRun r = Pplab(args);
    CHECK(r.code == 2);
    CHECK_THAT(r.out, Catch::StartsWith("pplab: error: " + says));
    CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 1);
  }
  CHECK(ReadTextFile(file) == config_text);
  CHECK(ReadTextFile(folder + "/config.json") == config_text);
}

TEST_CASE("the files of --init-from are a .safetensors file, or a folder's weights and index", "[output_files]") {
  const std::string folder = TempPath("output-files-weights");
  REQUIRE(std::system(("rm -rf " + folder + " && mkdir -p " + folder).c_str()) == 0);
  for (const char* name : {"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
                           "model.safetensors.index.json", "config.json", "README.md"}) {
    WriteTextFile(folder + "/" + name, "x");
  }
  std::vector<std::string> paths;
  for (const cli::FlagPath& f : cli::WeightInputs("--init-from", folder)) {
    CHECK(f.flag == "--init-from");
    paths.push_back(f.path);
  }
  CHECK(paths == std::vector<std::string>{folder + "/model-00001-of-00002.safetensors",
                                          folder + "/model-00002-of-00002.safetensors",
                                          folder + "/model.safetensors.index.json"});
  CHECK(cli::WeightInputs("--init-from", folder + "/model.safetensors").size() == 1);
  CHECK(cli::WeightInputs("--init-from", "").size() == 1);  // no path: nothing to check
  CHECK(ErrorOf({{"--metrics", folder + "/model.safetensors.index.json"}}, cli::WeightInputs("--init-from", folder)) ==
        "--metrics and --init-from both name " + folder +
            "/model.safetensors.index.json (the output would replace a file the command reads)");
}

TEST_CASE("an output that cannot be written stops simulate before it writes the other", "[output_files]") {
  const std::string trace = TempPath("output-files-first.json");
  std::remove(trace.c_str());
  const PplabRun r = Pplab("simulate -k 2 -m 4 --trace " + trace + " --svg " + TempPath("."));
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::StartsWith("pplab: error: --svg: cannot write "));
  struct stat st;
  CHECK(::stat(trace.c_str(), &st) != 0);  // nothing half done
}

TEST_CASE("standard output that cannot be written is an error, not a shorter output", "[output_files]") {
  for (const std::string args : {"export -k 2 -m 4", "compare", "show -k 4 -m 8"}) {
    INFO(args);
    const PplabRun r = Shell("{ " + std::string(PPLAB_BINARY) + " " + args + " >/dev/full; }");
    CHECK(r.code == 2);
    // The reason is there when the last write failed, not when an earlier one did.
    CHECK_THAT(r.out, Catch::StartsWith("pplab: error: cannot write standard output"));
    CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 1);
  }
  // A step grid that outgrows memory (200 MB of text, in 300 MB of address
  // space) is an error, not the part that fitted.
  const PplabRun big =
      Shell("ulimit -v 300000; { " + std::string(PPLAB_BINARY) + " show --steps -k 256 -m 8192 >/dev/null; }");
  CHECK(big.code == 2);
  CHECK(big.out == "pplab: error: out of memory\n");
  // A sweep with no cell a schedule accepts is an error too, as compare's is.
  const PplabRun none = Pplab("sweep --schedules dualpipe -k 1 -m 1");
  CHECK(none.code == 2);
  CHECK_THAT(none.out, Catch::EndsWith("pplab: error: sweep: no schedule accepts any cell of the grid (see the lines "
                                       "above)\n"));
}

}  // namespace pplab::output_files_test
