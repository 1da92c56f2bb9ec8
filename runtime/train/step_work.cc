#include "runtime/train/step_work.h"

#include <torch/torch.h>

#include "runtime/comm/collectives.h"

namespace pplab {

StageBucket::StageBucket(Stage& stage, ProcessGroupHandle& dp_group) {
  for (auto& [name, p] : stage.NamedParameters()) {
    if (p.grad().defined()) grads_.push_back(p.grad());
  }
  if (grads_.empty()) return;
  std::vector<at::Tensor> flat;
  // (sum of numel,) on the group's device: the CPU for Gloo, the GPU for NCCL.
  for (const at::Tensor& g : grads_) flat.push_back(g.reshape({-1}).to(GroupDevice(dp_group)));
  bucket_ = torch::cat(flat);
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

at::Tensor GradSquares(const std::vector<at::Tensor>& params) {
  std::vector<at::Tensor> squares;
  for (const at::Tensor& p : params) {
    if (p.grad().defined()) squares.push_back(p.grad().to(torch::kFloat64).pow(2).sum());
  }
  return squares.empty() ? torch::zeros({}, torch::kFloat64) : torch::stack(squares).sum();
}

void ScaleGradients(const std::vector<at::Tensor>& params, double scale) {
  std::vector<at::Tensor> grads;
  for (const at::Tensor& p : params) {
    if (p.grad().defined()) grads.push_back(p.grad());
  }
  if (!grads.empty()) at::_foreach_mul_(grads, scale);
}

}  // namespace pplab
