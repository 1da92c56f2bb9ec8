#define USE_C10D_GLOO 1
#include "runtime/c10d_transport.h"

#include <torch/torch.h>

#include <algorithm>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "runtime/launcher.h"
#include "schedules/error.h"

namespace pplab {

struct ProcessGroupHandle {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group;
  RankId rank = 0;
  int world_size = 1;
};

namespace {

constexpr int64_t kHeaderWords = 64;
constexpr int kMaxTensors = 6, kMaxDims = 6;
// Tags at and above this one belong to the collectives below, not to
// pipeline messages (whose tags are 2 * MessageTag and 2 * MessageTag + 1).
constexpr int kGatherTag = 1 << 30;

// Runs `post` (which starts or waits for c10d operations), turning its
// failure (e.g. a peer already gone) into pplab::Error with `what` and the
// first line of the c10 message (the rest is a stack trace).
template <typename F>
void Guard(const std::string& what, F post) {
  try {
    post();
  } catch (const std::exception& e) {
    const std::string message = e.what();
    throw Error(what + ": " + message.substr(0, message.find('\n')));
  }
}

// Waits for a c10d work item, at most `timeout`.
void Wait(const c10::intrusive_ptr<c10d::Work>& work, std::chrono::milliseconds timeout, const std::string& what) {
  bool done = false;
  Guard(what, [&] { done = work->wait(timeout); });
  if (!done) throw Error(what + ": timed out after " + std::to_string(timeout.count()) + " ms");
}

int WireTag(int64_t tag, int part) {
  if (tag < 0 || 2 * tag + 1 >= kGatherTag)
    throw Error("c10d transport: message tag " + std::to_string(tag) + " out of range");
  return static_cast<int>(2 * tag + part);
}

}  // namespace

struct C10dTransport::Pending {
  std::vector<at::Tensor> header, payload;  // kept alive until the work completes
  c10::intrusive_ptr<c10d::Work> header_work, payload_work;
};

std::shared_ptr<ProcessGroupHandle> ConnectGloo(const std::string& host, int port, RankId rank, int world_size,
                                                std::chrono::milliseconds timeout) {
  auto handle = std::make_shared<ProcessGroupHandle>();
  handle->rank = rank;
  handle->world_size = world_size;
  const std::string where = "rank " + std::to_string(rank) + ": connecting to " + host + ":" + std::to_string(port);
  Guard(where + " failed", [&] {
    c10d::TCPStoreOptions options;
    options.port = static_cast<std::uint16_t>(port);
    options.isServer = rank == 0;
    options.numWorkers = world_size;
    options.waitWorkers = true;
    options.timeout = timeout;
    handle->store = c10::make_intrusive<c10d::TCPStore>(host, options);
    auto pg_options = c10d::ProcessGroupGloo::Options::create(timeout);
    pg_options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(host));
    handle->group = c10::make_intrusive<c10d::ProcessGroupGloo>(handle->store, rank, world_size, pg_options);
  });
  return handle;
}

C10dTransport::C10dTransport(std::shared_ptr<ProcessGroupHandle> group, c10::Device device, RankId rank_offset)
    : group_(std::move(group)), device_(device), rank_offset_(rank_offset) {}

C10dTransport::~C10dTransport() = default;

RankId C10dTransport::Rank() const { return group_->rank - rank_offset_; }

void C10dTransport::Send(RankId peer, int64_t tag, const TensorList& tensors) {
  if (static_cast<int>(tensors.size()) > kMaxTensors) throw Error("c10d transport: more than 6 tensors in a message");
  auto pending = std::make_unique<Pending>();
  at::Tensor header = torch::zeros({kHeaderWords}, torch::kLong);
  auto h = header.accessor<int64_t, 1>();
  std::vector<at::Tensor> bytes;
  int64_t total = 0, w = 2;
  h[0] = static_cast<int64_t>(tensors.size());
  for (const at::Tensor& t : tensors) {
    if (t.dim() > kMaxDims) throw Error("c10d transport: tensor with more than 6 dimensions");
    h[w++] = static_cast<int64_t>(t.scalar_type());
    h[w++] = t.dim();
    for (int64_t d = 0; d < kMaxDims; ++d) h[w++] = d < t.dim() ? t.size(d) : 0;
    // (B,T,...) any dtype -> flat bytes on the host
    at::Tensor flat = t.detach().to(torch::kCPU).contiguous().view({-1}).view(torch::kByte);
    total += flat.numel();
    bytes.push_back(flat);
  }
  h[1] = total;
  pending->header = {header};
  pending->payload = {bytes.empty() ? torch::zeros({0}, torch::kByte) : torch::cat(bytes)};
  Guard("sending message " + std::to_string(tag) + " to rank " + std::to_string(peer), [&] {
    pending->header_work = group_->group->send(pending->header, rank_offset_ + peer, WireTag(tag, 0));
    pending->payload_work = group_->group->send(pending->payload, rank_offset_ + peer, WireTag(tag, 1));
  });
  sends_.push_back(std::move(pending));
}

