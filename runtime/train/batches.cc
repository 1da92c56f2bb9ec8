#include "runtime/train/batches.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "schedules/error.h"

namespace pplab {
namespace {

void CheckDivisible(int batch_size, int microbatches, int replicas) {
  if (microbatches < 1 || replicas < 1 || batch_size % (microbatches * replicas) != 0) {
    throw Error("--batch-size " + std::to_string(batch_size) + " is not divisible by " +
                (replicas > 1 ? "--dp " + std::to_string(replicas) + " x " : std::string()) + "--microbatches " +
                std::to_string(microbatches));
  }
}

// rows (G, L+1) int64 -> this replica's microbatches; `targets_all` (G, L)
// is rows[:, 1:] with some targets made `pad`.
StepBatch Split(const at::Tensor& rows, const at::Tensor& targets_all, int seq_len, int microbatches, int replica,
                int replicas, int32_t pad) {
  const int64_t batch_size = rows.size(0);
  const int64_t share = batch_size / replicas;
  const double counted = targets_all.ne(pad).sum().item<double>();
  auto inputs = rows.narrow(0, replica * share, share).narrow(1, 0, seq_len).chunk(microbatches);  // (b, L) each
  auto targets = targets_all.narrow(0, replica * share, share).chunk(microbatches);                // (b, L) each
  StepBatch batch;
  for (int m = 0; m < microbatches; ++m) {
    auto x = inputs[m].contiguous();  // (b, L)
    // Padding is what follows a row's last token that is not `pad` (a PAD
    // id before it is a token, its target ignored as any PAD target is):
    // the mask (b, L) is 1 up to that token, 0 after.
    const at::Tensor mask = x.ne(pad).to(torch::kLong).flip({1}).cumsum(1).gt(0).flip({1}).to(torch::kLong);
    batch.microbatches.push_back({{x, mask}, targets[m].contiguous()});
  }
  // A batch of nothing but padding has no loss to average; 1 keeps it finite.
  batch.loss_scale = counted > 0 ? 1.0 / counted : 1.0;
  batch.learned_tokens = counted;
  return batch;
}

}  // namespace

StepBatch BatchFromRows(const RowFn& row_fn, int batch_size, int seq_len, int microbatches, int replica, int replicas,
                        int32_t pad, int32_t no_loss_bit) {
  CheckDivisible(batch_size, microbatches, replicas);
  at::Tensor rows = torch::empty({batch_size, seq_len + 1}, torch::kInt);  // (G, L+1)
  for (int64_t r = 0; r < batch_size; ++r) row_fn(r, rows[r].data_ptr<int32_t>());
  const at::Tensor no_loss = rows.bitwise_and(no_loss_bit).ne(0);                                        // (G, L+1)
  const at::Tensor ids = rows.bitwise_and(~no_loss_bit).to(torch::kLong);                                // (G, L+1)
  const at::Tensor targets = ids.narrow(1, 1, seq_len).masked_fill(no_loss.narrow(1, 1, seq_len), pad);  // (G, L)
  return Split(ids, targets, seq_len, microbatches, replica, replicas, pad);
}

StepBatch SyntheticBatch(uint64_t seed, int step, int batch_size, int seq_len, int vocab_size, int microbatches,
                         int replica, int replicas) {
  CheckDivisible(batch_size, microbatches, replicas);
  auto gen = at::detail::createCPUGenerator(seed * 1000003ULL + static_cast<uint64_t>(step));
  auto tokens = torch::randint(1, vocab_size, {batch_size, seq_len + 1}, gen, torch::kLong);  // (G, L+1)
  return Split(tokens, tokens.narrow(1, 1, seq_len), seq_len, microbatches, replica, replicas, /*pad=*/0);
}

}  // namespace pplab
