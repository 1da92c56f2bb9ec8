#include "schedules/action.h"

#include <catch2/catch.hpp>

#include "schedules/error.h"

namespace pplab {

TEST_CASE("action text form round-trips for every kind", "[action]") {
  for (int k = 0; k < kNumActionKinds; ++k) {
    for (StageId s : {0, 3, 17}) {
      for (MicrobatchId m : {0, 9, 123}) {
        const Action a{static_cast<ActionKind>(k), s, m};
        const std::string text = FormatAction(a);
        INFO(text);
        CHECK(ParseAction(text) == a);
      }
    }
  }
}

TEST_CASE("action text form matches PyTorch pipelining's", "[action]") {
  CHECK(FormatAction({ActionKind::kForward, 2, 0}) == "2F0");
  CHECK(FormatAction({ActionKind::kSendF, 1, 3}) == "1SEND_F3");
  CHECK(FormatAction({ActionKind::kBackwardInput, 0, 2}) == "0I2");
  CHECK(FormatAction({ActionKind::kBackwardWeight, 0, 2}) == "0W2");
  CHECK(ParseAction(" 12RECV_B7 ") == Action{ActionKind::kRecvB, 12, 7});
}

TEST_CASE("bad action text is rejected with the text in the message", "[action]") {
  for (const char* bad : {"", "F0", "0F", "0X1", "0UNSHARD", "-1F0", "0F-1", "0 F 1", "0f1"}) {
    INFO(bad);
    CHECK_THROWS_AS(ParseAction(bad), Error);
  }
  CHECK_THROWS_WITH(ParseAction("0REDUCE_GRAD1"), Catch::Contains("REDUCE_GRAD"));
}

}  // namespace pplab
