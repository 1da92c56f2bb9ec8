// What `pplab train` guarantees about runs, checkpoints and processes
// (docs/reliability.md, "Runtime"): each test names the guarantee it checks.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "schedules/file_io.h"
#include "tests/run_pplab.h"

namespace fs = std::filesystem;

namespace pplab::train_reliability_test {
namespace {

PplabRun Train(const std::string& args) {
  return Pplab(
      "train --synthetic --out '' -q --model tiny --batch-size 8 --seq-len 32 --steps 10 -m 4 --warmup-steps 0 "
      "--clip-norm 0 --eval-every 0 --comm-timeout 10 " +
      args);
}

std::string Tmp(const std::string& name) {
  const std::string dir = std::string(PPLAB_TEST_TMP_DIR) + "/reliability_" + name;
  RemoveTree(dir);
  return dir;
}

std::vector<int> MetricSteps(const std::string& path) {
  std::ifstream in(path);
  std::vector<int> steps;
  for (std::string line; std::getline(in, line);) steps.push_back(nlohmann::json::parse(line).at("step").get<int>());
  return steps;
}

int CountLines(const std::string& text) {
  int n = 0;
  for (char c : text) n += c == '\n';
  return n;
}

// A socket bound to a free port on all interfaces; listening when asked.
struct BoundPort {
  int fd = -1;
  int port = 0;
  explicit BoundPort(bool listen) {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    socklen_t len = sizeof addr;
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
    port = ntohs(addr.sin_port);
    if (listen) REQUIRE(::listen(fd, 4) == 0);
  }
  ~BoundPort() { ::close(fd); }
};

// A port free a moment ago, for workers to rendezvous on.
int FreePort() { return BoundPort(false).port; }

// Runs `script` in sh and returns its stdout only (Shell() mixes in stderr).
std::string ShellStdout(const std::string& script) {
  FILE* pipe = popen(script.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
  pclose(pipe);
  return out;
}

// Two ranks started by hand on a free port, rank 0 in folder `a` and rank 1
// in `b`, each running `worker`: their output, each ending "rc=N".
std::string RanksInFolders(const std::string& a, const std::string& b, const std::string& worker) {
  const std::string env = "MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(FreePort()) + " WORLD_SIZE=2 ";
  return ShellStdout("(cd " + a + " && " + env + "RANK=0 " + worker + " 2>&1; echo rc=$?) & (cd " + b + " && " + env +
                     "RANK=1 " + worker + " 2>&1; echo rc=$?); wait");
}

}  // namespace

TEST_CASE("a second run into a run folder is refused, --resume continues it and --overwrite replaces it",
          "[train][reliability]") {
  const std::string out = Tmp("folder");
  const std::string run = "-k 2 -m 2 --checkpoint-every 2 --out " + out;
  REQUIRE(Train(run + " --steps 4").code == 0);
  CHECK(MetricSteps(out + "/metrics.jsonl") == std::vector<int>{1, 2, 3, 4});
  const PplabRun again = Train(run + " --steps 4");
  INFO(again.out);
  CHECK(again.code == 2);
  CHECK(CountLines(again.out) == 1);
  CHECK_THAT(again.out,
             Catch::Contains("--out " + out + " already holds a run") &&
                 Catch::Contains("pass --resume to continue it, --out NEW for another folder, or --overwrite"));
  CHECK(MetricSteps(out + "/metrics.jsonl") == std::vector<int>{1, 2, 3, 4});  // untouched
  // A run that died after step 4's metrics but before its checkpoint: the
  // resume drops steps 3 and 4 and writes them again, so each step is there once.
  WriteTextFile(out + "/checkpoints/latest", "step-000002\n");
  REQUIRE(Train(run + " --steps 4 --resume").code == 0);
  CHECK(MetricSteps(out + "/metrics.jsonl") == std::vector<int>{1, 2, 3, 4});
  // A finished run resumes to nothing to do; fewer steps are refused; more continue.
  const PplabRun done = Train(run + " --steps 4 --resume");
  INFO(done.out);
  CHECK(done.code == 0);
  CHECK_THAT(done.out, Catch::Contains("nothing to do: the checkpoint in " + out + "/checkpoints is at step 4"));
  const PplabRun done_json = Pplab(
      "train --synthetic --model tiny --batch-size 8 --seq-len 32 -m 2 -k 2 --steps 4 --resume --json --out " + out);
  INFO(done_json.out);
  REQUIRE(done_json.code == 0);
  const auto nothing = nlohmann::json::parse(done_json.out);  // stdout is one object
  CHECK(nothing["nothing_to_do"] == true);
  CHECK(nothing["step"] == 4);
  const PplabRun fewer = Train(run + " --steps 3 --resume");
  CHECK(fewer.code == 2);
  CHECK_THAT(fewer.out, Catch::Contains("--steps 3 is below the step of the checkpoint to resume"));
  const PplabRun more = Pplab(
      "train --synthetic --model tiny --batch-size 8 --seq-len 32 -m 2 -k 2 --checkpoint-every 2 --steps 6 "
      "--resume --out " +
      out);
  INFO(more.out);
  CHECK(more.code == 0);
  CHECK_THAT(more.out,
             Catch::Contains("the learning-rate schedule was recorded for 4 steps; it now decays over --steps 6"));
  CHECK(MetricSteps(out + "/metrics.jsonl") == std::vector<int>{1, 2, 3, 4, 5, 6});
  // An --overwrite that is refused leaves the run as it was: here for text
  // with no documents, refused after the run folder's checks, and for an
  // output that cannot be written.
  const std::string empty = Tmp("empty.txt");
  WriteTextFile(empty, "");
  const std::string blocker = Tmp("overwrite_blocker");
  WriteTextFile(blocker, "a file\n");
  // A plan kept in a checkpoint's folder, which the overwrite would remove.
  const std::string kept_plan = out + "/checkpoints/step-000006/plan.json";
  REQUIRE(Pplab("export -s 1f1b -k 2 -m 4 -o " + kept_plan).code == 0);
  for (const PplabRun& refused :
       {Pplab("train --model tiny --batch-size 8 --seq-len 32 -m 2 -k 2 --steps 2 --overwrite --out " + out +
              " --data " + empty),
        Train(run + " --steps 2 --overwrite --trace " + blocker + "/t.json"),
        // Worker counts the workers would refuse, refused first.
        Train(run + " --steps 2 --overwrite --nproc 3"),
        Train("--checkpoint-every 2 --out " + out + " --steps 2 --overwrite --plan " + kept_plan)}) {
    INFO(refused.out);
    CHECK(refused.code == 2);
    CHECK(MetricSteps(out + "/metrics.jsonl") == std::vector<int>{1, 2, 3, 4, 5, 6});
    CHECK(ReadTextFile(out + "/checkpoints/latest") == "step-000006\n");
    CHECK(CountLines(refused.out) == 1);
  }
  CHECK_THAT(Train(run + " --steps 2 --overwrite --nproc 3").out,
             Catch::Contains("--nproc 3: the run has --dp 1 x --tp 1 x 2 pipeline ranks = 2 processes"));
  CHECK_THAT(Train("--checkpoint-every 2 --out " + out + " --steps 2 --overwrite --plan " + kept_plan).out,
             Catch::Contains("--plan " + kept_plan + " is part of the earlier run --overwrite would remove"));
  // --overwrite replaces the run.
  REQUIRE(Train(run + " --steps 2 --overwrite").code == 0);
  CHECK(MetricSteps(out + "/metrics.jsonl") == std::vector<int>{1, 2});
  CHECK_FALSE(fs::exists(out + "/checkpoints/step-000006"));
  CHECK(ReadTextFile(out + "/checkpoints/latest") == "step-000002\n");
}

TEST_CASE("a resumed run prunes the checkpoints below it too, never a higher step nor the one it just published",
          "[train][reliability][checkpoint]") {
  const std::string dir = Tmp("prune"), other = Tmp("prune_other");
  const std::string common = "-k 1 -m 1 --checkpoint-every 2 ";
  // The interrupted run kept steps 2 and 4.
  REQUIRE(Train(common + "--steps 4 --checkpoint-dir " + dir).code == 0);
  REQUIRE(fs::exists(dir + "/step-000002/manifest.json"));
  // Higher steps of another run sit in the directory (as step-000090 and
  // step-000100 did in the report): pruning by name would delete each new
  // checkpoint right after writing it.
  REQUIRE(Train(common + "--steps 10 --checkpoint-dir " + other).code == 0);
  fs::rename(other + "/step-000008", dir + "/step-000008");
  fs::rename(other + "/step-000010", dir + "/step-000010");
  const PplabRun r = Train(common + "--steps 6 --resume --checkpoint-dir " + dir);
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("replaces the later") == std::string::npos);  // steps 8 and 10 are past --steps 6
  CHECK(ReadTextFile(dir + "/latest") == "step-000006\n");
  CHECK(fs::exists(dir + "/step-000006/manifest.json"));
  CHECK(fs::exists(dir + "/step-000004/manifest.json"));
  CHECK_FALSE(fs::exists(dir + "/step-000002"));  // the newest two are kept, the interrupted run's counted
  CHECK(fs::exists(dir + "/step-000008"));        // not this run's
  CHECK(fs::exists(dir + "/step-000010"));
}

TEST_CASE("bad options are refused with one line before any worker starts", "[train][reliability]") {
  const std::string plan = std::string(PPLAB_TEST_TMP_DIR) + "/reliability_plan.json";
  REQUIRE(Pplab("export -s 1f1b -k 2 -m 4 -o " + plan).code == 0);
  struct Case {
    const char* args;
    const char* says;
  };
  const std::string with_plan = "--plan " + plan + " -k 4";
  const std::string dump = std::string(PPLAB_TEST_TMP_DIR) + "/reliability_dump";
  const std::string dump_trace = "-k 1 --dump-grads " + dump + " --trace " + dump + "/norm.weight.pt";
  const std::string dump_checkpoints = "-k 1 --dump-grads " + dump + " --checkpoint-dir " + dump;
  double k4096 = 0;
  for (const Case& c :
       {Case{"-k 4096", "fewer than the 4096 stages"}, Case{with_plan.c_str(), "--ranks 4 conflicts with --plan"},
        Case{"-k 2 --seq-len 100000", "--seq-len 100000 exceeds the model's max_position_embeddings"},
        Case{"-k 4 -m 4 --dp 1024 --batch-size 4096", "local worker processes on"},
        Case{"-k 2 --resume --overwrite --checkpoint-dir x", "pick one"},
        Case{dump_trace.c_str(), "whose NAME.pt files are the gradients'"},
        Case{dump_checkpoints.c_str(), "give the gradients a folder of their own"},
        Case{"-k 2 -s zb-auto", "-s zb-auto: its order is searched with a cost model, so train runs it from a file"},
        Case{"-k 2 --resume", "--resume continues from --checkpoint-dir, and this run has none"},
        Case{"-k 2 --checkpoint-every 2", "--checkpoint-every writes into --checkpoint-dir, and this run has none"}}) {
    const auto start = std::chrono::steady_clock::now();
    const PplabRun r = Train(c.args);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    INFO(c.args << "\n" << r.out);
    CHECK(r.code == 2);
    CHECK(CountLines(r.out) == 1);
    CHECK_THAT(r.out, Catch::StartsWith("pplab: error: ") && Catch::Contains(c.says));
    std::printf("refused before start in %.2f s: train %s\n", seconds, c.args);
    if (std::string(c.args) == "-k 4096") k4096 = seconds;
  }
  // Flags for text, with --synthetic: refused by the flag parser, not ignored.
  for (const std::string flag :
       {"--packed", "--val-fraction 0.1", "--vocab-size 300", "--cache-dir x", "--eval-batches 2"}) {
    const PplabRun r = Train("-k 1 " + flag);
    INFO(flag << "\n" << r.out);
    CHECK(r.code != 0);
    CHECK(CountLines(r.out) == 1);
    CHECK_THAT(r.out, Catch::Contains("--synthetic excludes " + flag.substr(0, flag.find(' '))));
  }
  // Synthetic tokens have no validation split: an interval is refused, 0 taken.
  const PplabRun eval = Train("-k 1 --eval-every 5");
  CHECK(eval.code == 2);
  CHECK(CountLines(eval.out) == 1);
  CHECK_THAT(eval.out, Catch::Contains("--eval-every 5: --synthetic tokens have no validation split"));
  // On text, an interval with no split to evaluate, and batches with no
  // interval, are refused too (both were dropped unsaid).
  const std::string text = "train -q --out '' --model tiny -k 1 --steps 1 --data " + std::string(PPLAB_TEST_DATA_DIR) +
                           "/text/fortunes.txt --cache-dir " + std::string(PPLAB_TEST_TMP_DIR) +
                           "/eval_refusals_cache ";
  const PplabRun no_split = Pplab(text + "--val-fraction 0 --eval-every 1");
  CHECK(no_split.code == 2);
  CHECK_THAT(no_split.out, Catch::Contains("--eval-every 1: --val-fraction 0 leaves no validation split"));
  const PplabRun no_interval = Pplab(text + "--eval-every 0 --eval-batches 3");
  CHECK(no_interval.code == 2);
  CHECK_THAT(no_interval.out, Catch::Contains("--eval-batches 3: --eval-every 0 never evaluates"));
  const PplabRun no_peak = Train("-k 1 --peak-tflops 0");  // 0 read as "not given" once
  CHECK(no_peak.code != 0);
  CHECK_THAT(no_peak.out, Catch::Contains("--peak-tflops: must be above 0"));
  // The refusal costs nothing beyond the start of pplab-train (loading
  // LibTorch), which a loaded machine can stretch past a second by itself;
  // `pplab` alone does not load LibTorch, so it is not the yardstick.
  const std::string train_binary = (std::filesystem::path(PPLAB_BINARY).parent_path() / "pplab-train").string();
  const auto start = std::chrono::steady_clock::now();
  REQUIRE(std::system((train_binary + " --version > /dev/null").c_str()) == 0);
  const double startup = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("train -k 4096 --model tiny refused in %.2f s; pplab-train --version takes %.2f s\n", k4096, startup);
  CHECK(k4096 < startup + 0.5);
}

TEST_CASE("outputs that cannot be written are refused with one line before any worker starts", "[train][reliability]") {
  // A file where a folder should be: no process, root included, can create
  // a folder or a file below it.
  const std::string blocker = Tmp("blocker");
  WriteTextFile(blocker, "a file\n");
  struct Case {
    std::string args;
    std::string says;
  };
  const Case cases[] = {
      {"-k 2 --out " + blocker, "--out " + blocker + ": cannot create: Not a directory"},
      {"-k 2 --checkpoint-dir " + blocker + "/ck", "--checkpoint-dir " + blocker + "/ck: cannot create"},
      {"-k 2 --dump-grads " + blocker + "/g", "--dump-grads " + blocker + "/g: cannot create"},
      {"-k 2 --trace " + blocker + "/t.json", "--trace: cannot write " + blocker + "/t.json"},
      {"-k 2 --sim-trace " + blocker + "/s.json", "--sim-trace: cannot write " + blocker + "/s.json"},
      {"-k 2 --metrics " + blocker + "/m.jsonl", "--metrics: cannot write " + blocker + "/m.jsonl"},
      {"-k 1 --trace " + std::string(PPLAB_TEST_TMP_DIR),
       "--trace: cannot write " + std::string(PPLAB_TEST_TMP_DIR) + ": is a directory"},
  };
  for (const Case& c : cases) {
    const PplabRun r = Train(c.args);
    INFO(c.args << "\n" << r.out);
    CHECK(r.code == 2);
    CHECK(CountLines(r.out) == 1);
    // A worker's error would name its rank ("pplab: error: rank 0: ...").
    CHECK_THAT(r.out, Catch::StartsWith("pplab: error: " + c.says));
  }
  // A --checkpoint-dir that is a file is refused before --out is made (a
  // refused run left an empty folder).
  const std::string unmade = Tmp("outputs-unmade");
  const PplabRun file_dir = Train("-k 2 --out " + unmade + " --checkpoint-dir " + blocker);
  CHECK(file_dir.code == 2);
  CHECK_THAT(file_dir.out, Catch::StartsWith("pplab: error: --checkpoint-dir " + blocker +
                                             ": cannot create: Not a "
                                             "directory"));
  CHECK_FALSE(fs::exists(unmade));
  // An output may not replace a file the run reads, nor another output.
  const std::string plan = Tmp("outputs-plan.json"), config = Tmp("outputs-config.json");
  REQUIRE(Pplab("export -s 1f1b -k 2 -m 4 -o " + plan).code == 0);
  WriteTextFile(config, ReadTextFile(std::string(PPLAB_TEST_DATA_DIR) + "/fuzz/llama_config/tiny.json"));
  const std::string plan_text = ReadTextFile(plan), config_text = ReadTextFile(config);
  const Case clashes[] = {
      {"--plan " + plan + " --trace " + plan, "--trace and --plan both name " + plan},
      {"-k 2 --model " + config + " --metrics " + config, "--metrics and --model both name " + config},
      {"-k 2 --trace " + plan + ".t --sim-trace " + plan + ".t", "--trace and --sim-trace both name " + plan + ".t"},
  };
  for (const Case& c : clashes) {
    const PplabRun r = Train(c.args);
    INFO(c.args << "\n" << r.out);
    CHECK(r.code == 2);
    CHECK(CountLines(r.out) == 1);
    CHECK_THAT(r.out, Catch::StartsWith("pplab: error: " + c.says));
  }
  CHECK(ReadTextFile(plan) == plan_text);
  CHECK(ReadTextFile(config) == config_text);
  // The checkpoints' own names, and a text folder that would hold the run.
  const std::string corpus = Tmp("outputs-corpus");
  RemoveTree(corpus + "-ck");
  fs::create_directories(corpus);
  WriteTextFile(corpus + "/a.txt", "some text to train on\n");
  const Case owned[] = {
      {"-k 2 --checkpoint-dir " + corpus + "-ck --metrics " + corpus + "-ck/latest",
       "--metrics " + corpus + "-ck/latest is in --checkpoint-dir " + corpus + "-ck under a name its checkpoints use"},
      {"-k 2 --checkpoint-dir " + corpus + "-ck --trace " + corpus + "-ck/tokenizer-0123456789abcdef.json",
       "--trace " + corpus + "-ck/tokenizer-0123456789abcdef.json is in --checkpoint-dir"},
  };
  for (const Case& c : owned) {
    const PplabRun r = Train(c.args);
    INFO(c.args << "\n" << r.out);
    CHECK(r.code == 2);
    CHECK(CountLines(r.out) == 1);
    CHECK_THAT(r.out, Catch::StartsWith("pplab: error: " + c.says));
  }
  for (const std::string& where :
       {"--checkpoint-dir " + corpus, "--out " + corpus + "/run", "--out '' --cache-dir " + corpus + "/cache",
        "--out '' --metrics " + corpus + "/m.jsonl", "--out '' --trace " + corpus + "/t.json"}) {
    const PplabRun r = Pplab("train --model tiny -q --steps 1 --data " + corpus + " " + where);
    INFO(where << "\n" << r.out);
    CHECK(r.code == 2);
    CHECK(CountLines(r.out) == 1);
    CHECK_THAT(r.out,
               Catch::StartsWith("pplab: error: --data " + corpus + " holds " +
                                 where.substr(where.rfind(" --") == std::string::npos ? 0 : where.rfind(" --") + 1)));
  }
  CHECK(ListDirectory(corpus) == std::vector<std::string>{"a.txt"});  // nothing made in it
}

TEST_CASE("a rank that hangs after its peers finished is killed at the deadline, not waited on for ever",
          "[train][reliability]") {
  // Rank 1 stops itself (SIGSTOP) after its run, as one stuck in its
  // teardown: the launcher waited on it with no bound.
  const PplabRun r = Train("-k 2 -m 2 --steps 2 --comm-timeout 1 --kill-rank-at 1:3");
  INFO(r.out);
  CHECK(r.code == 1);
  CHECK_THAT(r.out, Catch::Contains("pplab: rank 1 did not exit within 11 s after rank 0 finished; killing it\n") &&
                        Catch::Contains("pplab: rank 1 did not exit in time; the launcher killed it\n"));
}

TEST_CASE("SIGINT while workers start, SIGTERM and SIGHUP while they run leave no process", "[train][reliability]") {
  // As in "killing the launcher takes its workers with it": the seed is
  // computed by the shell so that the pattern matches the run and not this script.
  for (const char* signal : {"INT", "TERM", "HUP"}) {
    // The launcher and its first worker (SIGINT during start-up), or all three.
    const std::string wait_for = std::string(signal) == "INT" ? "2" : "3";
    const std::string log = std::string(PPLAB_TEST_TMP_DIR) + "/reliability_signal.log";
    const std::string script =
        std::string(PPLAB_BINARY) +
        " train --synthetic --out '' -q --model tiny -k 2 --steps 1000000 --seed $((527140 + 1)) "
        ">" +
        log +
        " 2>&1 & L=$!\n"
        "count() { pgrep -f 'seed 52714[1]' | wc -l; }\n"
        "for i in $(seq 1 600); do [ $(count) -ge " +
        wait_for +
        " ] && break; sleep 0.05; done\n"
        "before=$(count)\n"
        "kill -" +
        signal +
        " $L\n"
        "for i in $(seq 1 300); do kill -0 $L 2>/dev/null || break; sleep 0.1; done\n"
        "kill -9 $L 2>/dev/null\n"  // bounded: a launcher that ignored the signal fails the test, not hangs it
        "wait $L; code=$?\n"
        "for i in $(seq 1 100); do [ $(count) -eq 0 ] && break; sleep 0.1; done\n"
        "echo \"$before $code $(count)\"\n";
    const std::string result = ShellStdout(script);
    int before = -1, code = -1, after = -1;
    REQUIRE(std::sscanf(result.c_str(), "%d %d %d", &before, &code, &after) == 3);
    const std::string said = ReadTextFile(log);
    INFO(signal << ": " << result << said);
    CHECK(before >= std::stoi(wait_for));
    CHECK(after == 0);
    const std::string name = signal;
    CHECK(code == (name == "INT" ? 130 : name == "TERM" ? 143 : 129));
    CHECK_THAT(said, Catch::Contains(name == "INT"    ? "pplab: interrupted (SIGINT): stopping"
                                     : name == "TERM" ? "pplab: terminated (SIGTERM): stopping"
                                                      : "pplab: hung up (SIGHUP): stopping"));
  }
}

TEST_CASE("a run refused after its folders were made leaves none of them behind", "[train][reliability]") {
  // Refused by its data, after the output checks made --out, its parents
  // and --out's checkpoints folder; an empty --checkpoint-dir that was
  // there before stays.
  const std::string dir = Tmp("refused_folders");
  fs::create_directories(dir + "/kept");
  WriteTextFile(dir + "/latin1.txt", "caf\xe9 au lait\n");
  const PplabRun text = Pplab("train -q --model tiny --steps 1 --data " + dir + "/latin1.txt --out " + dir +
                              "/made/a/b --checkpoint-dir " + dir + "/kept");
  INFO(text.out);
  CHECK(text.code == 2);
  CHECK_THAT(text.out, Catch::Contains("not UTF-8 text"));
  CHECK_FALSE(fs::exists(dir + "/made"));
  CHECK(fs::is_directory(dir + "/kept"));
  // The path as written: made/x/../y makes made, made/x and made/y.
  const PplabRun dotted = Pplab("train -q --model tiny --steps 1 --data " + dir + "/latin1.txt --out " + dir +
                                "/made/x/../y --checkpoint-dir " + dir + "/kept");
  CHECK(dotted.code == 2);
  CHECK_FALSE(fs::exists(dir + "/made"));
  // A hand-started rank refused for its RANK, which leaves at once.
  const PplabRun rank =
      Pplab("train --synthetic -q --model tiny -k 2 -m 2 --batch-size 4 --seq-len 8 --steps 2 --out " + dir + "/made/c",
            "RANK=5 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(FreePort()) + " ");
  INFO(rank.out);
  CHECK(rank.code == 2);
  CHECK_THAT(rank.out, Catch::Contains("RANK 5 is not a rank of WORLD_SIZE 2"));
  CHECK_FALSE(fs::exists(dir + "/made"));
}

TEST_CASE("a worker of another run is refused when it joins", "[train][reliability]") {
  const int port = FreePort();
  const std::string worker = std::string(PPLAB_BINARY) +
                             " train --synthetic --out '' -q --model tiny -k 2 -m 2 --batch-size 4 --seq-len 8 "
                             "--steps 2 --comm-timeout 10";
  const std::string env = "MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port) + " WORLD_SIZE=2 ";
  const std::string out =
      ShellStdout("(" + env + "RANK=0 PPLAB_RUN_ID=00000000000000aa " + worker + " 2>&1; echo rc=$?) & " + "(" + env +
                  "RANK=1 PPLAB_RUN_ID=00000000000000bb " + worker + " 2>&1; echo rc=$?); wait");
  INFO(out);
  CHECK_THAT(out,
             Catch::Contains("rank 1 belongs to another run (run id 00000000000000bb, this run's 00000000000000aa)"));
  CHECK_THAT(out, !Catch::Contains("rc=0"));
}

TEST_CASE("ranks started by hand with other flags are refused at the rendezvous, naming the rank",
          "[train][reliability]") {
  const int port = FreePort();
  const std::string worker = std::string(PPLAB_BINARY) +
                             " train --synthetic --out '' -q --model tiny -k 2 -m 2 --batch-size 4 --seq-len 8 "
                             "--steps 2 --comm-timeout 10 --lr ";
  const std::string env = "MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port) + " WORLD_SIZE=2 ";
  const std::string out = ShellStdout("(" + env + "RANK=0 " + worker + "0.001 2>&1; echo rc=$?) & (" + env + "RANK=1 " +
                                      worker + "5 2>&1; echo rc=$?); wait");
  INFO(out);
  CHECK_THAT(out, Catch::Contains("rank 1 was started with other flags than rank 0"));
  CHECK_THAT(out, !Catch::Contains("rc=0"));
  // The same values written otherwise (`--lr=5`, another order) are the
  // same flags: the ranks train together.
  const std::string same = std::string(PPLAB_BINARY) + " train --synthetic --out '' -q --model tiny ";
  const std::string env2 = "MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(FreePort()) + " WORLD_SIZE=2 ";
  const std::string together = ShellStdout(
      "(" + env2 + "RANK=0 " + same + "-k 2 -m 2 --batch-size 4 --seq-len 8 --steps 2 --comm-timeout 10 --lr 5" +
      " 2>&1; echo rc=$?) & (" + env2 + "RANK=1 " + same +
      "--lr=5 --steps 2 --seq-len 8 --batch-size 4 -m 2 -k 2 --comm-timeout=10 2>&1; echo rc=$?); wait");
  INFO(together);
  CHECK_THAT(together, Catch::EndsWith("rc=0\nrc=0\n") && !Catch::Contains("error"));
}

TEST_CASE("hand-started ranks agree on what their files hold, and on defaults given or not", "[train][reliability]") {
  // One --model name, each rank's folder its own file: hidden size 32 and
  // 64. Rank 0 aborted in Gloo (terminate, gloo::EnforceNotMet).
  const std::string dir = Tmp("ranks_files");
  const std::string tiny = ReadTextFile(std::string(PPLAB_TEST_DATA_DIR) + "/fuzz/llama_config/tiny.json");
  nlohmann::json wide = nlohmann::json::parse(tiny);
  wide["hidden_size"] = 64;
  fs::create_directories(dir + "/a");
  fs::create_directories(dir + "/b");
  WriteTextFile(dir + "/a/m.json", tiny);
  WriteTextFile(dir + "/b/m.json", wide.dump());
  const std::string worker = std::string(PPLAB_BINARY) +
                             " train --synthetic --out '' -q --model m.json -k 2 -m 2 --batch-size 4 --seq-len 8 "
                             "--steps 2 --comm-timeout 10";
  const std::string out = RanksInFolders(dir + "/a", dir + "/b", worker);
  INFO(out);
  CHECK_THAT(out, Catch::Contains("rank 1 was started with other flags than rank 0"));
  CHECK_THAT(out, !Catch::Contains("rc=0") && !Catch::Contains("terminate"));
  // A default given on one rank only is the same flags.
  const std::string same = std::string(PPLAB_BINARY) +
                           " train --synthetic --out '' -q --model tiny -k 2 -m 2 --batch-size 4 --seq-len 8 "
                           "--steps 2 --comm-timeout 10";
  const std::string env2 = "MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(FreePort()) + " WORLD_SIZE=2 ";
  const std::string together = ShellStdout("(" + env2 + "RANK=0 " + same + " --lr 0.001 2>&1; echo rc=$?) & (" + env2 +
                                           "RANK=1 " + same + " 2>&1; echo rc=$?); wait");
  INFO(together);
  CHECK_THAT(together, Catch::EndsWith("rc=0\nrc=0\n") && !Catch::Contains("error"));
}

TEST_CASE("hand-started ranks that read other text under one --data name are refused when they have read it",
          "[train][reliability]") {
  // Each rank's folder holds its own c.txt: the first stage's inputs and
  // the last stage's targets came from two corpora, unseen.
  const std::string dir = Tmp("ranks_text");
  for (const char* side : {"a", "b"}) fs::create_directories(dir + "/" + side);
  std::string a, b;
  for (int i = 0; i < 200; ++i) {
    a += "the pipeline runs stage " + std::to_string(i) + " of the plan.\n";
    b += "a different corpus line " + std::to_string(7 * i) + " here.\n";
  }
  WriteTextFile(dir + "/a/c.txt", a);
  WriteTextFile(dir + "/b/c.txt", b);
  const std::string worker =
      std::string(PPLAB_BINARY) +
      " train --data c.txt --cache-dir cache --vocab-size 300 --out '' -q --model tiny -k 2 -m 2 "
      "--batch-size 4 --seq-len 16 --steps 2 --comm-timeout 10";
  const std::string out = RanksInFolders(dir + "/a", dir + "/b", worker);
  INFO(out);
  CHECK_THAT(out, Catch::Contains("rank 1 read another text than rank 0 (--data, or its tokenizer): every rank must "
                                  "read the same files"));
  CHECK_THAT(out, !Catch::Contains("rc=0") && !Catch::Contains("terminate"));
  // The same text in both folders trains.
  WriteTextFile(dir + "/b/c.txt", a);
  RemoveTree(dir + "/b/cache");
  const std::string same = RanksInFolders(dir + "/a", dir + "/b", worker);
  INFO(same);
  CHECK_THAT(same, Catch::EndsWith("rc=0\nrc=0\n"));
}

TEST_CASE("hand-started ranks that load other weights under one --init-from name are refused when they join",
          "[train][reliability]") {
  const std::string dir = Tmp("ranks_weights");
  for (const char* side : {"a", "b"}) {
    const std::string folder = dir + "/" + side;
    fs::create_directories(folder);
    const std::string seed = side[0] == 'a' ? "1" : "2";
    REQUIRE(Train("-k 1 -m 1 --steps 1 --seed " + seed + " --checkpoint-dir " + folder + "/ck").code == 0);
    REQUIRE(Pplab("export-model --checkpoint " + folder + "/ck -o " + folder + "/w.safetensors").code == 0);
  }
  const std::string worker = std::string(PPLAB_BINARY) +
                             " train --synthetic --init-from w.safetensors --out '' -q --model tiny -k 2 -m 2 "
                             "--batch-size 4 --seq-len 8 --steps 2 --comm-timeout 10";
  const std::string out = RanksInFolders(dir + "/a", dir + "/b", worker);
  INFO(out);
  CHECK_THAT(out, Catch::Contains("rank 1 was started with other flags than rank 0"));
  CHECK_THAT(out, !Catch::Contains("rc=0"));
}

TEST_CASE("profile's hand-started ranks with other flags are refused when they join, not aborted in Gloo",
          "[train][reliability]") {
  const std::string worker = std::string(PPLAB_BINARY) +
                             " profile --model tiny -k 2 --microbatch-size 1 --seq-len 16 --warmup 1 --comm-timeout 10 "
                             "-o " +
                             Tmp("profile_flags") + ".json --repeats ";
  const std::string env = "MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(FreePort()) + " WORLD_SIZE=2 ";
  const std::string out = ShellStdout("(" + env + "RANK=0 " + worker + "2 2>&1; echo rc=$?) & (" + env + "RANK=1 " +
                                      worker + "5 2>&1; echo rc=$?); wait");
  INFO(out);
  CHECK_THAT(out, Catch::Contains("rank 1 was started with other flags than rank 0"));
  CHECK_THAT(out, !Catch::Contains("rc=0") && !Catch::Contains("terminate"));
}

TEST_CASE("a worker whose MASTER_PORT accepts but never answers ends with one line, not a hang",
          "[train][reliability]") {
  // A listening socket nobody serves: the kernel completes the connection,
  // and the store client's first read would wait forever.
  const BoundPort silent(true);
  const PplabRun r =
      Pplab("train --synthetic --out '' -q --model tiny -k 2 -m 2 --steps 1 --comm-timeout 1",
            "RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(silent.port) + " ");
  INFO(r.out);
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("no rendezvous within 2 x --comm-timeout + 10 s (12 s)"));
  for (const char* port : {"70000", "0"}) {
    const PplabRun bad = Pplab("train --synthetic --out '' -q --model tiny -k 2 --steps 1",
                               std::string("RANK=0 WORLD_SIZE=2 MASTER_PORT=") + port + " ");
    CHECK(bad.code == 2);
    CHECK_THAT(bad.out, Catch::Contains(std::string("MASTER_PORT ") + port + " is not a port number"));
  }
}

TEST_CASE("rank 0 alone, its peer never started, says what the store's timeout means, and rank 1 alone in one line",
          "[train][reliability]") {
  const int port = FreePort();
  const PplabRun r = Pplab("train --synthetic --out '' -q --model tiny -k 2 -m 2 --steps 1 --comm-timeout 1",
                           "RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port) + " ");
  INFO(r.out);
  CHECK(r.code == 2);
  CHECK(CountLines(r.out) == 1);
  CHECK_THAT(r.out, Catch::Contains("failed (every one of the WORLD_SIZE ranks must start and reach 127.0.0.1:" +
                                    std::to_string(port) + " within --comm-timeout, 1 s)"));
  // Under 1 s LibTorch's store, which counts whole seconds, gave no time at
  // all ("timed out after 0s"), however soon the peers came: 1 s at least.
  const int other = FreePort();
  const PplabRun brief = Pplab("train --synthetic --out '' -q --model tiny -k 2 -m 2 --steps 1 --comm-timeout 0.5",
                               "RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(other) + " ");
  CHECK(brief.code == 2);
  CHECK_THAT(brief.out, Catch::Contains(std::to_string(other) + " within --comm-timeout, 1 s, at least 1 s here)"));
  // Rank 1 alone: its client's timeout is one line too (glog's notice and
  // LibTorch's own log line came before it, three lines).
  const PplabRun client =
      Pplab("train --synthetic --out '' -q --model tiny -k 2 -m 2 --steps 1 --comm-timeout 1",
            "RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(FreePort()) + " ");
  INFO(client.out);
  CHECK(client.code == 2);
  CHECK(CountLines(client.out) == 1);
  CHECK_THAT(client.out, Catch::StartsWith("pplab: error: rank 1: connecting to 127.0.0.1:"));
}

TEST_CASE("under torchrun too, an earlier run in --out is refused before the rendezvous, or replaced with --overwrite",
          "[train][reliability]") {
  const std::string out = Tmp("torchrun_outputs");
  const std::string run = std::string(PPLAB_BINARY) +
                          " train --synthetic -q --model tiny -k 2 -m 2 --batch-size 4 --seq-len 8 --comm-timeout 10 "
                          "--out " +
                          out;
  REQUIRE(Pplab(run.substr(run.find(' ') + 1) + " --steps 4").code == 0);
  REQUIRE(MetricSteps(out + "/metrics.jsonl") == std::vector<int>{1, 2, 3, 4});
  // Both ranks refuse at once, each with the launcher's line: no store is
  // reached, so no port is needed.
  const std::string refused =
      ShellStdout("(WORLD_SIZE=2 RANK=0 " + run + " --steps 2 2>&1; echo rc=$?) & (WORLD_SIZE=2 RANK=1 " + run +
                  " --steps 2 2>&1; echo rc=$?); wait");
  INFO(refused);
  const std::string line = "pplab: error: --out " + out + " already holds a run (";
  CHECK(refused.find(line) != refused.rfind(line));  // twice
  CHECK(std::count(refused.begin(), refused.end(), '\n') == 4);
  CHECK_THAT(refused, Catch::Contains("rc=2"));
  CHECK_THAT(refused, !Catch::Contains("rc=0"));
  CHECK(MetricSteps(out + "/metrics.jsonl") == std::vector<int>{1, 2, 3, 4});  // untouched
  // --overwrite: rank 0 removes the earlier run; the new one's 2 steps alone.
  const int port = FreePort();
  const std::string env = "MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port) + " WORLD_SIZE=2 ";
  const std::string replaced =
      ShellStdout("(" + env + "RANK=0 " + run + " --steps 2 --overwrite 2>&1; echo rc=$?) & (" + env + "RANK=1 " + run +
                  " --steps 2 --overwrite 2>&1; echo rc=$?); wait");
  INFO(replaced);
  CHECK_THAT(replaced, !Catch::Contains("rc=2"));
  CHECK(MetricSteps(out + "/metrics.jsonl") == std::vector<int>{1, 2});
}

TEST_CASE("a RANK outside WORLD_SIZE is one line naming both", "[train][reliability]") {
  for (const char* env : {"RANK=1 WORLD_SIZE=1 ", "RANK=-1 WORLD_SIZE=2 ", "RANK=0 WORLD_SIZE=0 "}) {
    const PplabRun r = Pplab("train --synthetic --out '' -q --model tiny -k 1 --steps 1", env);
    INFO(env << r.out);
    CHECK(r.code == 2);
    CHECK(CountLines(r.out) == 1);
    CHECK_THAT(r.out, Catch::Contains("is not a rank of WORLD_SIZE") &&
                          Catch::Contains("(this process is a worker because both are set in the environment)"));
  }
  // A batch the microbatches do not split is refused before the
  // rendezvous, as the launcher refuses it: a lone rank waited there for
  // its peers (to --comm-timeout, here 60 s), then blamed them.
  const PplabRun batch =
      Pplab("train --synthetic --out '' -q --model tiny -k 2 -m 3 --batch-size 2 --steps 1 --comm-timeout 60",
            "RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(FreePort()) + " ");
  CHECK(batch.code == 2);
  CHECK(batch.out == "pplab: error: --batch-size 2 is not divisible by --microbatches 3\n");
  // The node's share likewise (they ran unsaid).
  for (const auto& [env, says] : std::vector<std::pair<std::string, std::string>>{
           {"RANK=0 WORLD_SIZE=1 LOCAL_RANK=-1 ", "LOCAL_RANK -1 is not a rank of LOCAL_WORLD_SIZE 1"},
           {"RANK=0 WORLD_SIZE=1 LOCAL_RANK=7 ", "LOCAL_RANK 7 is not a rank of LOCAL_WORLD_SIZE 1"},
           {"RANK=0 WORLD_SIZE=1 LOCAL_WORLD_SIZE=0 ",
            "LOCAL_WORLD_SIZE 0 is not a count of this node's ranks (1 to WORLD_SIZE 1)"}}) {
    const PplabRun r = Pplab("train --synthetic --out '' -q --model tiny -k 1 --steps 1", env);
    INFO(env << r.out);
    CHECK(r.code == 2);
    CHECK(r.out == "pplab: error: rank 0: " + says + "\n");
  }
}

TEST_CASE("a busy MASTER_PORT is one line", "[train][reliability]") {
  const BoundPort busy(true);
  const PplabRun r = Pplab("train --synthetic --out '' -q --model tiny -k 2 --steps 1",
                           "MASTER_PORT=" + std::to_string(busy.port) + " ");
  INFO(r.out);
  CHECK(r.code == 2);
  CHECK(CountLines(r.out) == 1);
  CHECK_THAT(r.out, Catch::Contains("MASTER_PORT " + std::to_string(busy.port) + " is in use"));
  // Rank 0 of hand-started ranks too, which serves the store there (it
  // printed LibTorch's log lines, then blamed the other ranks).
  const PplabRun worker =
      Pplab("train --synthetic --out '' -q --model tiny -k 2 --steps 1 --comm-timeout 2",
            "RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(busy.port) + " ");
  INFO(worker.out);
  CHECK(worker.code == 2);
  CHECK(worker.out == "pplab: error: rank 0: MASTER_PORT " + std::to_string(busy.port) +
                          " is in use: another run or program holds it; start the ranks with a free MASTER_PORT\n");
}

TEST_CASE("checkpoints need one shared directory: ranks on separate folders are refused at start",
          "[train][reliability][checkpoint]") {
  const int port = FreePort();
  // Two nodes, each with a folder of its own under one name: the same
  // command line (the ranks check that they agree on it) in two folders.
  const std::string a = Tmp("node_a"), b = Tmp("node_b");
  REQUIRE(std::system(("mkdir -p " + a + " " + b).c_str()) == 0);
  const std::string worker = std::string(PPLAB_BINARY) +
                             " train --synthetic -q --model tiny -k 2 -m 2 --batch-size 4 --seq-len 8 --steps 2 "
                             "--comm-timeout 10 --out run";
  const std::string env = "MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port) + " WORLD_SIZE=2 ";
  const std::string out = ShellStdout("(cd " + a + " && " + env + "RANK=0 " + worker + " 2>&1; echo rc=$?) & (cd " + b +
                                      " && " + env + "RANK=1 " + worker + " 2>&1; echo rc=$?); wait");
  INFO(out);
  CHECK_THAT(out, Catch::Contains("--checkpoint-dir run/checkpoints is not shared: 1 rank(s) do not see"));
  CHECK_THAT(out, !Catch::Contains("rc=0"));
}

TEST_CASE("a run folder another run is writing into is refused, --overwrite and --resume too, and left as it was",
          "[train][reliability]") {
  // The other run is this test process, holding the folder's lock as a
  // running pplab does: two runs at once both finished, each over the
  // other's checkpoints and metrics.
  const std::string out = Tmp("locked");
  const std::string run = "-k 2 -m 2 --checkpoint-every 2 --out " + out;
  REQUIRE(Train(run + " --steps 2").code == 0);
  const int fd = ::open(out.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  REQUIRE(::flock(fd, LOCK_EX | LOCK_NB) == 0);
  const std::string metrics = ReadTextFile(out + "/metrics.jsonl");
  for (const char* how : {" --steps 4 --overwrite", " --steps 4 --resume"}) {
    const PplabRun r = Train(run + how);
    INFO(how << ": " << r.out);
    CHECK(r.code == 2);
    CHECK(r.out == "pplab: error: --out " + out +
                       " is in use: another pplab run is writing into it (it holds the folder's lock); wait for it "
                       "to end, or give another folder\n");
    CHECK(ReadTextFile(out + "/metrics.jsonl") == metrics);
    CHECK(fs::exists(out + "/checkpoints/step-000002"));
  }
  // Its checkpoints given as another run's --checkpoint-dir: named as such.
  const int checkpoints = ::open((out + "/checkpoints").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  REQUIRE(checkpoints >= 0);
  REQUIRE(::flock(checkpoints, LOCK_EX | LOCK_NB) == 0);
  const PplabRun other = Train("-k 2 -m 2 --steps 2 --overwrite --out " + Tmp("locked_other") + " --checkpoint-dir " +
                               out + "/checkpoints");
  CHECK(other.code == 2);
  CHECK_THAT(other.out, Catch::Contains("--checkpoint-dir " + out + "/checkpoints is in use"));
  ::close(checkpoints);
  ::close(fd);  // let go: the run goes on
  CHECK(Train(run + " --steps 4 --resume").code == 0);
  CHECK(MetricSteps(out + "/metrics.jsonl") == std::vector<int>{1, 2, 3, 4});
}

TEST_CASE("a --resume with no checkpoint to continue is refused where the outputs hold a run it would write over",
          "[train][reliability]") {
  const std::string out = Tmp("resume_nothing"), elsewhere = Tmp("resume_nothing_ck");
  REQUIRE(Train("-k 2 -m 2 --steps 3 --out " + out + " --checkpoint-dir " + elsewhere).code == 0);
  // --checkpoint-dir forgotten: the run started at step 1 over the metrics.
  const PplabRun forgot = Train("-k 2 -m 2 --steps 5 --resume --out " + out);
  INFO(forgot.out);
  CHECK(forgot.code == 2);
  CHECK_THAT(forgot.out, Catch::Contains("--resume: --checkpoint-dir " + out +
                                         "/checkpoints holds no checkpoint to continue from, and --out " + out +
                                         " holds a run (" + out + "/metrics.jsonl)"));
  CHECK(MetricSteps(out + "/metrics.jsonl") == std::vector<int>{1, 2, 3});
  REQUIRE(Train("-k 2 -m 2 --steps 5 --resume --out " + out + " --checkpoint-dir " + elsewhere).code == 0);
  CHECK(MetricSteps(out + "/metrics.jsonl") == std::vector<int>{1, 2, 3, 4, 5});
  // A fresh folder has nothing to write over: --resume starts it.
  CHECK(Train("-k 2 -m 2 --steps 2 --resume --out " + Tmp("resume_fresh")).code == 0);
}

TEST_CASE("an --overwrite with a --checkpoint-dir of its own removes --out's own checkpoints, part of the run replaced",
          "[train][reliability]") {
  const std::string out = Tmp("overwrite_own"), elsewhere = Tmp("overwrite_own_ck");
  REQUIRE(Train("-k 2 -m 2 --steps 4 --checkpoint-every 2 --out " + out).code == 0);
  REQUIRE(fs::exists(out + "/checkpoints/latest"));
  // Without --overwrite the old checkpoints are a run in --out.
  const PplabRun refused = Train("-k 2 -m 2 --steps 2 --seed 5 --out " + out + " --checkpoint-dir " + elsewhere);
  CHECK(refused.code == 2);
  CHECK_THAT(refused.out, Catch::Contains("--out " + out + " already holds a run"));
  REQUIRE(Train("-k 2 -m 2 --steps 2 --seed 5 --overwrite --out " + out + " --checkpoint-dir " + elsewhere).code == 0);
  CHECK_FALSE(fs::exists(out + "/checkpoints/latest"));  // a --resume without the flag continued them, seeds mixed
  CHECK(MetricSteps(out + "/metrics.jsonl") == std::vector<int>{1, 2});
  // Another run's checkpoints given as --checkpoint-dir are named by that flag.
  const PplabRun theirs =
      Train("-k 2 -m 2 --steps 2 --out " + Tmp("overwrite_theirs") + " --checkpoint-dir " + elsewhere);
  CHECK(theirs.code == 2);
  CHECK_THAT(theirs.out, Catch::Contains("--checkpoint-dir " + elsewhere + " already holds a run (" + elsewhere +
                                         "): pass --resume to continue it, --checkpoint-dir NEW for another folder"));
}

TEST_CASE("a run's folder, one checkpoint or a folder of checkpoints where another kind is meant is refused",
          "[train][reliability]") {
  // A --resume aimed at any of them found no `latest`, trained from step 1
  // with exit 0 and wrote among the other run's files.
  const std::string run = Tmp("wrong_kind");
  REQUIRE(Train("-k 2 -m 2 --steps 2 --checkpoint-every 2 --out " + run).code == 0);
  const std::string ck = run + "/checkpoints";
  REQUIRE(fs::exists(ck + "/step-000002/manifest.json"));
  const std::string other = Tmp("wrong_kind_new");
  PplabRun r = Train("-k 2 -m 2 --steps 3 --resume --out " + other + " --checkpoint-dir " + run);
  INFO(r.out);
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("--checkpoint-dir " + run + " holds a run's outputs (" + run +
                                    "/metrics.jsonl), not its checkpoints: give " + ck + ", or --out " + run));
  r = Train("-k 2 -m 2 --steps 3 --resume --out " + other + " --checkpoint-dir " + ck + "/step-000002");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("--checkpoint-dir " + ck +
                                    "/step-000002 is one checkpoint (it holds manifest.json), not a folder of "
                                    "checkpoints: give the folder it is in"));
  r = Train("-k 2 -m 2 --steps 3 --resume --out " + ck);
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("--out " + ck +
                                    " is a folder of checkpoints (it holds latest), not a run's "
                                    "folder"));
  // Nothing was written: the run and its checkpoints are as they were.
  CHECK(ListDirectory(ck) == std::vector<std::string>{"latest", "step-000002"});
  CHECK(ListDirectory(ck + "/step-000002").size() == 3);  // manifest.json and two shards
  CHECK_FALSE(fs::exists(other));
  // --overwrite replaces the folder of checkpoints with a run's folder (the
  // docs' examples use runs/ck first as one, then as the other).
  r = Train("-k 2 -m 2 --steps 2 --overwrite --out " + ck);
  INFO(r.out);
  CHECK(r.code == 0);
  CHECK(ListDirectory(ck) == std::vector<std::string>{"checkpoints", "metrics.jsonl", "timeline.svg",
                                                      "trace-measured.json", "trace-simulated.json"});
  // --out and --checkpoint-dir one folder is this run's own layout.
  const std::string same = Tmp("wrong_kind_same");
  REQUIRE(Train("-k 2 -m 2 --steps 2 --checkpoint-every 2 --out " + same + " --checkpoint-dir " + same).code == 0);
  CHECK(Train("-k 2 -m 2 --steps 3 --resume --out " + same + " --checkpoint-dir " + same).code == 0);
}

TEST_CASE("an output file that is one of the token cache's files is refused", "[train][reliability]") {
  const std::string cache = Tmp("cache_outputs");
  fs::create_directories(cache);
  for (const std::string flag : {"--metrics", "--trace", "--sim-trace"}) {
    for (const std::string name :
         {"tokens-0123456789abcdef-0123456789abcdef.bin", "tokenizer-0123456789abcdef-256.model"}) {
      const PplabRun r =
          Pplab("train --model tiny -q --steps 1 --seq-len 16 --batch-size 2 -m 1 --out '' --cache-dir " + cache + " " +
                flag + " " + cache + "/" + name);
      INFO(r.out);
      CHECK(r.code == 2);
      CHECK(r.out == "pplab: error: " + flag + " " + cache + "/" + name + " is a file of the token cache (" + cache +
                         "), which this run reads and writes: put it elsewhere\n");
    }
  }
  CHECK(ListDirectory(cache).empty());
}

TEST_CASE("a step folder whose name is not its manifest's step is refused on --resume", "[train][reliability]") {
  const std::string out = Tmp("swapped_steps");
  const std::string run = "-k 2 -m 2 --checkpoint-every 1 --out " + out;
  REQUIRE(Train(run + " --steps 3").code == 0);
  const std::string ck = out + "/checkpoints";
  REQUIRE(fs::exists(ck + "/step-000002"));
  REQUIRE(fs::exists(ck + "/step-000003"));
  // Swapped by hand: the run went on from step 2 as though it were 3.
  fs::rename(ck + "/step-000003", ck + "/swap");
  fs::rename(ck + "/step-000002", ck + "/step-000003");
  fs::rename(ck + "/swap", ck + "/step-000002");
  const PplabRun r = Train(run + " --steps 5 --resume");
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("--resume: " + ck +
                                    "/step-000003 holds the checkpoint of step 2, whose folder is "
                                    "step-000002: renamed by hand?"));
  CHECK(MetricSteps(out + "/metrics.jsonl") == std::vector<int>{1, 2, 3});
}

}  // namespace pplab::train_reliability_test
