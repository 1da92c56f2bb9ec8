// Step batches from token rows (runtime/train/batches.cc): the replica's
// share, the microbatches, padding and the targets a prompt's bit masks,
// worked by hand.
#include "runtime/train/batches.h"

#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <vector>

namespace pplab::batches_test {
namespace {

constexpr int32_t kBit = int32_t{1} << 30;

// Two rows of seq_len 4 + 1; PAD is 0. Row 0's first two tokens and row
// 1's second are a prompt's (they carry the bit).
const std::vector<std::vector<int32_t>> kRows = {{5 | kBit, 6 | kBit, 7, 8, 0}, {2, 9 | kBit, 10, 3, 0}};

StepBatch Batch(int replica, int replicas, int microbatches, int32_t bit) {
  return BatchFromRows([](int64_t r, int32_t* out) { std::copy(kRows[r].begin(), kRows[r].end(), out); }, 2, 4,
                       microbatches, replica, replicas, /*pad=*/0, bit);
}

std::vector<int64_t> Values(const at::Tensor& t) {
  const at::Tensor c = t.contiguous().view({-1}).to(torch::kLong);
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

using V = std::vector<int64_t>;

}  // namespace

TEST_CASE("a prompt's tokens are inputs without the bit and never targets, and the loss scale counts the rest",
          "[batches]") {
  const StepBatch b = Batch(0, 1, 2, kBit);
  REQUIRE(b.microbatches.size() == 2);
  CHECK(Values(b.microbatches[0].inputs[0]) == V{5, 6, 7, 8});
  CHECK(Values(b.microbatches[0].inputs[1]) == V{1, 1, 1, 1});  // attention mask: no PAD among the inputs
  CHECK(Values(b.microbatches[0].targets) == V{0, 7, 8, 0});    // 6 was the prompt's; the last is PAD
  CHECK(Values(b.microbatches[1].inputs[0]) == V{2, 9, 10, 3});
  CHECK(Values(b.microbatches[1].targets) == V{0, 10, 3, 0});
  CHECK(b.loss_scale == 1.0 / 4);  // 7, 8, 10, 3
  // Replica 1 of 2 takes row 1; the scale stays the global batch's.
  const StepBatch r1 = Batch(1, 2, 1, kBit);
  REQUIRE(r1.microbatches.size() == 1);
  CHECK(Values(r1.microbatches[0].inputs[0]) == V{2, 9, 10, 3});
  CHECK(Values(r1.microbatches[0].targets) == V{0, 10, 3, 0});
  CHECK(r1.loss_scale == 1.0 / 4);
}

TEST_CASE("without a no-loss bit, rows are tokens as they are and PAD targets alone are skipped", "[batches]") {
  const StepBatch b = Batch(0, 1, 1, 0);
  REQUIRE(b.microbatches.size() == 1);
  CHECK(Values(b.microbatches[0].inputs[0]) == V{5 | kBit, 6 | kBit, 7, 8, 2, 9 | kBit, 10, 3});
  CHECK(Values(b.microbatches[0].targets) == V{6 | kBit, 7, 8, 0, 9 | kBit, 10, 3, 0});
  CHECK(b.loss_scale == 1.0 / 6);
}

TEST_CASE("the attention mask hides only what follows a row's last token, and a PAD id before it is a token",
          "[batches]") {
  // PAD is 0. Row 0 ends in two PADs; row 1 holds a PAD between tokens and one at its end.
  const std::vector<std::vector<int32_t>> rows = {{5, 6, 7, 0, 0, 0}, {5, 0, 7, 8, 0, 9}};
  const StepBatch b = BatchFromRows([&](int64_t r, int32_t* out) { std::copy(rows[r].begin(), rows[r].end(), out); }, 2,
                                    5, 1, 0, 1, /*pad=*/0);
  REQUIRE(b.microbatches.size() == 1);
  CHECK(Values(b.microbatches[0].inputs[1]) == V{1, 1, 1, 0, 0, 1, 1, 1, 1, 0});
  // The inner PAD's target (row 1's second) and every PAD target are skipped by the loss.
  CHECK(Values(b.microbatches[0].targets) == V{6, 7, 0, 0, 0, 0, 7, 8, 0, 9});
  CHECK(b.loss_scale == 1.0 / 5);  // 6, 7, 7, 8, 9
}

}  // namespace pplab::batches_test
