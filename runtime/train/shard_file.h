// A checkpoint shard in pplab's own format: no pickling, no TorchScript, so
// reading one depends on nothing but this file (LibTorch 2.11 deprecates the
// TorchScript serialization that shards used before; see docs/runtime.md).
//
// Layout (little-endian):
//   8 bytes  magic "PPLABSHD"
//   u32      format version (1)
//   u32      0
//   u64      H, the length of the JSON header
//   H bytes  header: {"run_id", "step", "rank", "identity", "tensors": [
//              {"name", "dtype", "shape": [...], "offset", "bytes"}, ...]}
//   zero padding to a multiple of 64 bytes
//   data     each tensor's raw bytes (row-major) at its offset from here
// Everything read from a shard is bounds-checked against the file's size.
#pragma once

#include <ATen/Tensor.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "schedules/units.h"

namespace pplab {

// Who wrote a shard: checked against the manifest on load, so that shards of
// two runs or two steps never mix.
struct ShardIdentity {
  std::string run_id;
  int64_t step = 0;
  RankId rank = 0;
  std::string identity;  // hash of the manifest's identity fields (IdentityHash())
};

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

// The shard's bytes for `tensors` (any device; copied to the CPU).
std::vector<char> EncodeShard(const ShardIdentity& id, const NamedTensors& tensors);

// Parses a shard read from `path` (named in errors). Throws pplab::Error
// naming the file and what is wrong with it.
NamedTensors DecodeShard(const std::string& path, const std::vector<char>& bytes, ShardIdentity* id);

// A whole file's bytes (shards may exceed the 1 GiB ReadTextFile allows).
std::vector<char> ReadBinaryFile(const std::string& path);
// Writes `bytes` to `path` and flushes; throws naming the path.
void WriteBinaryFile(const std::string& path, const std::vector<char>& bytes);

}  // namespace pplab
