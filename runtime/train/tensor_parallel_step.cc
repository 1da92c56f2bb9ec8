#include "runtime/train/tensor_parallel_step.h"

#include <torch/torch.h>

#include "runtime/comm/collectives.h"
#include "schedules/error.h"

namespace pplab {

void SumPartialGradients(const std::vector<at::Tensor>& params, ProcessGroupHandle& group,
                         std::chrono::milliseconds timeout) {
  std::vector<at::Tensor> grads;
  for (const at::Tensor& p : params) {
    if (p.grad().defined()) grads.push_back(p.grad());
  }
  if (grads.empty()) return;
  std::vector<at::Tensor> flat_parts;
  for (const at::Tensor& g : grads) flat_parts.push_back(g.reshape({-1}));
  at::Tensor flat = torch::cat(flat_parts);
  AllReduceSumInPlace(group, flat, timeout);
  torch::NoGradGuard no_grad;
  int64_t offset = 0;
  for (at::Tensor& g : grads) {
    g.copy_(flat.narrow(0, offset, g.numel()).view_as(g));
    offset += g.numel();
  }
}

TensorMap GatherShares(ProcessGroupHandle& group, SplitDim split_dim, std::chrono::milliseconds timeout) {
  return [&group, split_dim = std::move(split_dim), timeout](const std::string& name, const at::Tensor& t) {
    const int dim = split_dim(name);
    return dim < 0 ? t : AllGatherAlong(group, t.contiguous(), dim, timeout);
  };
}

TensorMap CutShare(int rank, int size, SplitDim split_dim) {
  return [rank, size, split_dim = std::move(split_dim)](const std::string& name, const at::Tensor& whole) {
    const int dim = split_dim(name);
    if (dim < 0) return whole;
    if (dim >= whole.dim() || whole.size(dim) % size != 0) {
      throw Error("parameter " + name + ": dimension " + std::to_string(dim) + " does not split into " +
                  std::to_string(size) + " shares");
    }
    const int64_t n = whole.size(dim) / size;
    return whole.narrow(dim, rank * n, n).contiguous();
  };
}

}  // namespace pplab
