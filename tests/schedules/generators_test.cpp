#include "schedules/generators.h"

#include <catch2/catch.hpp>
#include <cctype>

#include "schedules/error.h"
#include "schedules/lowering.h"
#include "schedules/schedule_io.h"
#include "schedules/validate.h"
#include "sim/simulator.h"
#include "tests/generator_rules.h"

namespace pplab::generators_test {
TEST_CASE("every generator is valid after lowering over K 1..8, M 1..16, v 1..3", "[generators]") {
  int checked = 0;
  for (const GeneratorInfo& g : Generators()) {
    for (int K = 1; K <= 8; ++K) {
      for (int M = 1; M <= 16; ++M) {
        for (int v = 1; v <= 3; ++v) {
          if (!FamilyAccepts(g, K, M, v)) continue;
          const Schedule compute = GenerateForTest(g, {K, M, v});
          REQUIRE_FALSE(compute.HasComm());
          REQUIRE(compute.stages == K * v);
          // One F per (stage, microbatch); the backwards are counted by Validate.
          size_t forwards = 0;
          for (const Program& p : compute.programs) {
            for (const Action& a : p) {
              for (const Action& part : PartsOf(a)) forwards += part.kind == ActionKind::kForward;
            }
          }
          // Each microbatch runs through its pipeline's stages: all K v, or
          // K of dualpipe's two copies.
          size_t pairs = 0;
          for (MicrobatchId m = 0; m < M; ++m) pairs += compute.LastStage(m) - compute.FirstStage(m) + 1;
          REQUIRE(pairs == static_cast<size_t>(g.name == "dualpipe" ? K * M : K * v * M));
          REQUIRE(forwards == pairs);
          if (g.name != "dualpipev" && g.name != "dualpipe") {
            REQUIRE(compute.NumComputeActions() == static_cast<size_t>(K * v * M * (g.split_backward ? 3 : 2)));
          }
          const Schedule lowered = Lower(compute);
          const ValidationReport report = Validate(lowered);
          if (!report.ok()) {
            FAIL_CHECK(g.name << " K=" << K << " M=" << M << " v=" << v << "\n" << FormatReport(lowered, report));
          }
          ++checked;
        }
      }
    }
  }
  CHECK(checked > 500);
}

TEST_CASE("generator rules are errors that state the rule", "[generators]") {
  CHECK_THROWS_WITH(Generate("interleaved-1f1b", {4, 6, 2}), Catch::Contains("M % K == 0"));
  CHECK_THROWS_WITH(Generate("interleaved-1f1b", {4, 8, 1}), Catch::Contains("--virtual >= 2"));
  CHECK_THROWS_WITH(Generate("1f1b", {0, 8, 1}), Catch::Contains("--ranks must be >= 1"));
  CHECK_THROWS_WITH(Generate("gpipe", {2, 0, 1}), Catch::Contains("--microbatches must be >= 1"));
  CHECK_THROWS_WITH(Generate("1f1b", {2, 4, 2}), Catch::Contains("--virtual must be 1"));
  CHECK_THROWS_WITH(Generate("looped-bfs", {2, 4, -1}), Catch::Contains("--virtual must be >= 1"));
  CHECK_THROWS_WITH(Generate("nope", {2, 4, 1}), Catch::Contains("unknown schedule 'nope'"));
  CHECK_THROWS_WITH(Generate("1f1b", {100000, 100000, 1}), Catch::Contains("more than pplab plans"));
  CHECK_THROWS_WITH(Generate("zb-v", {4, 8, 3}), Catch::Contains("--virtual must be 2"));
}

TEST_CASE("1f1b warm-up is min(K - rank - 1, M) forwards", "[generators]") {
  for (int K : {1, 2, 4, 7}) {
    for (int M : {1, 3, 8}) {
      const Schedule s = Generate1F1B(K, M);
      for (RankId r = 0; r < K; ++r) {
        int leading_forwards = 0;
        while (leading_forwards < static_cast<int>(s.programs[r].size()) &&
               s.programs[r][leading_forwards].kind == ActionKind::kForward) {
          ++leading_forwards;
        }
        // The warm-up forwards are followed by the first steady-state F.
        const int warmup = std::min(K - r - 1, M);
        CHECK(leading_forwards == std::min(warmup + 1, M));
      }
    }
  }
}

TEST_CASE("lowering inserts no messages between stages on one rank", "[lowering]") {
  const Schedule one_rank = Lower(GenerateLoopedBfs(1, 4, 3));
  CHECK_FALSE(one_rank.HasComm());
  const Schedule two = Lower(Generate1F1B(2, 2));
  // rank 0: F0 SEND_F0 F1 SEND_F1 RECV_B0 B0 RECV_B1 B1 (warm-up 1, then F1 B0, then B1)
  std::vector<std::string> got;
  for (const Action& a : two.programs[0]) got.push_back(FormatAction(a));
  CHECK(got == std::vector<std::string>{"0F0", "0SEND_F0", "0F1", "0SEND_F1", "0RECV_B0", "0B0", "0RECV_B1", "0B1"});
}

}  // namespace pplab::generators_test

