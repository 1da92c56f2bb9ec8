#include "runtime/comm/fake_transport.h"

#include <ATen/ATen.h>

#include "schedules/error.h"

namespace pplab {

bool Matches(const TensorList& tensors, const MessageSpec& spec) {
  if (tensors.size() != spec.size()) return false;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].scalar_type() != spec[i].dtype || tensors[i].sizes().vec() != spec[i].shape) return false;
  }
  return true;
}

void FakeNetwork::Put(RankId from, RankId to, int64_t tag, TensorList tensors) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    boxes_[{from, to, tag}] = std::move(tensors);
    channels_[{from, to}].sent.push_back(tag);
  }
  arrived_.notify_all();
}

void FakeNetwork::Post(RankId from, RankId to, int64_t tag) {
  std::lock_guard<std::mutex> lock(mu_);
  Channel& c = channels_[{from, to}];
  c.waiting[tag].push_back(c.posted++);
}

TensorList FakeNetwork::Take(RankId from, RankId to, int64_t tag, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  Channel& c = channels_[{from, to}];
  std::deque<size_t>& mine = c.waiting[tag];
  if (mine.empty()) mine.push_back(c.posted++);  // a receive not posted ahead is posted now
  const size_t place = mine.front();
  const auto key = std::make_tuple(from, to, tag);
  if (!arrived_.wait_for(lock, timeout, [&] { return c.sent.size() > place; })) {
    throw Error("rank " + std::to_string(to) + ": timed out after " + std::to_string(timeout.count()) +
                " ms waiting for message " + std::to_string(tag) + " from rank " + std::to_string(from));
  }
  if (c.sent[place] != tag) {
    throw Error("rank " + std::to_string(to) + ": its receive of message " + std::to_string(tag) + " from rank " +
                std::to_string(from) + " is receive " + std::to_string(place) + " of that channel, but message " +
                std::to_string(place) + " rank " + std::to_string(from) + " sent on it is " +
                std::to_string(c.sent[place]) + ": NCCL pairs a channel's messages in order, not by tag");
  }
  mine.pop_front();
  TensorList out = std::move(boxes_.at(key));
  boxes_.erase(key);
  return out;
}

size_t FakeNetwork::Pending() {
  std::lock_guard<std::mutex> lock(mu_);
  return boxes_.size();
}

void FakeTransport::Send(RankId peer, int64_t tag, const TensorList& tensors) {
  TensorList copies;
  for (const at::Tensor& t : tensors) copies.push_back(t.detach().clone());
  network_->Put(rank_, peer, tag, std::move(copies));
}

void FakeTransport::PostRecv(RankId peer, int64_t tag, const MessageSpec& spec) {
  network_->Post(peer, rank_, tag);
  if (!spec.empty()) specs_[{peer, tag}] = spec;
}

TensorList FakeTransport::WaitRecv(RankId peer, int64_t tag, std::chrono::milliseconds timeout) {
  TensorList got = network_->Take(peer, rank_, tag, timeout);
  const auto it = specs_.find({peer, tag});
  if (it == specs_.end()) return got;
  const MessageSpec spec = std::move(it->second);
  specs_.erase(it);
  if (!Matches(got, spec)) {
    throw Error("rank " + std::to_string(rank_) + ": message " + std::to_string(tag) + " from rank " +
                std::to_string(peer) + " does not have the dtypes and shapes its receive was posted with");
  }
  return got;
}

}  // namespace pplab
