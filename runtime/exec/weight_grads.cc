#include "runtime/exec/weight_grads.h"

#include <utility>

namespace pplab {

namespace {
thread_local std::shared_ptr<DeferredWeightGrads> current;
}  // namespace

void DeferredWeightGrads::Add(Piece piece) {
  std::lock_guard<std::mutex> lock(mu_);
  work_.push_back(std::move(piece));
}

void DeferredWeightGrads::Add(std::function<void()> work) {
  Add(Piece([work = std::move(work)]() { return work; }));
}

void DeferredWeightGrads::Run() {
  std::vector<Piece> work;
  {
    std::lock_guard<std::mutex> lock(mu_);
    work.swap(work_);
  }
  // One piece ahead: piece i + 1 starts before piece i finishes. Each piece
  // drops what it holds as soon as it has run.
  std::function<void()> next = work.empty() ? nullptr : work[0]();
  for (size_t i = 0; i < work.size(); ++i) {
    std::function<void()> current = std::move(next);
    work[i] = nullptr;
    next = i + 1 < work.size() ? work[i + 1]() : nullptr;
    current();
  }
}

size_t DeferredWeightGrads::Size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return work_.size();
}

DeferWeightGradsScope::DeferWeightGradsScope(std::shared_ptr<DeferredWeightGrads> to)
    : previous_(std::exchange(current, std::move(to))) {}

DeferWeightGradsScope::~DeferWeightGradsScope() { current = std::move(previous_); }

std::shared_ptr<DeferredWeightGrads> DeferWeightGradsScope::Current() { return current; }

}  // namespace pplab