void C10dTransport::PostRecv(RankId peer, int64_t tag) {
  auto pending = std::make_unique<Pending>();
  pending->header = {torch::zeros({kHeaderWords}, torch::kLong)};
  Guard("posting the receive of message " + std::to_string(tag) + " from rank " + std::to_string(peer),
        [&] { pending->header_work = group_->group->recv(pending->header, rank_offset_ + peer, WireTag(tag, 0)); });
  receives_[{peer, tag}] = std::move(pending);
}

void C10dTransport::PostPayload(RankId peer, int64_t tag, Pending& pending) {
  auto h = pending.header[0].accessor<int64_t, 1>();
  const int64_t n = h[0], total = h[1];
  if (n < 0 || n > kMaxTensors || total < 0) {
    throw Error("receiving message " + std::to_string(tag) + " from rank " + std::to_string(peer) +
                ": malformed header");
  }
  pending.payload = {torch::empty({total}, torch::kByte)};
  Guard("receiving message " + std::to_string(tag) + " from rank " + std::to_string(peer),
        [&] { pending.payload_work = group_->group->recv(pending.payload, rank_offset_ + peer, WireTag(tag, 1)); });
}

TensorList C10dTransport::WaitRecv(RankId peer, int64_t tag, std::chrono::milliseconds timeout) {
  auto it = receives_.find({peer, tag});
  if (it == receives_.end()) PostRecv(peer, tag), it = receives_.find({peer, tag});
  std::unique_ptr<Pending> pending = std::move(it->second);
  receives_.erase(it);
  const std::string what = "receiving message " + std::to_string(tag) + " from rank " + std::to_string(peer);
  Wait(pending->header_work, timeout, what);
  PostPayload(peer, tag, *pending);
  Wait(pending->payload_work, timeout, what);
  auto h = pending->header[0].accessor<int64_t, 1>();
  const int64_t n = h[0], total = h[1];
  TensorList out;
  int64_t offset = 0, w = 2;
  for (int64_t i = 0; i < n; ++i) {
    const auto dtype = static_cast<c10::ScalarType>(h[w++]);
    const int64_t dims = h[w++];
    std::vector<int64_t> shape(h.data() + w, h.data() + w + dims);
    w += kMaxDims;
    int64_t numel = 1;
    for (int64_t d : shape) numel *= d;
    const int64_t nbytes = numel * static_cast<int64_t>(c10::elementSize(dtype));
    if (offset + nbytes > total) throw Error(what + ": payload shorter than its header says");
    at::Tensor t = pending->payload[0].narrow(0, offset, nbytes).clone().view(dtype).view(shape);
    out.push_back(t.to(device_));
    offset += nbytes;
  }
  return out;
}

void C10dTransport::WaitSends(std::chrono::milliseconds timeout) {
  for (const auto& s : sends_) {
    Wait(s->header_work, timeout, "sending");
    Wait(s->payload_work, timeout, "sending");
  }
  sends_.clear();
}

Bytes WireBytes(const TensorList& tensors) {
  Bytes total = kHeaderWords * static_cast<Bytes>(sizeof(int64_t));
  for (const at::Tensor& t : tensors) total += static_cast<Bytes>(t.numel() * t.element_size());
  return total;
}

RankId GroupRank(const ProcessGroupHandle& group) { return group.rank; }

int GroupSize(const ProcessGroupHandle& group) { return group.world_size; }

double AllReduceSum(ProcessGroupHandle& group, double value, std::chrono::milliseconds timeout) {
  std::vector<at::Tensor> t = {torch::full({1}, value, torch::kFloat64)};
  Wait(group.group->allreduce(t), timeout, "rank " + std::to_string(group.rank) + " in all-reduce");
  return t[0].item<double>();
}

