#include "schedules/action.h"

#include <catch2/catch.hpp>
#include <set>

#include "schedules/action_kinds.h"
#include "schedules/error.h"

namespace pplab::action_test {

TEST_CASE("action text form round-trips for every kind", "[action]") {
  for (int k = 0; k < kNumActionKinds; ++k) {
    const ActionKind kind = static_cast<ActionKind>(k);
    if (kind == ActionKind::kOverlapFB) continue;  // below
    for (StageId s : {0, 3, 17}) {
      for (MicrobatchId m : {0, 9, 123}) {
        const Action a{kind, s, InfoOf(kind).has_microbatch ? m : 0};
        const std::string text = FormatAction(a);
        INFO(text);
        CHECK(ParseAction(text) == a);
      }
    }
  }
  for (ActionKind b : {ActionKind::kBackward, ActionKind::kBackwardInput}) {
    const Action a = OverlapFB(0, 7, b, 7, 3);
    INFO(FormatAction(a));
    CHECK(ParseAction(FormatAction(a)) == a);
  }
}

TEST_CASE("the kind table has one row per kind, in enum order, with distinct names and letters", "[action]") {
  REQUIRE(KindTable().size() == static_cast<size_t>(kNumActionKinds));
  std::set<std::string> names;
  for (int k = 0; k < kNumActionKinds; ++k) {
    CHECK(static_cast<int>(KindTable()[k].kind) == k);
    names.insert(KindTable()[k].name);
  }
  CHECK(names.size() == static_cast<size_t>(kNumActionKinds));
  CHECK(IsCompute(ActionKind::kOverlapFB));
  CHECK_FALSE(IsComm(ActionKind::kReduceGrad));
  CHECK(IsPerStage(ActionKind::kUnshard));
  CHECK(OccupiesRank(ActionKind::kReduceGrad));
  CHECK_FALSE(OccupiesRank(ActionKind::kSendF));
}

TEST_CASE("action text form matches PyTorch pipelining's", "[action]") {
  CHECK(FormatAction({ActionKind::kForward, 2, 0}) == "2F0");
  CHECK(FormatAction({ActionKind::kSendF, 1, 3}) == "1SEND_F3");
  CHECK(FormatAction({ActionKind::kBackwardInput, 0, 2}) == "0I2");
  CHECK(FormatAction({ActionKind::kBackwardWeight, 0, 2}) == "0W2");
  CHECK(FormatAction({ActionKind::kReduceGrad, 3, 0}) == "3REDUCE_GRAD");
  CHECK(FormatAction({ActionKind::kUnshard, 0, 0}) == "0UNSHARD");
  CHECK(FormatAction(OverlapFB(0, 7, ActionKind::kBackward, 7, 3)) == "(0F7;7B3)OVERLAP_F_B");
  CHECK(ParseAction(" 12RECV_B7 ") == Action{ActionKind::kRecvB, 12, 7});
  CHECK(ParseAction("(1F2; 6B0)OVERLAP_F_B") == OverlapFB(1, 2, ActionKind::kBackward, 6, 0));
  CHECK(EventName(OverlapFB(0, 7, ActionKind::kBackward, 7, 3)) == "OVERLAP_F_B F s0 mb7 + B s7 mb3");
  CHECK(EventName({ActionKind::kReduceGrad, 2, 0}) == "REDUCE_GRAD s2");
}

TEST_CASE("bad action text is rejected with the text in the message", "[action]") {
  for (const char* bad : {"", "F0", "0F", "0X1", "-1F0", "0F-1", "0 F 1", "0f1", "0UNSHARD1"}) {
    INFO(bad);
    CHECK_THROWS_AS(ParseAction(bad), Error);
  }
  CHECK_THROWS_WITH(ParseAction("0REDUCE_GRAD1"), Catch::Contains("REDUCE_GRAD is per stage and takes no microbatch"));
  CHECK_THROWS_WITH(ParseAction("0FOO1"), Catch::Contains("unknown action kind 'FOO'"));
  CHECK_THROWS_WITH(ParseAction("0OVERLAP_F_B1"), Catch::Contains("OVERLAP_F_B names its two parts"));
  // A kind with a microbatch written without one, and ids past 9 digits.
  CHECK_THROWS_WITH(ParseAction("0F"), "bad action '0F': F takes a microbatch (write 0F0 for microbatch 0)");
  CHECK_THROWS_WITH(ParseAction("3SEND_F"), Catch::Contains("SEND_F takes a microbatch (write 3SEND_F0"));
  CHECK_THROWS_WITH(ParseAction("(0F;1B0)OVERLAP_F_B"), Catch::Contains("F takes a microbatch"));
  for (const char* big : {"0F2147483647", "0F4294967295", "4294967296F0"}) {
    CHECK_THROWS_WITH(ParseAction(big), Catch::Contains("a stage or microbatch id of more than 9 digits"));
  }
}

TEST_CASE("malformed composites are rejected, each with what is wrong", "[action]") {
  CHECK_THROWS_WITH(ParseAction("(0F7;7B3"), Catch::Contains("without a closing ')'"));
  CHECK_THROWS_WITH(ParseAction("(0F7;7B3)OVERLAP"), Catch::Contains("unknown composite kind 'OVERLAP'"));
  CHECK_THROWS_WITH(ParseAction("(0F7)OVERLAP_F_B"), Catch::Contains("exactly two parts"));
  CHECK_THROWS_WITH(ParseAction("(0F7;7B3;1F1)OVERLAP_F_B"), Catch::Contains("exactly two parts"));
  CHECK_THROWS_WITH(ParseAction("(7B3;0F7)OVERLAP_F_B"), Catch::Contains("a forward then a B or I"));
  CHECK_THROWS_WITH(ParseAction("(0F7;7W3)OVERLAP_F_B"), Catch::Contains("a forward then a B or I"));
  CHECK_THROWS_WITH(ParseAction("(0F7;7Q3)OVERLAP_F_B"), Catch::Contains("unknown action kind 'Q'"));
}

}  // namespace pplab::action_test
