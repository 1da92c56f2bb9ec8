#include "runtime/comm/collectives.h"

#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <thread>

#include "runtime/comm/c10d_group.h"
#include "runtime/comm/device_wait.h"

namespace pplab {

#ifdef PPLAB_WITH_NCCL
bool WaitForCudaStream(const c10::Device& device, std::chrono::milliseconds timeout);  // cuda_wait.cc
#endif

void WaitForDevice(const c10::Device& device, std::chrono::milliseconds timeout, const std::string& what) {
  if (!device.is_cuda()) return;
#ifdef PPLAB_WITH_NCCL
  if (WaitForCudaStream(device, timeout)) return;
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%g", static_cast<double>(timeout.count()) / 1000.0);
  throw Error(what + ": the GPU has not finished the queued work after " + seconds +
              " s (--comm-timeout): a message from or to another rank never completed");
#else
  (void)timeout;
  throw Error(what + ": device " + device.str() + " needs a CUDA build of pplab");
#endif
}

at::Tensor HostCopy(const at::Tensor& tensor, std::chrono::milliseconds timeout, const std::string& what) {
  WaitForDevice(tensor.device(), timeout, what);
  return tensor.cpu();
}

namespace {

std::string Who(const ProcessGroupHandle& group, const char* what) {
  return "rank " + std::to_string(group.rank) + " in " + what;
}

// Waits for a collective's work as Wait does, then, with Gloo, until the
// group's worker thread has let go of it: that thread marks the work done
// and only then drops its own reference, which holds the work's tensors.
// Until it does, a tensor the caller frees stays allocated, for a few
// microseconds or longer, and the bytes a rank holds after an action depend
// on the thread's timing (profile --tp read one activation-sized buffer
// more or less from run to run). `work` is the caller's only reference;
// the wait for the thread is bounded (it is memory, not correctness).
void WaitReleased(Backend backend, const c10::intrusive_ptr<c10d::Work>& work, std::chrono::milliseconds timeout,
                  const std::string& what) {
  try {
    Wait(backend, work, timeout, what);
  } catch (const Error& e) {
    // Gloo's timeout of a collective names no peer, and the wait cannot tell
    // which rank is late: say where to look (a rank stopped with SIGSTOP
    // read as "rank 1 in gradient all-reduce: Operation timed out!").
    const std::string text = e.what();
    if (text.find("imed out") == std::string::npos) throw;
    throw Error(text +
                " (a collective ends when every rank of its group has joined it: a rank that stopped, hung or fell "
                "behind keeps the others waiting; a launched run names a rank that did not exit)");
  }
  if (backend != Backend::kGloo) return;
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(20);
  while (work.use_count() > 1 && std::chrono::steady_clock::now() < until) std::this_thread::yield();
}

}  // namespace

double AllReduceSum(ProcessGroupHandle& group, double value, std::chrono::milliseconds timeout) {
  std::vector<at::Tensor> t = {torch::full({1}, value, torch::TensorOptions(torch::kFloat64).device(group.device))};
  WaitReleased(group.backend, group.group->allreduce(t), timeout, Who(group, "all-reduce"));
  return HostCopy(t[0], timeout, Who(group, "all-reduce"))[0].item<double>();
}

at::Tensor AllGatherAlong(ProcessGroupHandle& group, const at::Tensor& tensor, int64_t dim,
                          std::chrono::milliseconds timeout) {
  return AllGatherCat(group, tensor.to(group.device), dim, timeout).to(tensor.device());
}

struct PendingCollective {
  std::vector<at::Tensor> tensors;  // kept alive until the work completes
  c10::intrusive_ptr<c10d::Work> work;
  Backend backend = Backend::kGloo;
  std::string what;
  std::function<at::Tensor()> result;  // once the work is done
};

std::shared_ptr<PendingCollective> StartAllReduceSum(ProcessGroupHandle& group, const at::Tensor& tensor) {
  auto pending = std::make_shared<PendingCollective>();
  pending->tensors = {tensor};
  pending->what = Who(group, "gradient all-reduce");
  pending->backend = group.backend;
  pending->result = [tensor] { return tensor; };
  Guard(pending->what, [&] { pending->work = group.group->allreduce(pending->tensors); });
  return pending;
}

std::shared_ptr<PendingCollective> StartAllGatherCat(ProcessGroupHandle& group, const at::Tensor& tensor, int64_t dim) {
  auto pending = std::make_shared<PendingCollective>();
  pending->what = Who(group, "all-gather");
  pending->backend = group.backend;
  std::vector<at::Tensor> in = {tensor.contiguous()};
  auto out = std::make_shared<std::vector<std::vector<at::Tensor>>>(1);
  for (int r = 0; r < GroupSize(group); ++r) (*out)[0].push_back(torch::empty_like(in[0]));
  pending->tensors = {in[0]};
  for (const at::Tensor& t : (*out)[0]) pending->tensors.push_back(t);
  pending->result = [out, dim] { return torch::cat((*out)[0], dim); };
  Guard(pending->what, [&] { pending->work = group.group->allgather(*out, in); });
  return pending;
}

std::shared_ptr<PendingCollective> StartReduceScatterAlong(ProcessGroupHandle& group, const at::Tensor& tensor,
                                                           int64_t dim) {
  const int size = GroupSize(group);
  if (tensor.size(dim) % size != 0) {
    throw Error(Who(group, "reduce-scatter") + ": dimension " + std::to_string(dim) + " of size " +
                std::to_string(tensor.size(dim)) + " does not split over " + std::to_string(size) + " ranks");
  }
  const int64_t n = tensor.size(dim) / size;
  if (group.backend != Backend::kNccl) {
    std::shared_ptr<PendingCollective> pending = StartAllReduceSum(group, tensor.clone(at::MemoryFormat::Contiguous));
    pending->what = Who(group, "reduce-scatter");
    const at::Tensor sum = pending->tensors[0];
    const int64_t first = GroupRank(group) * n;
    pending->result = [sum, dim, first, n] { return sum.narrow(dim, first, n).contiguous(); };
    return pending;
  }
  auto pending = std::make_shared<PendingCollective>();
  pending->what = Who(group, "reduce-scatter");
  pending->backend = group.backend;
  std::vector<std::vector<at::Tensor>> in(1);
  for (int r = 0; r < size; ++r) in[0].push_back(tensor.narrow(dim, r * n, n).contiguous());
  std::vector<at::Tensor> out = {torch::empty_like(in[0][0])};
  pending->tensors = in[0];
  pending->tensors.push_back(out[0]);
  pending->result = [piece = out[0]] { return piece; };
  Guard(pending->what, [&] { pending->work = group.group->reduce_scatter(out, in); });
  return pending;
}

void WaitCollective(PendingCollective& pending, std::chrono::milliseconds timeout) {
  WaitReleased(pending.backend, pending.work, timeout, pending.what);
}

at::Tensor WaitResult(PendingCollective& pending, std::chrono::milliseconds timeout) {
  WaitCollective(pending, timeout);
  return pending.result();
}

at::Tensor AllGatherCat(ProcessGroupHandle& group, const at::Tensor& tensor, int64_t dim,
                        std::chrono::milliseconds timeout) {
  return WaitResult(*StartAllGatherCat(group, tensor, dim), timeout);
}

at::Tensor ReduceScatterAlong(ProcessGroupHandle& group, const at::Tensor& tensor, int64_t dim,
                              std::chrono::milliseconds timeout) {
  return WaitResult(*StartReduceScatterAlong(group, tensor, dim), timeout);
}

void AllReduceSumInPlace(ProcessGroupHandle& group, at::Tensor& tensor, std::chrono::milliseconds timeout) {
  std::vector<at::Tensor> t = {tensor};
  WaitReleased(group.backend, group.group->allreduce(t), timeout, Who(group, "all-reduce"));
}

void Barrier(ProcessGroupHandle& group, std::chrono::milliseconds timeout) {
  if (group.backend == Backend::kNccl) {
    // ProcessGroupNCCL's barrier work synchronizes the host with the stream
    // when waited for, with no bound; an all-reduce of one number read back
    // through a polled copy is the same rendezvous, bounded by `timeout`.
    AllReduceSum(group, 0.0, timeout);
    return;
  }
  WaitReleased(group.backend, group.group->barrier(), timeout, Who(group, "barrier"));
}

void HostBarrier(ProcessGroupHandle& group, std::chrono::milliseconds timeout) {
  const std::string key = group.store_prefix + "pplab-host-barrier/" + std::to_string(group.host_barriers++);
  Guard(Who(group, "host barrier") + " (" + std::to_string(timeout.count()) + " ms)", [&] {
    // The last to arrive opens it; everyone waits for the open key.
    if (group.store->add(key, 1) == group.world_size) group.store->set(key + "/open", std::vector<uint8_t>{1});
    group.store->wait({key + "/open"}, timeout);
  });
}

std::vector<std::vector<int64_t>> GatherToRank0(ProcessGroupHandle& group, const std::vector<int64_t>& mine,
                                                std::chrono::milliseconds timeout) {
  const std::vector<std::vector<int64_t>> lengths = AllGatherWords(group, {static_cast<int64_t>(mine.size())}, timeout);
  int64_t longest = 0;
  for (const auto& n : lengths) longest = std::max(longest, n.at(0));
  std::vector<int64_t> padded = mine;
  padded.resize(static_cast<size_t>(longest), 0);
  std::vector<std::vector<int64_t>> all = AllGatherWords(group, padded, timeout);
  if (group.rank != 0) return {};
  for (size_t r = 0; r < all.size(); ++r) all[r].resize(static_cast<size_t>(lengths[r].at(0)));
  return all;
}

std::vector<std::vector<int64_t>> AllGatherWords(ProcessGroupHandle& group, const std::vector<int64_t>& mine,
                                                 std::chrono::milliseconds timeout) {
  const int64_t n = static_cast<int64_t>(mine.size());
  // Each rank fills its own row of zeros; the sum is the whole table.
  at::Tensor table = torch::zeros({group.world_size, std::max<int64_t>(n, 1)}, torch::kLong);
  for (int64_t i = 0; i < n; ++i) table[group.rank][i] = mine[i];
  at::Tensor on_group = table.to(group.device);
  AllReduceSumInPlace(group, on_group, timeout);
  const at::Tensor host = HostCopy(on_group, timeout, Who(group, "all-gather")).contiguous();
  const int64_t* p = host.data_ptr<int64_t>();
  std::vector<std::vector<int64_t>> all;
  for (RankId r = 0; r < group.world_size; ++r) all.emplace_back(p + r * host.size(1), p + r * host.size(1) + n);
  return all;
}

}  // namespace pplab
