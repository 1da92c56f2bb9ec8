#include "runtime/train/step_work.h"

#include <torch/torch.h>

#include "runtime/comm/collectives.h"

namespace pplab {

StageBucket::StageBucket(const std::vector<at::Tensor>& grads, ProcessGroupHandle& dp_group) {
  if (grads.empty()) return;
  // (sum of numel,) on the group's device: the CPU for Gloo, the GPU for NCCL.
  const c10::Device device = GroupDevice(dp_group);
  if (grads.size() == 1 && grads.front().dim() == 1 && grads.front().is_contiguous() &&
      grads.front().device() == device) {
    bucket_ = grads.front();  // a flat gradient buffer: summed in place
  } else {
    grads_ = grads;
    std::vector<at::Tensor> flat;
    for (const at::Tensor& g : grads_) flat.push_back(g.reshape({-1}).to(device));
    bucket_ = torch::cat(flat);
  }
  pending_ = StartAllReduceSum(dp_group, bucket_);
}

StageBucket::~StageBucket() = default;

void StageBucket::Finish(std::chrono::milliseconds timeout) {
  if (pending_ == nullptr) return;
  WaitCollective(*pending_, timeout);
  int64_t offset = 0;
  for (at::Tensor& g : grads_) {
    g.copy_(bucket_.narrow(0, offset, g.numel()).view_as(g));
    offset += g.numel();
  }
  pending_ = nullptr;
}

at::Tensor GradSquares(const std::vector<at::Tensor>& grads) {
  std::vector<at::Tensor> squares;
  for (const at::Tensor& g : grads) squares.push_back(g.norm().to(torch::kFloat64).pow(2));
  return squares.empty() ? torch::zeros({}, torch::kFloat64) : torch::stack(squares).sum();
}

void ScaleGradients(const std::vector<at::Tensor>& grads, double scale) {
  if (!grads.empty()) at::_foreach_mul_(grads, scale);
}

}  // namespace pplab
