#include "runtime/comm/c10d_transport.h"

#include <torch/torch.h>

#include <algorithm>

#include "runtime/comm/c10d_group.h"
#include "runtime/comm/collectives.h"
#include "runtime/comm/device_wait.h"

namespace pplab {
namespace {

constexpr int kMaxTensors = 6;
// Each message owns 8 wire tags, one per tensor. Collectives use tags from
// 2^30 up (collectives.cc).
constexpr int64_t kTagsPerMessage = 8;
constexpr int64_t kFirstCollectiveTag = int64_t{1} << 30;

int WireTag(int64_t tag, int part) {
  if (tag < 0 || (tag + 1) * kTagsPerMessage > kFirstCollectiveTag)
    throw Error("c10d transport: message tag " + std::to_string(tag) + " out of range");
  return static_cast<int>(tag * kTagsPerMessage + part);
}

// A tensor as flat bytes, contiguous, on `device` (the send buffer).
at::Tensor AsBytes(const at::Tensor& t, const c10::Device& device) {
  return t.detach().to(device).contiguous().view({-1}).view(torch::kByte);
}

}  // namespace

struct C10dTransport::Pending {
  // One buffer (kept alive until its work completes) and one work per
  // tensor, and the spec.
  std::vector<std::vector<at::Tensor>> parts;
  std::vector<c10::intrusive_ptr<c10d::Work>> part_works;
  MessageSpec spec;
};

C10dTransport::C10dTransport(std::shared_ptr<ProcessGroupHandle> group, c10::Device device, RankId rank_offset,
                             std::optional<bool> per_direction, RankId rank_stride)
    : group_(std::move(group)), device_(device), rank_offset_(rank_offset), rank_stride_(rank_stride) {
  if (!per_direction.value_or(group_->backend == Backend::kNccl)) return;
  std::vector<RankId> everyone(static_cast<size_t>(group_->world_size));
  for (size_t r = 0; r < everyone.size(); ++r) everyone[r] = static_cast<RankId>(r);
  up_ = Subgroup(*group_, "p2p-up/", everyone, group_->timeout);
  down_ = Subgroup(*group_, "p2p-down/", everyone, group_->timeout);
}

ProcessGroupHandle& C10dTransport::Channel(RankId from, RankId to) const {
  if (!up_) return *group_;
  return from < to ? *up_ : *down_;
}

C10dTransport::~C10dTransport() = default;

RankId C10dTransport::Rank() const { return (group_->rank - rank_offset_) / rank_stride_; }

void C10dTransport::DropFinishedSends() {
  // isCompleted() does not block: Gloo's work reports its state, NCCL's
  // queries the CUDA event after the send (and ProcessGroupNCCL recorded the
  // buffers on its stream with the caching allocator, so even a buffer still
  // in use would not be reused early).
  const auto done = [](const c10::intrusive_ptr<c10d::Work>& w) {
    return !w || (w->isCompleted() && w->exception() == nullptr);
  };
  sends_.erase(std::remove_if(sends_.begin(), sends_.end(),
                              [&](const std::unique_ptr<Pending>& s) {
                                return std::all_of(s->part_works.begin(), s->part_works.end(), done);
                              }),
               sends_.end());
}

Transport::BufferRules C10dTransport::Buffers() const {
  BufferRules rules;
  rules.sends_freed_after_delivery = group_->backend == Backend::kNccl;
  // Across devices (Gloo from a GPU) the posted buffer is on the host, and
  // the stage's device gets its tensors at WaitRecv; a send copies to the
  // host (AsBytes).
  rules.receives_allocated_when_posted = group_->device == device_;
  rules.sends_view_tensors = group_->device == device_;
  return rules;
}

size_t C10dTransport::SendsInFlight() {
  DropFinishedSends();
  return sends_.size();
}

void C10dTransport::Send(RankId peer, int64_t tag, const TensorList& tensors) {
  if (static_cast<int>(tensors.size()) > kMaxTensors) throw Error("c10d transport: more than 6 tensors in a message");
  DropFinishedSends();
  auto pending = std::make_unique<Pending>();
  const std::string what = "sending message " + std::to_string(tag) + " to rank " + std::to_string(peer);
  for (size_t i = 0; i < tensors.size(); ++i) {
    pending->parts.push_back({AsBytes(tensors[i], group_->device)});
    Guard(what, [&] {
      pending->part_works.push_back(
          Channel(Rank(), peer)
              .group->send(pending->parts.back(), GroupRankOf(peer), WireTag(tag, static_cast<int>(i))));
    });
  }
  sends_.push_back(std::move(pending));
}

void C10dTransport::PostRecv(RankId peer, int64_t tag, const MessageSpec& spec) {
  const std::string what =
      "posting the receive of message " + std::to_string(tag) + " from rank " + std::to_string(peer);
  if (spec.empty() || static_cast<int>(spec.size()) > kMaxTensors) {
    throw Error(what + ": this transport needs the message's dtypes and shapes in advance, and has none");
  }
  auto pending = std::make_unique<Pending>();
  pending->spec = spec;
  for (size_t i = 0; i < spec.size(); ++i) {
    int64_t numel = 1;
    for (int64_t d : spec[i].shape) numel *= d;
    const int64_t nbytes = numel * static_cast<int64_t>(c10::elementSize(spec[i].dtype));
    pending->parts.push_back({torch::empty({nbytes}, torch::TensorOptions(torch::kByte).device(group_->device))});
    Guard(what, [&] {
      pending->part_works.push_back(
          Channel(peer, Rank())
              .group->recv(pending->parts.back(), GroupRankOf(peer), WireTag(tag, static_cast<int>(i))));
    });
  }
  receives_[{peer, tag}] = std::move(pending);
}

TensorList C10dTransport::WaitRecv(RankId peer, int64_t tag, std::chrono::milliseconds timeout) {
  const std::string what = "receiving message " + std::to_string(tag) + " from rank " + std::to_string(peer);
  auto it = receives_.find({peer, tag});
  if (it == receives_.end()) throw Error(what + ": no receive was posted with its shapes");
  std::unique_ptr<Pending> pending = std::move(it->second);
  receives_.erase(it);
  TensorList out;
  for (size_t i = 0; i < pending->parts.size(); ++i) {
    Wait(group_->backend, pending->part_works[i], timeout, what);
    const TensorSpec& spec = pending->spec[i];
    out.push_back(pending->parts[i][0].view(spec.dtype).view(spec.shape).to(device_));
  }
  return out;
}

void C10dTransport::Connect(const std::vector<RankId>& peers, std::chrono::milliseconds timeout) {
  if (!up_) return;
  const RankId me = Rank();
  // Every rank links at the same point of its run. NCCL's creation of a
  // pair's communicator waits for the peer with no bound, so first see every
  // rank arrive, through the store, within `timeout`: a peer that died or
  // hangs elsewhere is reported here instead.
  try {
    HostBarrier(*group_, timeout);
  } catch (const Error& e) {
    throw Error("rank " + std::to_string(me) + ": not every rank came to link its pipeline pairs within " +
                std::to_string(timeout.count() / 1000) + " s (--comm-timeout): " + e.what());
  }
  std::vector<RankId> todo;
  for (RankId p : peers) {
    if (p != me && connected_.count(p) == 0) todo.push_back(p);
  }
  // Pairs in (lower, higher) order: as every pair holds this rank, that is
  // the peers in ascending order.
  std::sort(todo.begin(), todo.end());
  todo.erase(std::unique(todo.begin(), todo.end()), todo.end());
  for (RankId p : todo) {
    for (const bool up : {true, false}) {
      ProcessGroupHandle& g = up ? *up_ : *down_;
      const bool sending = (me < p) == up;  // up: the lower rank sends; down: the higher one
      std::vector<at::Tensor> byte = {torch::zeros({1}, torch::TensorOptions(torch::kByte).device(g.device))};
      const std::string what = std::string("connecting to rank ") + std::to_string(p) + (up ? " (up)" : " (down)");
      c10::intrusive_ptr<c10d::Work> work;
      Guard(what,
            [&] { work = sending ? g.group->send(byte, GroupRankOf(p), 0) : g.group->recv(byte, GroupRankOf(p), 0); });
      Wait(g.backend, work, timeout, what);
    }
    // On NCCL the waits above only ordered the stream: see the byte arrive
    // before the first step, so a peer that never connects is named here.
    WaitForDevice(up_->device, timeout, "rank " + std::to_string(me) + " connecting to rank " + std::to_string(p));
    connected_.insert(p);
  }
}

void C10dTransport::WaitSends(std::chrono::milliseconds timeout) {
  for (const auto& s : sends_) {
    for (const auto& work : s->part_works) Wait(group_->backend, work, timeout, "sending");
  }
  // On NCCL a finished wait orders the current stream after the send, and
  // ProcessGroupNCCL records its buffers on its own stream with the caching
  // allocator, so dropping them here never frees memory a kernel still reads.
  sends_.clear();
}

Bytes WireBytes(const TensorList& tensors) {
  Bytes total = 0;
  for (const at::Tensor& t : tensors) total += static_cast<Bytes>(t.numel() * t.element_size());
  return total;
}

}  // namespace pplab
