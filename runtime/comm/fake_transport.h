// In-process transport for tests: K ranks (threads) share one FakeNetwork.
#pragma once

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include "runtime/comm/transport.h"

namespace pplab {

// Mailboxes keyed by (from, to, tag). Thread-safe.
class FakeNetwork {
 public:
  void Put(RankId from, RankId to, int64_t tag, TensorList tensors);
  // Takes the message, waiting at most `timeout`; throws pplab::Error on timeout.
  TensorList Take(RankId from, RankId to, int64_t tag, std::chrono::milliseconds timeout);
  // Number of messages sent and not yet taken.
  size_t Pending();

 private:
  std::mutex mu_;
  std::condition_variable arrived_;
  std::map<std::tuple<RankId, RankId, int64_t>, TensorList> boxes_;
};

class FakeTransport : public Transport {
 public:
  FakeTransport(RankId rank, std::shared_ptr<FakeNetwork> network) : rank_(rank), network_(std::move(network)) {}
  RankId Rank() const override { return rank_; }
  // Clones the tensors, as a real transport copies them out.
  void Send(RankId peer, int64_t tag, const TensorList& tensors) override;
  // Remembers `spec`; WaitRecv checks the message against it.
  void PostRecv(RankId peer, int64_t tag, const MessageSpec& spec) override;
  TensorList WaitRecv(RankId peer, int64_t tag, std::chrono::milliseconds timeout) override;
  void WaitSends(std::chrono::milliseconds) override {}

 private:
  RankId rank_;
  std::shared_ptr<FakeNetwork> network_;
  std::map<std::pair<RankId, int64_t>, MessageSpec> specs_;
};

}  // namespace pplab
