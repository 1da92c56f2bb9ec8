// FakeTransport: the in-process transport of the runtime tests, and its rule
// that a channel's messages pair in order, as over NCCL.
#include "runtime/comm/fake_transport.h"

#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <memory>

namespace pplab::fake_transport_test {

constexpr std::chrono::milliseconds kWait{2000};

TEST_CASE("a channel's receives pair with its sends in the order both were issued, whatever the tags", "[comm][fake]") {
  auto network = std::make_shared<FakeNetwork>();
  FakeTransport zero(0, network), one(1, network);
  SECTION("the same order: each receive gets its message") {
    one.PostRecv(0, 7, {});
    one.PostRecv(0, 9, {});
    zero.Send(1, 7, {torch::full({1}, 7.0)});
    zero.Send(1, 9, {torch::full({1}, 9.0)});
    // Waited for in another order than posted: still each its own.
    CHECK(one.WaitRecv(0, 9, kWait).at(0).item<double>() == 9.0);
    CHECK(one.WaitRecv(0, 7, kWait).at(0).item<double>() == 7.0);
    CHECK(network->Pending() == 0);
  }
  SECTION("crossed: the first receive posted is for the second message sent, which NCCL would mix up") {
    one.PostRecv(0, 9, {});
    one.PostRecv(0, 7, {});
    zero.Send(1, 7, {torch::full({1}, 7.0)});
    zero.Send(1, 9, {torch::full({1}, 9.0)});
    CHECK_THROWS_WITH(one.WaitRecv(0, 9, kWait),
                      Catch::Contains("receive 0 of that channel, but message 0 rank 0 sent on it is 7") &&
                          Catch::Contains("NCCL pairs a channel's messages in order"));
  }
  SECTION("channels are apart: another peer's messages take no place in this one") {
    FakeTransport two(2, network);
    one.PostRecv(2, 5, {});
    one.PostRecv(0, 7, {});
    zero.Send(1, 7, {torch::full({1}, 7.0)});
    two.Send(1, 5, {torch::full({1}, 5.0)});
    CHECK(one.WaitRecv(0, 7, kWait).at(0).item<double>() == 7.0);
    CHECK(one.WaitRecv(2, 5, kWait).at(0).item<double>() == 5.0);
  }
}

}  // namespace pplab::fake_transport_test
