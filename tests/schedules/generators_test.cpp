#include "schedules/generators.h"

#include <catch2/catch.hpp>

#include "schedules/error.h"
#include "schedules/lowering.h"
#include "schedules/validate.h"
#include "tests/generator_rules.h"

namespace pplab {
TEST_CASE("every generator is valid after lowering over K 1..8, M 1..16, v 1..3", "[generators]") {
  int checked = 0;
  for (const GeneratorInfo& g : Generators()) {
    for (int K = 1; K <= 8; ++K) {
      for (int M = 1; M <= 16; ++M) {
        for (int v = 1; v <= 3; ++v) {
          if (!FamilyAccepts(g, K, M, v)) continue;
          const Schedule compute = Generate(g.name, {K, M, v});
          REQUIRE_FALSE(compute.HasComm());
          REQUIRE(compute.stages == K * v);
          REQUIRE(compute.NumComputeActions() == static_cast<size_t>(K * v * M * (g.split_backward ? 3 : 2)));
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

}  // namespace pplab
