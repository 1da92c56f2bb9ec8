// The two executables: pplab runs the offline commands without LibTorch and
// hands the LibTorch ones to pplab-train; both refuse non-finite numbers.
#include "tools/cli_main.h"

#include <sys/stat.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <string>

#include "schedules/file_io.h"
#include "schedules/one_line.h"
#include "tests/run_pplab.h"

namespace pplab::cli_main_test {
namespace {

const char* const kOfflineCommands[] = {"schedules", "simulate", "compare", "sweep", "export", "validate",
                                        "render",    "show",     "bench",   "stats", "diff",   "plan"};

std::string TempPath(const std::string& name) { return std::string(PPLAB_TEST_TMP_DIR) + "/" + name; }

}  // namespace

TEST_CASE("cli: an error is one line: LibTorch's backtrace is cut, other line breaks become spaces", "[cli]") {
  CHECK(OneLineError("[enforce fail at alloc_cpu.cpp:75] . DefaultCPUAllocator: can't allocate memory\n"
                     "Exception raised from alloc_cpu at ../c10/core/impl/alloc_cpu.cpp:75 (most recent call "
                     "first):\nframe #0: c10::ThrowEnforceNotMet(char const*, int)\nframe #1: ...") ==
        "[enforce fail at alloc_cpu.cpp:75] . DefaultCPUAllocator: can't allocate memory");
  CHECK(OneLineError("probability tensor contains either `inf`, `nan` or element < 0\nframe #0: at::native::x") ==
        "probability tensor contains either `inf`, `nan` or element < 0");
  CHECK(OneLineError("two\nlines\n") == "two lines");
  CHECK(OneLineError("one line") == "one line");
  // A name with a line break or a terminal escape, as a user may give one:
  // escaped, and UTF-8 left as it is.
  CHECK(ControlEscaped("no\nsuch \x1b[31mred\x7f caf\xc3\xa9") == "no\\x0asuch \\x1b[31mred\\x7f caf\xc3\xa9");
}

TEST_CASE("cli: every floating-point flag of every offline command refuses NaN and infinities by name", "[cli]") {
  int checked = 0;
  for (const char* command : kOfflineCommands) {
    for (const std::string& flag : FloatFlags(command)) {
      for (const char* value : {"nan", "inf", "-inf", "NaN"}) {
        const PplabRun r = Pplab(std::string(command) + " " + flag + " " + value);
        INFO(command << " " << flag << " " << value << ": " << r.out);
        CHECK(r.code == 105);
        // One line naming the flag and the value (a range check may say it first).
        CHECK_THAT(r.out,
                   Catch::StartsWith("pplab: error: " + flag + ": ") && Catch::Contains(std::string("got ") + value) ||
                       Catch::Contains(std::string("Value ") + value + " not in range"));
      }
      ++checked;
    }
  }
  // simulate/compare/sweep cost flags, plan's --flops-per-second, diff's --threshold-ms, ...
  CHECK(checked >= 25);
}

TEST_CASE("cli: every unsigned flag of every command refuses a negative value or one past 2^64 - 1 by name", "[cli]") {
  // CLI11 reads "-1" into an unsigned integer as 2^64 - 1; simulate --seed
  // -1 drew its samples with seed 18446744073709551615 before the check.
  std::string seen;
  for (const char* command : kOfflineCommands) {
    for (const std::string& flag : TypedFlags(command, "UINT")) {
      for (const char* value : {"-1", "-3"}) {
        const PplabRun r = Pplab(std::string(command) + " " + flag + " " + value);
        INFO(command << " " << flag << " " << value << ": " << r.out);
        CHECK(r.code == 105);
        CHECK(r.out == "pplab: error: " + flag + ": must be a non-negative integer, got " + value + "\n");  // one line
      }
      // Nor past 2^64 - 1, which CLI11 would read as 2^64 - 1.
      const PplabRun big = Pplab(std::string(command) + " " + flag + " 18446744073709551616");
      INFO(big.out);
      CHECK(big.code == 105);
      CHECK(big.out == "pplab: error: " + flag + ": must be at most 2^64 - 1, got 18446744073709551616\n");
      seen += std::string(" ") + command + " " + flag;
    }
  }
  CHECK_THAT(seen, Catch::Contains(" simulate --seed"));
}

TEST_CASE("cli: pplab loads no LibTorch: the offline commands stay under 30 MB", "[cli]") {
  const std::string plan = TempPath("rss-plan.json"), trace = TempPath("rss-trace.json");
  REQUIRE(Pplab("export -s zb-h1 -k 4 -m 8 -o " + plan).code == 0);
  REQUIRE(Pplab("simulate --plan " + plan + " --trace " + trace).code == 0);
  const std::vector<std::vector<std::string>> runs = {
      {"schedules"},
      {"simulate", "-k", "8", "-m", "64"},
      {"compare"},
      {"validate", plan},
      {"show", "--plan", plan},
      {"render", trace, "-o", "/dev/null"},
      {"diff", trace, trace},
      {"plan", "--model", "tiny", "--ranks", "2", "--global-batch", "8", "--memory-per-rank", "1GiB", "-o",
       TempPath("rss-best.json")},
  };
  for (const auto& args : runs) {
    const long kib = PeakRssKib(args);
    INFO(args[0] << ": peak RSS " << kib << " KiB");
    CHECK(kib > 0);
    CHECK(kib < 30 * 1024);
  }
  // And no LibTorch library among the executable's NEEDED entries.
  const PplabRun needed = Shell(std::string("readelf -d ") + PPLAB_BINARY);
  REQUIRE_THAT(needed.out, Catch::Contains("libc.so"));  // readelf ran
  CHECK_THAT(needed.out, !Catch::Contains("torch") && !Catch::Contains("c10"));
}

TEST_CASE("cli: --help lists the LibTorch commands too, without pplab-train beside it they say so", "[cli]") {
  const PplabRun help = Pplab("--help");
  for (const char* command : {"train", "generate", "export-model", "profile", "schedules", "plan"}) {
    CHECK_THAT(help.out, Catch::Contains(std::string("  ") + command));
  }
  // A copy of pplab alone in a folder, as in a build without LibTorch.
  const std::string dir = TempPath("lonely");
  ::mkdir(dir.c_str(), 0755);
  const std::string lonely = dir + "/pplab";
  {
    std::ifstream from(PPLAB_BINARY, std::ios::binary);
    std::ofstream to(lonely, std::ios::binary | std::ios::trunc);
    to << from.rdbuf();
  }
  REQUIRE(::chmod(lonely.c_str(), 0755) == 0);
  for (const char* command : {"train", "generate --prompt x", "export-model", "profile"}) {
    const PplabRun r = Shell(lonely + " " + command);
    const std::string& out = r.out;
    INFO(command << ": " << out);
    CHECK(r.code == 2);
    CHECK(std::count(out.begin(), out.end(), '\n') == 1);
    CHECK_THAT(out, Catch::StartsWith("pplab: error: pplab ") && Catch::Contains(dir + "/pplab-train") &&
                        Catch::Contains("without LibTorch"));
  }
}

TEST_CASE("cli: printed commands start with the path pplab was run by", "[cli]") {
  const std::string best = TempPath("argv0-plan.json");
  const PplabRun r = Pplab("plan --model tiny --ranks 2 --global-batch 8 --memory-per-rank 1GiB -o " + best);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains(std::string(PPLAB_BINARY) + " train --plan " + best));
  const PplabRun big = Pplab("show -k 100000 -m 1 --columns 10000");
  CHECK_THAT(big.out, Catch::Contains(std::string("use `") + PPLAB_BINARY + " render`"));
  // Memory rows double the picture: 4000 ranks x 10 000 columns fit the
  // 2^26 cells, with a memory row under each they do not.
  const PplabRun rows = Pplab("show -k 4000 -m 1 --columns 10000 --activation-bytes 1000");
  CHECK(rows.code == 2);
  CHECK(rows.out == std::string("pplab: error: show: 4000 ranks (and their memory rows) x --columns 10000 is too "
                                "large a picture for a terminal; use `") +
                        PPLAB_BINARY + " render` for an SVG, or --no-memory\n");
}

