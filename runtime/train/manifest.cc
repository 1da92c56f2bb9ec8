#include "runtime/train/manifest.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "schedules/error.h"
#include "schedules/json_reader.h"

namespace pplab {
using nlohmann::json;

std::string ShardName(RankId rank) { return "rank-" + std::to_string(rank) + ".shard"; }

// `text` as one printable line: other bytes as \xNN, at most 60 characters.
std::string Printable(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (out.size() >= 60) return out + "...";
    if (std::isprint(c) != 0) {
      out += static_cast<char>(c);
    } else {
      char hex[5];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    }
  }
  return out;
}

namespace {

// Checks of one manifest's fields; each error names the file and the field.
class ManifestChecker {
 public:
  ManifestChecker(std::string file, const json& m) : file_(std::move(file)), m_(m) {}
  [[noreturn]] void Fail(const std::string& field, const std::string& why) const {
    throw Error(file_ + ": field '" + field + "' " + why);
  }
  const json& Get(const std::string& field) const {
    if (!m_.contains(field)) Fail(field, "is missing");
    return m_[field];
  }
  int64_t Int(const json& v, const std::string& field, int64_t lo, int64_t hi) const {
    if (!v.is_number_integer())
      Fail(field, "must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
                      Printable(v.dump()));
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi)) {
      Fail(field, "must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + v.dump());
    }
    const int64_t x = v.get<int64_t>();
    if (x < lo || x > hi)
      Fail(field, "must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + v.dump());
    return x;
  }
  int64_t Int(const std::string& field, int64_t lo, int64_t hi) const { return Int(Get(field), field, lo, hi); }
  std::string String(const json& v, const std::string& field) const {
    if (!v.is_string()) Fail(field, "must be a string, got " + Printable(v.dump()));
    return v.get<std::string>();
  }
  std::string String(const std::string& field) const { return String(Get(field), field); }

 private:
  std::string file_;
  const json& m_;
};

}  // namespace

// The identity fields of a manifest: those listed in its identity_keys.
json IdentityFields(const json& manifest) {
  json fields = json::object();
  for (const auto& key : manifest.at("identity_keys"))
    fields[key.get<std::string>()] = manifest.at(key.get<std::string>());
  return fields;
}

void CheckManifest(const std::string& file, const json& m) {
  if (!m.is_object()) throw Error(file + ": not a JSON object");
  const ManifestChecker c(file, m);
  if (c.String("format") != "pplab.checkpoint") c.Fail("format", "must be \"pplab.checkpoint\"");
  const int64_t version = c.Int("version", 1, 1000);
  if (version == 1) {
    throw Error(
        file +
        ": a version-1 checkpoint (pickled .pt shards with a non-standard checksum, pplab before "
        "2026-11-22); this pplab reads only version 2 checkpoints, whose shards carry their run, step and rank. "
        "Export it with the pplab that wrote it, or start a new run");
  }
  if (version != kCheckpointVersion)
    c.Fail("version", "is " + std::to_string(version) + "; this pplab reads version 2");
  const int64_t step = c.Int("step", 1, kMaxCheckpointStep);
  (void)step;
  const std::string run_id = c.String("run_id");
  if (run_id.empty() || run_id.size() > 64 || !std::all_of(run_id.begin(), run_id.end(), [](char ch) {
        return std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_';
      })) {
    c.Fail("run_id", "must be 1 to 64 letters, digits, '-' or '_', got " + Printable(run_id));
  }
  const int64_t ranks = c.Int("ranks", 1, 1 << 16);
  c.Int("parameter_elements", 1, int64_t{1} << 50);
  const json& keys = c.Get("identity_keys");
  if (!keys.is_array() || keys.empty()) c.Fail("identity_keys", "must be a non-empty array of field names");
  for (size_t i = 0; i < keys.size(); ++i) {
    const std::string key = c.String(keys[i], "identity_keys[" + std::to_string(i) + "]");
    if (!m.contains(key))
      c.Fail("identity_keys[" + std::to_string(i) + "]", "names field '" + Printable(key) + "', which is missing");
  }
  const json& files = c.Get("files");
  if (!files.is_array()) c.Fail("files", "must be an array");
  if (static_cast<int64_t>(files.size()) != ranks) {
    c.Fail("files", "lists " + std::to_string(files.size()) + " shards, field 'ranks' says " + std::to_string(ranks));
  }
  for (size_t i = 0; i < files.size(); ++i) {
    const std::string at = "files[" + std::to_string(i) + "]";
    if (!files[i].is_object()) c.Fail(at, "must be an object");
    if (!files[i].contains("name")) c.Fail(at + ".name", "is missing");
    const std::string name = c.String(files[i]["name"], at + ".name");
    if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
        name.find('\\') != std::string::npos || name.find('\0') != std::string::npos) {
      c.Fail(at + ".name", "must be a plain file name inside the checkpoint, got '" + Printable(name) + "'");
    }
    if (name != ShardName(static_cast<RankId>(i)))
      c.Fail(at + ".name", "must be " + ShardName(static_cast<RankId>(i)) + ", got '" + Printable(name) + "'");
    if (!files[i].contains("bytes")) c.Fail(at + ".bytes", "is missing");
    c.Int(files[i]["bytes"], at + ".bytes", 24, int64_t{1} << 42);
    if (!files[i].contains("fnv1a64")) c.Fail(at + ".fnv1a64", "is missing");
    const std::string sum = c.String(files[i]["fnv1a64"], at + ".fnv1a64");
    if (sum.size() != 16 || !std::all_of(sum.begin(), sum.end(),
                                         [](char ch) { return std::isxdigit(static_cast<unsigned char>(ch)) != 0; })) {
      c.Fail(at + ".fnv1a64", "must be 16 hex digits, got '" + Printable(sum) + "'");
    }
  }
  if (m.contains("data_position")) {
    const json& d = m["data_position"];
    if (!d.is_object()) c.Fail("data_position", "must be an object");
    if (!d.contains("samples_consumed")) c.Fail("data_position.samples_consumed", "is missing");
    c.Int(d["samples_consumed"], "data_position.samples_consumed", 0, int64_t{1} << 60);
  }
  if (m.contains("precision")) {  // absent in checkpoints written before it was recorded (fp32)
    const std::string precision = c.String("precision");
    if (precision != "fp32" && precision != "bf16") {
      c.Fail("precision", "must be \"fp32\" or \"bf16\", got '" + Printable(precision) + "'");
    }
  }
  if (m.contains("lr_schedule")) {
    const json& l = m["lr_schedule"];
    if (!l.is_object() || !l.contains("total_steps")) c.Fail("lr_schedule.total_steps", "is missing");
    c.Int(l["total_steps"], "lr_schedule.total_steps", 1, kMaxCheckpointStep);
  }
}

json ParseManifest(const std::string& text, const std::string& origin) {
  json manifest;
  try {
    manifest = ParseJsonStrict(text, origin);
  } catch (const json::exception& e) {
    throw Error(origin + ": " + JsonErrorText(e));
  }
  CheckManifest(origin, manifest);
  return manifest;
}

}  // namespace pplab
