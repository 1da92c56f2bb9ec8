#include "runtime/synthetic_data.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "schedules/error.h"

namespace pplab {

StepBatch SyntheticBatch(uint64_t seed, int step, int batch_size, int seq_len, int vocab_size, int microbatches,
                         int replica, int replicas) {
  if (microbatches < 1 || replicas < 1 || batch_size % (microbatches * replicas) != 0) {
    throw Error("--batch-size " + std::to_string(batch_size) + " is not divisible by " +
                (replicas > 1 ? "--dp " + std::to_string(replicas) + " x " : std::string()) + "--microbatches " +
                std::to_string(microbatches));
  }
  auto gen = at::detail::createCPUGenerator(seed * 1000003ULL + static_cast<uint64_t>(step));
  auto tokens = torch::randint(1, vocab_size, {batch_size, seq_len + 1}, gen, torch::kLong);  // (B, L+1)
  const int64_t share = batch_size / replicas;
  auto mine = tokens.narrow(0, replica * share, share);  // (B/D, L+1)
  auto inputs = mine.narrow(1, 0, seq_len).chunk(microbatches);
  auto targets = mine.narrow(1, 1, seq_len).chunk(microbatches);
  StepBatch batch;
  for (int m = 0; m < microbatches; ++m) {
    auto x = inputs[m].contiguous();
    batch.microbatches.push_back({{x, torch::ones_like(x)}, targets[m].contiguous()});
  }
  batch.loss_scale = 1.0 / (static_cast<double>(batch_size) * seq_len);
  return batch;
}

}  // namespace pplab