struct PendingCollective {
  std::vector<at::Tensor> tensors;  // kept alive until the work completes
  c10::intrusive_ptr<c10d::Work> work;
  std::string what;
};

std::shared_ptr<PendingCollective> StartAllReduceSum(ProcessGroupHandle& group, const at::Tensor& tensor) {
  auto pending = std::make_shared<PendingCollective>();
  pending->tensors = {tensor};
  pending->what = "rank " + std::to_string(group.rank) + " in gradient all-reduce";
  Guard(pending->what, [&] { pending->work = group.group->allreduce(pending->tensors); });
  return pending;
}

void WaitCollective(PendingCollective& pending, std::chrono::milliseconds timeout) {
  Wait(pending.work, timeout, pending.what);
}

void AllReduceSumInPlace(ProcessGroupHandle& group, at::Tensor& tensor, std::chrono::milliseconds timeout) {
  std::vector<at::Tensor> t = {tensor};
  Wait(group.group->allreduce(t), timeout, "rank " + std::to_string(group.rank) + " in gradient all-reduce");
}

std::shared_ptr<ProcessGroupHandle> ConnectGlooFromEnv(RankId rank, int world_size, std::chrono::milliseconds timeout) {
  const char* addr = std::getenv("MASTER_ADDR");
  return ConnectGloo(addr != nullptr ? addr : "127.0.0.1", EnvInt("MASTER_PORT", 29500), rank, world_size, timeout);
}

std::shared_ptr<ProcessGroupHandle> Subgroup(const ProcessGroupHandle& world, const std::string& name,
                                             const std::vector<RankId>& members, std::chrono::milliseconds timeout) {
  auto handle = std::make_shared<ProcessGroupHandle>();
  const auto me = std::find(members.begin(), members.end(), world.rank);
  if (me == members.end())
    throw Error("subgroup " + name + ": rank " + std::to_string(world.rank) + " is not a member");
  handle->rank = static_cast<RankId>(me - members.begin());
  handle->world_size = static_cast<int>(members.size());
  handle->store = world.store;
  Guard("rank " + std::to_string(world.rank) + ": creating group " + name + " failed", [&] {
    auto store = c10::make_intrusive<c10d::PrefixStore>(name, world.store);
    auto options = c10d::ProcessGroupGloo::Options::create(timeout);
    options->devices = world.group->getOptions()->devices;
    handle->group = c10::make_intrusive<c10d::ProcessGroupGloo>(store, handle->rank, handle->world_size, options);
  });
  return handle;
}

void Barrier(ProcessGroupHandle& group, std::chrono::milliseconds timeout) {
  Wait(group.group->barrier(), timeout, "rank " + std::to_string(group.rank) + " in barrier");
}

std::vector<std::vector<int64_t>> GatherToRank0(ProcessGroupHandle& group, const std::vector<int64_t>& mine,
                                                std::chrono::milliseconds timeout) {
  std::vector<std::vector<int64_t>> all;
  if (group.rank != 0) {
    std::vector<at::Tensor> size = {torch::full({1}, static_cast<int64_t>(mine.size()), torch::kLong)};
    std::vector<at::Tensor> data = {torch::tensor(mine.empty() ? std::vector<int64_t>{0} : mine, torch::kLong)};
    Wait(group.group->send(size, 0, kGatherTag), timeout, "rank " + std::to_string(group.rank) + " sending to rank 0");
    Wait(group.group->send(data, 0, kGatherTag + 1), timeout,
         "rank " + std::to_string(group.rank) + " sending to rank 0");
    return all;
  }
  all.push_back(mine);
  for (RankId r = 1; r < group.world_size; ++r) {
    const std::string what = "rank 0 gathering from rank " + std::to_string(r);
    std::vector<at::Tensor> size = {torch::zeros({1}, torch::kLong)};
    Wait(group.group->recv(size, r, kGatherTag), timeout, what);
    const int64_t n = size[0].item<int64_t>();
    std::vector<at::Tensor> data = {torch::zeros({std::max<int64_t>(n, 1)}, torch::kLong)};
    Wait(group.group->recv(data, r, kGatherTag + 1), timeout, what);
    const int64_t* p = data[0].data_ptr<int64_t>();
    all.emplace_back(p, p + n);
  }
  return all;
}

}  // namespace pplab
