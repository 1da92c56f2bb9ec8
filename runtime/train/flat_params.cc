#include "runtime/train/flat_params.h"

#include <torch/torch.h>

#include <set>

namespace pplab {

FlatBuffer FlattenParameters(const std::vector<std::pair<std::string, at::Tensor>>& params) {
  if (params.empty()) return {};
  const at::Tensor& first = params.front().second;
  std::set<const c10::StorageImpl*> storages;
  int64_t total = 0;
  for (const auto& [name, p] : params) {
    if (!p.defined() || p.scalar_type() != first.scalar_type() || p.device() != first.device() ||
        !storages.insert(p.storage().unsafeGetStorageImpl()).second) {
      return {};
    }
    total += p.numel();
  }
  torch::NoGradGuard no_grad;
  FlatBuffer flat;
  flat.values = torch::empty({total}, first.options().requires_grad(false));
  flat.grads = torch::zeros({total}, first.options().requires_grad(false));
  int64_t offset = 0;
  for (const auto& [name, p] : params) {
    const int64_t n = p.numel();
    at::Tensor value = flat.values.narrow(0, offset, n).view(p.sizes());
    at::Tensor grad = flat.grads.narrow(0, offset, n).view(p.sizes());
    value.copy_(p.detach());
    if (p.grad().defined()) grad.copy_(p.grad());
    // Same TensorImpl, new storage: every holder of `p` now reads the buffer.
    at::Tensor(p).set_data(value);
    at::Tensor(p).mutable_grad() = grad;
    flat.names.push_back(name);
    flat.offsets.push_back(offset);
    offset += n;
  }
  return flat;
}

std::vector<at::Tensor> GradientsOf(const FlatBuffer& flat,
                                    const std::vector<std::pair<std::string, at::Tensor>>& params) {
  if (flat.defined()) return {flat.grads};
  std::vector<at::Tensor> out;
  for (const auto& [name, p] : params) {
    if (p.grad().defined()) out.push_back(p.grad());
  }
  return out;
}

bool IsViewAt(const at::Tensor& view, const at::Tensor& flat, int64_t offset) {
  return view.defined() && flat.defined() && view.is_contiguous() &&
         view.storage().unsafeGetStorageImpl() == flat.storage().unsafeGetStorageImpl() &&
         view.storage_offset() == flat.storage_offset() + offset;
}

}  // namespace pplab