TEST_CASE("cli: sweep checks its output path before simulating", "[cli]") {
  // interleaved with M = 3 not a multiple of K = 2 is skipped with a line: none may appear.
  const PplabRun r = Pplab("sweep --schedules interleaved-1f1b -k 2 -m 3,4 -o /nonexistent/dir/sweep.csv");
  CHECK(r.code == 2);
  CHECK_THAT(r.out,
             Catch::Equals("pplab: error: --output: cannot write /nonexistent/dir/sweep.csv: /nonexistent/dir: No "
                           "such file or directory\n"));
}

TEST_CASE("cli: an input file flag given the empty string is refused, not read as left out", "[cli]") {
  // `--plan ''` (an unset shell variable) ran the default 1f1b with exit 0.
  for (const char* args_text :
       {"simulate --plan ''", "simulate -s 1f1b --cost ''", "show --trace ''", "export --plan '' -o x.json",
        "simulate -s zb-auto --devices-from ''", "compare --cost ''",
        "plan --model tiny -k 2 --global-batch 8 --memory-per-rank 1GiB --cost ''",
        "train --model tiny --plan '' --out ''", "train --model tiny --sim-cost '' --out ''",
        "train --model tiny --init-from '' --out ''", "train --model tiny --tokenizer '' --out ''",
        "generate --checkpoint '' --prompt a"}) {
    const std::string args = args_text;
    INFO(args);
    const PplabRun r = Pplab(args);
    CHECK(r.code == 105);
    const std::string flag =
        args.substr(args.rfind("--", args.find("''")), args.find(" ''") - args.rfind("--", args.find("''")));
    CHECK(r.out == "pplab: error: " + flag + ": an empty file name (leave the flag out for none)\n");
  }
  // An output flag keeps its meaning: simulate --trace '' writes no trace.
  CHECK(Pplab("simulate --trace '' -k 2 -m 2").code == 0);
}

