// Step batches: a global batch of token rows cut into this replica's share
// and its microbatches, from synthetic tokens or from a TextDataset.
#pragma once

#include <cstdint>
#include <functional>

#include "runtime/train/trainer.h"

namespace pplab {

// Writes global batch row `row` (seq_len + 1 token ids) into `out`.
using RowFn = std::function<void(int64_t row, int32_t* out)>;

// The global batch of `batch_size` rows from `row_fn`. Replica `replica` of
// `replicas` takes its contiguous share of the rows (as DistributedSampler
// shards), split into `microbatches` equal parts: inputs {tokens (b,L),
// attention_mask (b,L): 1 up to a row's last token that is not `pad`, 0
// after it, so padding only ever ends a row}, targets the next
// tokens (b,L) (`pad` targets are ignored by the loss). loss_scale = 1 /
// (non-pad targets of the whole global batch), so summing over replicas and
// microbatches gives the batch's mean token loss. Throws pplab::Error unless
// replicas x microbatches divides batch_size.
//
// `no_loss_bit` (0: none) is a bit that row ids may carry to say "an input
// the loss does not predict" (a prompt's token, TextDataset): it is cleared
// from the inputs, and such a token's target is `pad`, so neither the loss
// nor loss_scale counts it.
StepBatch BatchFromRows(const RowFn& row_fn, int batch_size, int seq_len, int microbatches, int replica, int replicas,
                        int32_t pad, int32_t no_loss_bit = 0);

// Step `step`'s synthetic batch: tokens drawn uniformly from [1, vocab_size)
// with a generator seeded by (seed, step); no padding.
StepBatch SyntheticBatch(uint64_t seed, int step, int batch_size, int seq_len, int vocab_size, int microbatches,
                         int replica = 0, int replicas = 1);

}  // namespace pplab
