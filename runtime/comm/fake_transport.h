// In-process transport for tests: K ranks (threads) share one FakeNetwork.
#pragma once

#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <utility>
#include <vector>

#include "runtime/comm/transport.h"

namespace pplab {

// Mailboxes keyed by (from, to, tag), which also hold every channel (from,
// to) to NCCL's rule: NCCL ignores tags and pairs a channel's receives with
// its sends in the order each side issued them, so the k-th receive posted
// on a channel must be for the k-th message sent on it. Gloo matches by tag
// and forgives another order; this network does not, so that code tested
// here also runs over NCCL. Thread-safe.
class FakeNetwork {
 public:
  void Put(RankId from, RankId to, int64_t tag, TensorList tensors);
  // Records that `to` posted its receive of message `tag` from `from`: its
  // place in the channel's order.
  void Post(RankId from, RankId to, int64_t tag);
  // Takes the message, waiting at most `timeout`; throws pplab::Error on
  // timeout, or when the message sent at this receive's place in the channel
  // (its post, or now if it was not posted) has another tag.
  TensorList Take(RankId from, RankId to, int64_t tag, std::chrono::milliseconds timeout);
  // Number of messages sent and not yet taken.
  size_t Pending();

 private:
  struct Channel {
    std::vector<int64_t> sent;                      // tags in send order
    size_t posted = 0;                              // receives posted so far
    std::map<int64_t, std::deque<size_t>> waiting;  // tag -> places of its posted, untaken receives
  };
  std::mutex mu_;
  std::condition_variable arrived_;
  std::map<std::tuple<RankId, RankId, int64_t>, TensorList> boxes_;
  std::map<std::pair<RankId, RankId>, Channel> channels_;
};

class FakeTransport : public Transport {
 public:
  FakeTransport(RankId rank, std::shared_ptr<FakeNetwork> network) : rank_(rank), network_(std::move(network)) {}
  RankId Rank() const override { return rank_; }
  // Clones the tensors, so that the receiver's are its own, as a real
  // transport's receive buffer is.
  void Send(RankId peer, int64_t tag, const TensorList& tensors) override;
  // Remembers `spec`, which WaitRecv checks the message against, and the
  // receive's place in the channel (FakeNetwork::Post).
  void PostRecv(RankId peer, int64_t tag, const MessageSpec& spec) override;
  TensorList WaitRecv(RankId peer, int64_t tag, std::chrono::milliseconds timeout) override;
  void WaitSends(std::chrono::milliseconds) override {}

 private:
  RankId rank_;
  std::shared_ptr<FakeNetwork> network_;
  std::map<std::pair<RankId, int64_t>, MessageSpec> specs_;
};

}  // namespace pplab
