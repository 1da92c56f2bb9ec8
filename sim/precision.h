// Precision: the numeric precision of a run (`--precision fp32|bf16`), and
// the bytes per element it implies for the cost model and the planner.
//
// bf16 is mixed precision: matmuls compute in bf16 under autocast, while
// weights, their gradients and AdamW's moments stay fp32 ("master" weights),
// and the loss and the attention softmax run in fp32 (docs/runtime.md). So
// only activations, activation gradients and the messages between ranks
// shrink; the model state keeps 16 bytes per parameter in both.
#pragma once

#include <string>

namespace pplab {

enum class Precision { kFp32, kBf16 };

// "fp32" or "bf16". Anything else throws pplab::Error naming `flag`:
// "--precision 'fp16': expected fp32 or bf16".
Precision ParsePrecision(const std::string& text, const std::string& flag = "--precision");
// "fp32" or "bf16".
const char* PrecisionName(Precision precision);

// Bytes of one activation or activation-gradient element, held for the
// backward or sent to the next rank: 4 in fp32, 2 in bf16.
int ActivationElementBytes(Precision precision);

// Bytes of model state per parameter in either precision: the fp32 weight,
// its fp32 gradient and AdamW's two fp32 moments, 4 bytes each.
constexpr int kStateBytesPerParameter = 16;

// The same with the AdamW moments sharded over `dp` data-parallel replicas
// (ZeRO-1, train --shard-optimizer): 8 + 8 / dp bytes, a double since 8 / dp
// need not be whole.
inline double StateBytesPerParameter(int dp, bool shard_optimizer) {
  return shard_optimizer && dp > 1 ? 8.0 + 8.0 / dp : static_cast<double>(kStateBytesPerParameter);
}

}  // namespace pplab
