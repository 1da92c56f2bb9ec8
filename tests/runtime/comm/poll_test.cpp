// PollUntil: the bounded wait behind the GPU's read-backs (device_wait.h).
#include "runtime/comm/poll.h"

#include <catch2/catch.hpp>
#include <chrono>

namespace pplab {

TEST_CASE("PollUntil returns once the condition holds, asking until then", "[comm][poll]") {
  int asked = 0;
  CHECK(PollUntil([&asked] { return ++asked == 5; }, std::chrono::milliseconds(60000)));
  CHECK(asked == 5);
}

TEST_CASE("PollUntil asks a ready condition once, even with no time to wait", "[comm][poll]") {
  int asked = 0;
  CHECK(PollUntil([&asked] { return ++asked > 0; }, std::chrono::milliseconds(0)));
  CHECK(asked == 1);
}

TEST_CASE("PollUntil gives up after its timeout and says so", "[comm][poll]") {
  int asked = 0;
  const auto start = std::chrono::steady_clock::now();
  CHECK_FALSE(PollUntil([&asked] { return ++asked < 0; }, std::chrono::milliseconds(30)));
  // It waited at least the timeout (a lower bound only: no timing upper bound
  // on a shared machine) and kept asking meanwhile.
  CHECK(std::chrono::steady_clock::now() - start >= std::chrono::milliseconds(30));
  CHECK(asked > 1);
}

}  // namespace pplab
