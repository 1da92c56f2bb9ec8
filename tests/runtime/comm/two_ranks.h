// Two ranks of one process (two threads), connected by a Gloo process group
// over loopback, for tests of code that runs on every rank of a group.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <future>
#include <memory>

#include "runtime/comm/process_group.h"

namespace pplab {

// A loopback port free when asked (the store binds it right after).
inline int FreeLoopbackPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  ::close(fd);
  return ntohs(addr.sin_port);
}

// Runs `body(rank, group)` on two Gloo ranks at once, connected through the
// store at `port` (by default a free one, which rank 0 serves). Every wait
// of the group is bounded (20 s).
template <typename F>
void OnTwoRanks(F body, int port = FreeLoopbackPort()) {
  auto run = [&](RankId rank) {
    GroupOptions o;
    o.port = port;
    o.rank = rank;
    o.world_size = 2;
    o.timeout = std::chrono::milliseconds(20000);
    auto group = Connect(o);
    body(rank, group);
  };
  auto other = std::async(std::launch::async, run, 1);
  run(0);
  other.get();
}

}  // namespace pplab
