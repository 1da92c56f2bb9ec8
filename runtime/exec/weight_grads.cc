#include "runtime/exec/weight_grads.h"

#include <utility>

namespace pplab {

namespace {
thread_local std::shared_ptr<DeferredWeightGrads> current;
}  // namespace

void DeferredWeightGrads::Add(std::function<void()> work) {
  std::lock_guard<std::mutex> lock(mu_);
  work_.push_back(std::move(work));
}

void DeferredWeightGrads::Run() {
  std::vector<std::function<void()>> work;
  {
    std::lock_guard<std::mutex> lock(mu_);
    work.swap(work_);
  }
  // Each piece drops what it holds as soon as it has run.
  for (auto& w : work) {
    w();
    w = nullptr;
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
