// For the tests of autocast's weight casts: which node of an output's graph
// feeds a weight's gradient accumulator.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <set>
#include <vector>

namespace pplab {

// The node of `output`'s graph that feeds `weight`'s gradient accumulator:
// under autocast, its cast of the weight (ToCopyBackward); null when none does.
inline const torch::autograd::Node* CastNodeOf(const at::Tensor& output, const at::Tensor& weight) {
  const std::shared_ptr<torch::autograd::Node> accumulator = torch::autograd::impl::grad_accumulator(weight);
  std::vector<torch::autograd::Node*> todo = {output.grad_fn().get()};
  std::set<torch::autograd::Node*> seen;
  while (!todo.empty()) {
    torch::autograd::Node* node = todo.back();
    todo.pop_back();
    if (node == nullptr || !seen.insert(node).second) continue;
    for (const torch::autograd::Edge& e : node->next_edges()) {
      if (e.function == accumulator) return node;
      todo.push_back(e.function.get());
    }
  }
  return nullptr;
}

}  // namespace pplab