namespace pplab::generators_test {

TEST_CASE("PyTorch's schedule class names are aliases, case-insensitive", "[generators]") {
  const std::vector<std::pair<std::string, std::string>> aliases = {{"GPipe", "gpipe"},
                                                                    {"1F1B", "1f1b"},
                                                                    {"Interleaved1F1B", "interleaved-1f1b"},
                                                                    {"LoopedBFS", "looped-bfs"},
                                                                    {"InterleavedZeroBubble", "interleaved-zb"},
                                                                    {"ZBVZeroBubble", "zb-v"},
                                                                    {"DualPipeV", "dualpipev"}};
  for (const auto& [alias, name] : aliases) {
    INFO(alias);
    CHECK(FindGenerator(alias).name == name);
    std::string lower = alias;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    CHECK(FindGenerator(lower).name == name);
    CHECK(Generate(alias, {2, 4, 0}).name == name);
  }
  CHECK(FindGenerator("ZB-H1").name == "zb-h1");
  CHECK_THROWS_WITH(FindGenerator("ZeroBubble"), Catch::Contains("dualpipev (DualPipeV)"));
}

TEST_CASE("dualpipev and interleaved-zb state their rules", "[generators]") {
  CHECK_THROWS_WITH(Generate("dualpipev", {4, 7, 0}), Catch::Contains("M >= 2K = 8"));
  CHECK_NOTHROW(Generate("dualpipev", {4, 8, 0}));
  CHECK_THROWS_WITH(Generate("dualpipev", {4, 8, 3}), Catch::Contains("--virtual must be 2"));
  // K = 4, M = 9: two rounds of 4.5 microbatches.
  CHECK_THROWS_WITH(Generate("interleaved-zb", {4, 9, 2}), Catch::Contains("multiple of the rounds max(1, M/K) = 2"));
  CHECK_NOTHROW(Generate("interleaved-zb", {4, 3, 2}));  // one round of 3
}

TEST_CASE("dualpipev matches the order PyTorch's ScheduleDualPipeV writes (K=2, M=4)", "[generators]") {
  const Schedule ours = GenerateDualPipeV(2, 4);
  const Schedule theirs = LoadScheduleFile(PPLAB_TEST_DATA_DIR "/pytorch/dualpipev_k2_m4_compute_only.csv");
  CHECK(theirs.placement == ours.placement);
  CHECK(theirs.programs == ours.programs);
}

TEST_CASE("dualpipev overlaps F and B in its steady phase: 2(M-2K+r+1) - [r = K-1] + (K-r-1) per rank",
          "[generators]") {
  for (int K : {1, 2, 3, 5}) {
    for (int M : {2 * K, 2 * K + 3, 20}) {
      const Schedule s = GenerateDualPipeV(K, M);
      for (RankId r = 0; r < K; ++r) {
        int overlapped = 0;
        for (const Action& a : s.programs[r]) overlapped += a.kind == ActionKind::kOverlapFB;
        INFO("K=" << K << " M=" << M << " r=" << r);
        CHECK(overlapped == 2 * (M - 2 * K + r + 1) - (r == K - 1 ? 1 : 0) + (K - r - 1));
      }
    }
  }
}

TEST_CASE("interleaved-zb defers r weight passes on rank r before its first W", "[generators]") {
  const int K = 4, M = 8, v = 2;
  const Schedule s = GenerateInterleavedZeroBubble(K, M, v);
  for (RankId r = 0; r < K; ++r) {
    int inputs_before_w = 0;
    for (const Action& a : s.programs[r]) {
      if (a.kind == ActionKind::kBackwardWeight) break;
      inputs_before_w += a.kind == ActionKind::kBackwardInput;
    }
    CHECK(inputs_before_w == r + 1);
  }
}

}  // namespace pplab::generators_test

