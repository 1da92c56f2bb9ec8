// Collectives over a process group (runtime/comm/process_group.h), the same
// calls on Gloo and NCCL. Tensors passed in must live on the group's device
// (GroupDevice); the scalar forms move their value there and back. Every
// wait is bounded by `timeout` and throws pplab::Error naming the rank.
#pragma once

#include <ATen/core/Tensor.h>

#include <chrono>
#include <memory>
#include <vector>

#include "runtime/comm/process_group.h"

namespace pplab {

// Sum of `value` over all ranks (one host round trip: not for the hot path).
double AllReduceSum(ProcessGroupHandle& group, double value, std::chrono::milliseconds timeout);
// Sums `tensor` in place over all ranks of `group`.
void AllReduceSumInPlace(ProcessGroupHandle& group, at::Tensor& tensor, std::chrono::milliseconds timeout);

// Every rank's `tensor` (all of one shape), put side by side along
// dimension `dim` in rank order, on every rank, on `tensor`'s device
// wherever the group's is: AllGatherCat with the moves around it. For
// checkpoints and tests.
at::Tensor AllGatherAlong(ProcessGroupHandle& group, const at::Tensor& tensor, int64_t dim,
                          std::chrono::milliseconds timeout);

// The hot-path forms, for sequence parallelism: an all-gather of every
// rank's `tensor` (one shape on all) joined along `dim` in rank order, and a
// reduce-scatter, the sum over ranks cut along `dim` into GroupSize equal
// pieces, of which this rank gets its own. `tensor` lives on the group's
// device. On NCCL each is its collective (one communicator with the
// all-reduce's); Gloo, which has no reduce-scatter in every LibTorch,
// all-reduces a copy and keeps its piece.
at::Tensor AllGatherCat(ProcessGroupHandle& group, const at::Tensor& tensor, int64_t dim,
                        std::chrono::milliseconds timeout);
at::Tensor ReduceScatterAlong(ProcessGroupHandle& group, const at::Tensor& tensor, int64_t dim,
                              std::chrono::milliseconds timeout);

// An all-reduce started and not yet waited for (collectives.cc).
struct PendingCollective;
// Starts summing `tensor` (a gradient) in place over all ranks and returns at once: Gloo
// works in its own threads, NCCL on its own stream, so it overlaps what the
// caller computes next. Every rank must start the group's collectives in the
// same order.
std::shared_ptr<PendingCollective> StartAllReduceSum(ProcessGroupHandle& group, const at::Tensor& tensor);
// Waits for a started all-reduce, at most `timeout`. On NCCL this orders the
// current CUDA stream after it and does not block the host.
void WaitCollective(PendingCollective& pending, std::chrono::milliseconds timeout);

// AllGatherCat and ReduceScatterAlong started, to overlap what the caller
// computes next as StartAllReduceSum does; WaitResult waits as
// WaitCollective and gives what the blocking form returns. Every rank must
// start the group's collectives in the same order.
std::shared_ptr<PendingCollective> StartAllGatherCat(ProcessGroupHandle& group, const at::Tensor& tensor, int64_t dim);
std::shared_ptr<PendingCollective> StartReduceScatterAlong(ProcessGroupHandle& group, const at::Tensor& tensor,
                                                           int64_t dim);
// For StartAllReduceSum, the summed tensor itself.
at::Tensor WaitResult(PendingCollective& pending, std::chrono::milliseconds timeout);

// Waits until every rank arrives. On NCCL an all-reduce of one number read
// back: ranks leave it within the poll's spin of each other (the trainer
// aligns its clocks on it), but its kernel spins on the GPU while it waits.
void Barrier(ProcessGroupHandle& group, std::chrono::milliseconds timeout);
// Waits until every rank arrives, through the group's store alone: no GPU
// kernel, no communicator. For ranks that wait while another one times its
// work on a GPU they share, and for leaving together at the end (once each
// rank has read its last collective's result, no peer still needs its
// bytes, and its communicators may go). Ranks may leave it a store poll
// apart (a FileStore looks every 10 ms): not for aligning clocks.
void HostBarrier(ProcessGroupHandle& group, std::chrono::milliseconds timeout);
// Rank 0 gets every rank's int64 vector (others get an empty result).
// Through two all-reduces of the group (the lengths, then a ranks x longest
// table), so that on NCCL it creates no communicator of its own.
std::vector<std::vector<int64_t>> GatherToRank0(ProcessGroupHandle& group, const std::vector<int64_t>& mine,
                                                std::chrono::milliseconds timeout);
// Every rank gets every rank's int64 vector, by rank; all ranks must pass
// vectors of one length (one all-reduce of a ranks x length table: for a
// few words at start-up, not for the hot path).
std::vector<std::vector<int64_t>> AllGatherWords(ProcessGroupHandle& group, const std::vector<int64_t>& mine,
                                                 std::chrono::milliseconds timeout);

}  // namespace pplab
