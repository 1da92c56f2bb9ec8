// The checkpoint manifest (manifest.json in a step directory): its checks,
// without LibTorch, so that a fuzzer can drive them (tests/fuzz/).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "schedules/units.h"

namespace pplab {

// The manifest version this pplab writes and reads.
constexpr int kCheckpointVersion = 2;
// The largest step a manifest may record.
constexpr int64_t kMaxCheckpointStep = (int64_t{1} << 31) - 1;

// "rank-R.shard": the only shard name a manifest may list for rank R.
std::string ShardName(RankId rank);

// `text` as one printable line: other bytes as \xNN, at most 60 characters.
std::string Printable(const std::string& text);

// Checks every field of manifest `m`, read from `file`: types, ranges, shard
// names (plain names inside the step directory), checksums' form. Throws
// pplab::Error naming the file and the field; a version-1 manifest is refused
// with a line saying why.
void CheckManifest(const std::string& file, const nlohmann::json& m);

// Parses `text` (a key given twice is an error) and checks it; returns the
// manifest. Throws pplab::Error naming `origin`.
nlohmann::json ParseManifest(const std::string& text, const std::string& origin);

// The identity fields of a checked manifest: those its identity_keys name.
nlohmann::json IdentityFields(const nlohmann::json& manifest);

}  // namespace pplab