namespace pplab::generators_test {

TEST_CASE("dualpipe states its rules: K even, M even and M >= 2K", "[generators][dualpipe]") {
  CHECK_THROWS_WITH(Generate("dualpipe", {3, 12, 0}), Catch::Contains("even number of ranks"));
  CHECK_THROWS_WITH(Generate("dualpipe", {1, 12, 0}), Catch::Contains("even number of ranks"));
  CHECK_THROWS_WITH(Generate("dualpipe", {4, 9, 0}), Catch::Contains("even M >= 2K = 8"));
  CHECK_THROWS_WITH(Generate("dualpipe", {4, 6, 0}), Catch::Contains("even M >= 2K = 8"));
  CHECK_THROWS_WITH(Generate("dualpipe", {4, 8, 1}), Catch::Contains("--virtual must be 2"));
  CHECK_NOTHROW(Generate("dualpipe", {4, 8, 0}));
}

TEST_CASE("dualpipe: two copies of K stages, one fed from each end with half the microbatches",
          "[generators][dualpipe]") {
  const int K = 4, M = 10;
  const Schedule s = GenerateDualPipe(K, M);
  CHECK(s.stages == 2 * K);
  CHECK(s.NumPipelines() == 2);
  CHECK(s.pipeline_starts == std::vector<StageId>{K});
  for (RankId r = 0; r < K; ++r) {
    // 2x parameters: each rank holds stage r of copy 0 and stage K-1-r of copy 1.
    CHECK(s.StagesOf(r) == std::vector<StageId>{r, 2 * K - 1 - r});
  }
  for (MicrobatchId m = 0; m < M; ++m) {
    INFO("microbatch " << m);
    CHECK(s.FirstStage(m) == (m < M / 2 ? 0 : K));
    CHECK(s.LastStage(m) == (m < M / 2 ? K - 1 : 2 * K - 1));
  }
  // Copy 1 enters at rank K-1: its first forward is there.
  CHECK(s.placement[K] == K - 1);
  CHECK(s.programs[K - 1].front() == Action{ActionKind::kForward, K, M / 2});
  CHECK(s.programs[0].front() == Action{ActionKind::kForward, 0, 0});
  // No message crosses from copy 0's last stage to copy 1's first.
  for (const Program& p : Lower(s).programs) {
    for (const Action& a : p) {
      CHECK_FALSE((a.kind == ActionKind::kSendF && a.stage == K - 1));
      CHECK_FALSE((a.kind == ActionKind::kRecvF && a.stage == K));
    }
  }
  // Each stage's gradients are complete after its own copy's M/2
  // microbatches: that is where REDUCE_GRAD goes, and it validates.
  const Schedule reduced = Lower(AddReduceGrad(s));
  CHECK(Validate(reduced).ok());
  StageCost c;
  c.forward = 1;
  c.backward = 2;
  CHECK_NOTHROW(Simulate(reduced, CostModel::Uniform(2 * K, c, {})));
  CHECK(s.MicrobatchesThrough(0) == M / 2);
  CHECK(s.MicrobatchesThrough(K) == M / 2);
  // Stage K+j is part j of the model's copy 1, the twin of stage j.
  CHECK(s.ModelStages() == K);
  for (StageId st = 0; st < 2 * K; ++st) {
    CHECK(s.PipelineOf(st) == (st < K ? 0 : 1));
    CHECK(s.ModelStage(st) == st % K);
  }
  Schedule uneven = s;
  uneven.pipeline_starts = {K - 1};
  CHECK(uneven.ModelStages() == 0);
  CHECK(GenerateDualPipeV(K, M).ModelStages() == 2 * K);
  // An action of a microbatch outside its copy is out of place.
  Schedule bad = s;
  bad.programs[0].push_back({ActionKind::kForward, 2 * K - 1, 0});
  CHECK_THROWS_WITH(CheckShape(bad), Catch::Contains("microbatch 0 runs through stages 0..3 only"));
}

TEST_CASE("dualpipe overlaps F and B in its steady phase like DualPipe's step 4 and 5", "[generators][dualpipe]") {
  // Per rank at position h = min(r, K-1-r) of n = K/2: 2(M/2 - 2n + h + 1) - [h = n-1] + (n-h-1).
  for (int K : {2, 4, 6, 8}) {
    for (int M : {2 * K, 2 * K + 4, 24}) {
      const Schedule s = GenerateDualPipe(K, M);
      const int n = K / 2;
      for (RankId r = 0; r < K; ++r) {
        const int h = std::min(r, K - 1 - r);
        int overlapped = 0;
        for (const Action& a : s.programs[r]) overlapped += a.kind == ActionKind::kOverlapFB;
        INFO("K=" << K << " M=" << M << " r=" << r);
        CHECK(overlapped == 2 * (M / 2 - 2 * n + h + 1) - (h == n - 1 ? 1 : 0) + (n - h - 1));
      }
    }
  }
}

}  // namespace pplab::generators_test
