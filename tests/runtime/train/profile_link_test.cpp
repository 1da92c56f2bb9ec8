// The link fit and the profile's peers (runtime/train/profile_link.cc).
#include "runtime/train/profile_link.h"

#include <catch2/catch.hpp>

namespace pplab::profile_link_test {

TEST_CASE("the profile links a rank to its stages' neighbours and its two ring neighbours", "[profile]") {
  using V = std::vector<RankId>;
  CHECK(ProfilePeers({0, 0}, 0) == V{});   // one rank
  CHECK(ProfilePeers({0, 1}, 0) == V{1});  // K=2: the ring is the pair
  CHECK(ProfilePeers({0, 1}, 1) == V{0});
  CHECK(ProfilePeers({0, 1, 2}, 0) == V{1, 2});  // K=3: 2 -> 0 closes the ring
  CHECK(ProfilePeers({0, 1, 2}, 2) == V{0, 1});
  CHECK(ProfilePeers({0, 1, 2, 3}, 1) == V{0, 2});  // K=4: neighbours only
  CHECK(ProfilePeers({0, 1, 2, 3}, 3) == V{0, 2});
  CHECK(ProfilePeers({0, 1, 2, 0, 1, 2}, 0) == V{1, 2});  // interleaved, v=2
  CHECK(ProfilePeers({0, 1, 2, 2, 1, 0}, 2) == V{0, 1});  // V-shape: stage 2 -> 3 stays on rank 2
}

TEST_CASE("the link fit recovers latency and bandwidth from exact samples", "[profile]") {
  LinkProfile link;
  // 0.05 ms + bytes / (2 GB/s = 2e6 bytes per ms)
  for (Bytes b : {Bytes{513}, Bytes{1} << 20, Bytes{16} << 20}) link.samples.push_back({b, 0.05 + b / 2e6});
  FitLink(link);
  CHECK(link.latency_ms == Approx(0.05).epsilon(1e-6));
  CHECK(link.bandwidth_gbps == Approx(2.0).epsilon(1e-6));
}

TEST_CASE("the default link is one measured link, its latency and bandwidth together", "[profile]") {
  // Messages up to 1 MB (1e6 bytes): at 1 GB/s a byte takes 1e-6 ms.
  const auto link = [](RankId from, double latency_ms, double gbps) {
    LinkProfile l;
    l.from = from, l.to = from + 1;
    l.samples = {{1000, 0}, {1000000, 0}};
    l.latency_ms = latency_ms, l.bandwidth_gbps = gbps;
    return l;
  };
  // Times for 1 MB: 0.01 + 1 = 1.01, 1 + 0.01 = 1.01 (tie: the first), 0.5 + 0.1 = 0.6.
  // Apart, the medians were latency 0.5 and bandwidth 10: 0.6 ms, no link's.
  const std::vector<LinkProfile> three = {link(0, 0.01, 1), link(1, 1.0, 100), link(2, 0.5, 10)};
  const LinkProfile* median = MedianLink(three);
  REQUIRE(median != nullptr);
  CHECK(median->from == 0);
  CHECK(median->latency_ms == 0.01);
  CHECK(median->bandwidth_gbps == 1);
  // No bandwidth limit: the latency alone; with two links, the slower.
  const std::vector<LinkProfile> two = {link(0, 0.3, 0), link(1, 0.2, 1)};
  CHECK(MedianLink(two)->from == 1);  // 0.2 + 1 = 1.2 against 0.3
  CHECK(MedianLink({}) == nullptr);
}

}  // namespace pplab::profile_link_test