TEST_CASE("cli: a comma list with an empty entry is refused, naming the flag", "[cli]") {
  // CLI11 dropped the entry: the list ran one short with exit 0.
  PplabRun r = Pplab("compare --schedules 1f1b, -k 2 -m 2");
  CHECK(r.code == 105);
  CHECK(r.out == "pplab: error: --schedules: '1f1b,' has an empty entry (a comma too many)\n");
  r = Pplab("sweep -k 4,,8 -m 8");
  CHECK(r.code == 105);
  CHECK(r.out == "pplab: error: --ranks: '4,,8' has an empty entry (a comma too many)\n");
  r = Pplab("sweep -m=,4 -k 2");
  CHECK(r.out == "pplab: error: --microbatches: ',4' has an empty entry (a comma too many)\n");
  // Whole lists, and a list's values as separate words, are as they were.
  CHECK(Pplab("sweep -k 2 -m 2,4 --schedules 1f1b,gpipe -o " + TempPath("comma-list.csv")).code == 0);
  CHECK(Pplab("sweep -k 2 -m 2 4 --schedules 1f1b -o " + TempPath("comma-words.csv")).code == 0);
}

TEST_CASE("cli: a file name with a line break or a terminal escape is printed escaped, on one line", "[cli]") {
  const PplabRun r = Pplab("validate 'no\nsuch\x1b.json'");
  CHECK(r.code == 2);
  CHECK(r.out == "pplab: error: cannot read no\\x0asuch\\x1b.json: No such file or directory\n");
}

TEST_CASE("cli: a FIFO or a device as a schedule file is one line", "[cli]") {
  const std::string fifo = TempPath("cli.fifo");
  std::remove(fifo.c_str());
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  PplabRun r = Pplab("validate " + fifo);
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Equals("pplab: error: cannot read " + fifo + ": is a FIFO, not a regular file\n"));
  std::remove(fifo.c_str());
  r = Pplab("simulate --plan /dev/zero");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Equals("pplab: error: cannot read /dev/zero: is a device, not a regular file\n"));
}

}  // namespace pplab::cli_main_test
