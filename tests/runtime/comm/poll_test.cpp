// PollUntil: the bounded wait behind the GPU's read-backs (device_wait.h).
#include "runtime/comm/poll.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <thread>
#include <vector>

namespace pplab::poll_test {

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

}  // namespace pplab::poll_test

namespace pplab::poll_test {

TEST_CASE("PollUntil spins for its first 2 ms, then sleeps 10 us longer each look up to 100 us", "[comm][poll]") {
  using std::chrono::microseconds;
  // Spinning: no sleep, whatever the last pause was.
  CHECK(NextPollPause(microseconds(0), microseconds(0)) == microseconds(0));
  CHECK(NextPollPause(microseconds(2000), microseconds(0)) == microseconds(0));
  // Past the spin: the pauses grow 10, 20, ... and stay at 100 us.
  microseconds pause(0);
  std::vector<long> pauses;
  for (int look = 0; look < 14; ++look) {
    pause = NextPollPause(microseconds(2001 + look * 1000), pause);
    pauses.push_back(static_cast<long>(pause.count()));
  }
  CHECK(pauses == std::vector<long>{10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 100, 100, 100, 100});
  // A wait of a minute still looks every 100 us.
  CHECK(NextPollPause(std::chrono::seconds(60), microseconds(100)) == microseconds(100));
}

}  // namespace pplab::poll_test

namespace pplab::poll_test {

TEST_CASE("a worker's polling thread sleeps with a 1 us timer slack, not Linux's 50 us", "[comm][poll]") {
  long before = -1, after = -1;
  std::thread t([&] {
    before = ::prctl(PR_GET_TIMERSLACK, 0UL, 0UL, 0UL, 0UL);
    UseFineTimerSlack();
    after = ::prctl(PR_GET_TIMERSLACK, 0UL, 0UL, 0UL, 0UL);
  });
  t.join();
  INFO("timer slack before: " << before << " ns");
  CHECK(after == 1000);
}

}  // namespace pplab::poll_test
