#include "runtime/comm/fake_transport.h"

#include <ATen/ATen.h>

#include "schedules/error.h"

namespace pplab {

void FakeNetwork::Put(RankId from, RankId to, int64_t tag, TensorList tensors) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    boxes_[{from, to, tag}] = std::move(tensors);
  }
  arrived_.notify_all();
}

TensorList FakeNetwork::Take(RankId from, RankId to, int64_t tag, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  const auto key = std::make_tuple(from, to, tag);
  if (!arrived_.wait_for(lock, timeout, [&] { return boxes_.count(key) > 0; })) {
    throw Error("rank " + std::to_string(to) + ": timed out after " + std::to_string(timeout.count()) +
                " ms waiting for message " + std::to_string(tag) + " from rank " + std::to_string(from));
  }
  TensorList out = std::move(boxes_[key]);
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
