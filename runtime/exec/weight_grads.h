// Weight gradients held back from a split backward's I pass to its W pass.
//
// Zero-bubble schedules split a stage's backward into I (the input's
// gradient, which the previous stage waits for) and W (the weights'
// gradients, which nothing waits for). The I pass runs the whole backward
// chain once; each matrix product whose forward was recorded for deferral
// (the Llama stages' projections, models/projections.h) computes its input's
// gradient there and hands the product for its weight's gradient, with the
// two tensors it needs (its input and its output's gradient), to a
// DeferredWeightGrads. W runs those products. I + W then cost what B costs,
// and between them the stage holds those tensors, not its whole graph.
//
// Which forward defers is decided when it runs (the executor knows then
// whether the microbatch's backward will be split): a DeferWeightGradsScope
// on the forward's thread names where its products go. The backward may run
// on another thread (the autograd engine's device thread on a GPU), so the
// products record it at the forward.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

namespace pplab {

class DeferredWeightGrads {
 public:
  // A piece of W in two parts: calling it starts what may run ahead of the
  // previous piece (a collective, such as the gather of an input under
  // sequence parallelism) and returns the rest.
  using Piece = std::function<std::function<void()>()>;
  void Add(Piece piece);
  // A piece with nothing to start ahead.
  void Add(std::function<void()> work);
  // Runs the held pieces in the order they were added, and drops them: each
  // piece is started before the previous one finishes, so its collective
  // runs while the previous piece's products do.
  void Run();
  size_t Size() const;

 private:
  mutable std::mutex mu_;
  std::vector<Piece> work_;
};

// While alive, the forwards run on this thread defer their weight gradients
// to `to` (none when null); scopes nest.
class DeferWeightGradsScope {
 public:
  explicit DeferWeightGradsScope(std::shared_ptr<DeferredWeightGrads> to);
  ~DeferWeightGradsScope();
  DeferWeightGradsScope(const DeferWeightGradsScope&) = delete;
  DeferWeightGradsScope& operator=(const DeferWeightGradsScope&) = delete;
  // Where this thread's forwards defer to now, or null.
  static std::shared_ptr<DeferredWeightGrads> Current();

 private:
  std::shared_ptr<DeferredWeightGrads> previous_;
};

}  // namespace pplab
