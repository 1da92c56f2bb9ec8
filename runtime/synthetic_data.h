// Deterministic synthetic token batches (until real data lands): the same for
// every plan, rank and run with the same seed.
#pragma once

#include <cstdint>

#include "runtime/trainer.h"

namespace pplab {

// Step `step`'s global batch of `batch_size` sequences of `seq_len` tokens
// drawn uniformly from [1, vocab_size). Replica `replica` of `replicas` takes
// its contiguous share of the rows (as DistributedSampler shards), split into
// `microbatches` equal parts: inputs {tokens (b,L), attention_mask (b,L) all
// ones}, targets the next tokens (b,L). loss_scale = 1 / (batch_size *
// seq_len), so summing over replicas and microbatches gives the batch mean.
// Throws pplab::Error unless replicas x microbatches divides batch_size.
StepBatch SyntheticBatch(uint64_t seed, int step, int batch_size, int seq_len, int vocab_size, int microbatches,
                         int replica = 0, int replicas = 1);

}  // namespace pplab
