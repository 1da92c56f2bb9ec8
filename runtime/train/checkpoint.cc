#include "runtime/train/checkpoint.h"

#include <torch/csrc/jit/serialization/pickle.h>
#include <torch/torch.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "runtime/data/fnv.h"
#include "runtime/train/shard_file.h"
#include "schedules/error.h"
#include "schedules/file_io.h"

namespace pplab {
namespace fs = std::filesystem;
using nlohmann::json;
namespace {

constexpr const char* kExpAvg = "#exp_avg";
constexpr const char* kExpAvgSq = "#exp_avg_sq";
constexpr const char* kStep = "#step";
constexpr int kVersion = 2;
constexpr int64_t kMaxStep = (int64_t{1} << 31) - 1;

std::string ShardName(RankId rank) { return "rank-" + std::to_string(rank) + ".shard"; }

std::string Checksum(const std::vector<char>& bytes) { return FnvHex(Fnv1a64(bytes.data(), bytes.size())); }

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

bool IsStepName(const std::string& name) {
  if (name.size() < 11 || name.compare(0, 5, "step-") != 0) return false;
  return std::all_of(name.begin() + 5, name.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// The identity fields of a manifest: those listed in its identity_keys.
json IdentityFields(const json& manifest) {
  json fields = json::object();
  for (const auto& key : manifest.at("identity_keys"))
    fields[key.get<std::string>()] = manifest.at(key.get<std::string>());
  return fields;
}

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

void CheckManifest(const std::string& file, const json& m) {
  if (!m.is_object()) throw Error(file + ": not a JSON object");
  const ManifestChecker c(file, m);
  if (c.String("format") != "pplab.checkpoint") c.Fail("format", "must be \"pplab.checkpoint\"");
  const int64_t version = c.Int("version", 1, 1000);
  if (version == 1) {
    throw Error(file +
                ": a version-1 checkpoint (pickled .pt shards with a non-standard checksum, pplab before "
                "2026-11-22); this pplab reads only version 2 shards, which carry their run, step and rank. Export "
                "it with the pplab that wrote it, or start a new run");
  }
  if (version != kVersion) c.Fail("version", "is " + std::to_string(version) + "; this pplab reads version 2");
  const int64_t step = c.Int("step", 1, kMaxStep);
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
  if (m.contains("lr_schedule")) {
    const json& l = m["lr_schedule"];
    if (!l.is_object() || !l.contains("total_steps")) c.Fail("lr_schedule.total_steps", "is missing");
    c.Int(l["total_steps"], "lr_schedule.total_steps", 1, kMaxStep);
  }
}

void RemoveAllOrThrow(const fs::path& p) {
  std::error_code ec;
  fs::remove_all(p, ec);
  if (ec) throw Error("checkpoint: cannot remove " + p.string() + ": " + ec.message());
}

}  // namespace

std::string CheckpointDirName(const std::string& dir, int step) {
  char name[32];
  std::snprintf(name, sizeof name, "step-%06d", step);
  return (fs::path(dir) / name).string();
}

std::string IdentityHash(const std::string& run_id, int64_t step, const std::string& fields_json) {
  const json j = {{"run_id", run_id}, {"step", step}, {"fields", json::parse(fields_json)}};
  return FnvHex(Fnv1a64(j.dump()));
}

void WriteShard(const std::string& tmp_dir, RankId rank, int step, const CheckpointIdentity& id, AdamW& optimizer) {
  std::error_code ec;
  fs::create_directories(tmp_dir, ec);
  if (ec) throw Error("checkpoint: cannot create " + tmp_dir + ": " + ec.message());
  NamedTensors tensors;
  for (const auto& [name, p] : optimizer.Params()) {
    tensors.emplace_back(name, p.detach());
    const auto it = optimizer.State().find(name);
    if (it == optimizer.State().end()) continue;
    tensors.emplace_back(name + kExpAvg, it->second.exp_avg);
    tensors.emplace_back(name + kExpAvgSq, it->second.exp_avg_sq);
    tensors.emplace_back(name + kStep, torch::full({1}, it->second.step, torch::kLong));
  }
  const ShardIdentity shard{id.run_id, step, rank, IdentityHash(id.run_id, step, id.manifest_json)};
  WriteBinaryFile((fs::path(tmp_dir) / ShardName(rank)).string(), EncodeShard(shard, tensors));
}

std::string PublishCheckpoint(const std::string& dir, int step, int shards, const CheckpointIdentity& id,
                              const std::string& extra_json) {
  const std::string final_dir = CheckpointDirName(dir, step);
  const std::string tmp_dir = final_dir + ".tmp";
  const json fields = json::parse(id.manifest_json);
  json manifest = fields;
  const json extra = json::parse(extra_json);
  for (const auto& [key, value] : extra.items()) manifest[key] = value;
  manifest["identity_keys"] = json::array();
  for (const auto& [key, value] : fields.items()) manifest["identity_keys"].push_back(key);
  manifest["format"] = "pplab.checkpoint";
  manifest["version"] = kVersion;
  manifest["step"] = step;
  manifest["run_id"] = id.run_id;
  manifest["ranks"] = shards;
  manifest["files"] = json::array();
  for (RankId r = 0; r < shards; ++r) {
    const std::vector<char> bytes = ReadBinaryFile((fs::path(tmp_dir) / ShardName(r)).string());
    manifest["files"].push_back({{"name", ShardName(r)}, {"bytes", bytes.size()}, {"fnv1a64", Checksum(bytes)}});
  }
  WriteTextFile((fs::path(tmp_dir) / "manifest.json").string(), manifest.dump(2) + "\n");
  std::error_code ec;
  fs::remove_all(final_dir, ec);  // a stale copy of this very step, if a run died after publishing it
  fs::rename(tmp_dir, final_dir, ec);
  if (ec) throw Error("checkpoint: cannot publish " + final_dir + ": " + ec.message());
  WriteTextFile((fs::path(dir) / "latest").string(), fs::path(final_dir).filename().string() + "\n");
  return final_dir;
}

void PruneCheckpoints(std::vector<std::string>& published, size_t keep) {
  keep = std::max<size_t>(keep, 1);
  while (published.size() > keep) {
    if (published.front() != published.back()) RemoveAllOrThrow(published.front());
    published.erase(published.begin());
  }
}

std::string LatestCheckpoint(const std::string& dir) {
  const fs::path latest = fs::path(dir) / "latest";
  std::error_code ec;
  if (!fs::exists(latest, ec)) return "";
  std::string name = ReadTextFile(latest.string());
  while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.pop_back();
  if (!IsStepName(name)) {
    throw Error(latest.string() + ": expected a checkpoint name like step-000012, found '" + Printable(name) +
                "' (remove the file to choose a checkpoint by hand)");
  }
  const fs::path path = fs::path(dir) / name;
  if (!fs::is_directory(path, ec)) {
    throw Error(latest.string() + " names " + name + ", which does not exist (deleted by hand?)");
  }
  return path.string();
}

bool HoldsCheckpoints(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return false;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name == "latest" || name.rfind("step-", 0) == 0) return true;
  }
  return false;
}

void RemoveCheckpoints(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return;
  std::vector<fs::path> doomed;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name == "latest" || name.rfind("step-", 0) == 0 ||
        (name.rfind("tokenizer-", 0) == 0 && entry.path().extension() == ".model")) {
      doomed.push_back(entry.path());
    }
  }
  for (const fs::path& p : doomed) RemoveAllOrThrow(p);
}

std::string PrepareCheckpointDir(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return "";
  std::vector<fs::path> stale;
  bool steps = false;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("step-", 0) != 0) continue;
    if (entry.path().extension() == ".tmp") {
      stale.push_back(entry.path());
    } else {
      steps = true;
    }
  }
  for (const fs::path& p : stale) RemoveAllOrThrow(p);  // left by saves that failed
  const std::string latest = LatestCheckpoint(dir);
  if (latest.empty() && steps) {
    throw Error("--checkpoint-dir " + dir + " holds step directories but no 'latest' file: write the step to " +
                "continue from into " + dir + "/latest, or pass --overwrite to start over");
  }
  return latest;
}

std::string ReadManifest(const std::string& path) {
  const std::string manifest_path = (fs::path(path) / "manifest.json").string();
  json manifest;
  try {
    manifest = json::parse(ReadTextFile(manifest_path));
  } catch (const json::exception& e) {
    throw Error(manifest_path + ": " + e.what());
  }
  CheckManifest(manifest_path, manifest);
  return manifest.dump();
}

std::string VerifyCheckpoint(const std::string& path) {
  const json manifest = json::parse(ReadManifest(path));
  for (const auto& f : manifest.at("files")) {
    const std::string file = (fs::path(path) / f.at("name").get<std::string>()).string();
    const std::vector<char> bytes = ReadBinaryFile(file);
    if (bytes.size() != f.at("bytes").get<size_t>()) {
      throw Error(file + ": " + std::to_string(bytes.size()) + " bytes, the manifest says " + f.at("bytes").dump() +
                  " (partial or corrupted checkpoint)");
    }
    if (Checksum(bytes) != f.at("fnv1a64").get<std::string>()) {
      throw Error(file + ": checksum mismatch (corrupted checkpoint)");
    }
  }
  return manifest.dump();
}

namespace {

// Every tensor of a verified checkpoint's shards, by key, each shard checked
// to belong to this manifest's run, step and rank.
std::map<std::string, at::Tensor> ReadAllShards(const std::string& path, const json& manifest) {
  const std::string run_id = manifest.at("run_id");
  const int64_t step = manifest.at("step");
  const std::string identity = IdentityHash(run_id, step, IdentityFields(manifest).dump());
  std::map<std::string, at::Tensor> all;
  RankId rank = 0;
  for (const auto& f : manifest.at("files")) {
    const std::string file = (fs::path(path) / f.at("name").get<std::string>()).string();
    ShardIdentity id;
    NamedTensors tensors = DecodeShard(file, ReadBinaryFile(file), &id);
    if (id.run_id != run_id) {
      throw Error(file + ": written by run " + Printable(id.run_id) + ", the manifest is run " + run_id +
                  " (shards of two runs mixed)");
    }
    if (id.step != step) {
      throw Error(file + ": holds step " + std::to_string(id.step) + ", the manifest step " + std::to_string(step) +
                  " (shards of two steps mixed)");
    }
    if (id.rank != rank) throw Error(file + ": holds rank " + std::to_string(id.rank) + "'s shard");
    if (id.identity != identity) {
      throw Error(file + ": its identity hash does not match the manifest's identity fields (edited manifest?)");
    }
    for (auto& [key, tensor] : tensors) {
      if (!all.emplace(key, std::move(tensor)).second) throw Error(file + ": tensor " + key + " is in two shards");
    }
    ++rank;
  }
  return all;
}

}  // namespace

std::string ResolveCheckpoint(const std::string& path) {
  std::error_code ec;
  if (fs::exists(fs::path(path) / "manifest.json", ec)) return path;
  const std::string dir = LatestCheckpoint(path);
  if (dir.empty()) throw Error("--checkpoint " + path + " holds no checkpoint");
  return dir;
}

int ExportModel(const std::string& path, const std::string& out_file) {
  const std::string dir = ResolveCheckpoint(path);
  const json manifest = json::parse(VerifyCheckpoint(dir));
  c10::Dict<std::string, at::Tensor> params;
  int count = 0;
  int64_t elements = 0;
  for (const auto& [key, tensor] : ReadAllShards(dir, manifest)) {
    if (key.find('#') != std::string::npos) continue;  // optimizer state
    params.insert(key, tensor);
    elements += tensor.numel();
    ++count;
  }
  const int64_t want = manifest.at("parameter_elements");
  if (elements != want) {
    throw Error("export-model: the shards of " + dir + " hold " + std::to_string(elements) + " of the model's " +
                std::to_string(want) + " parameter values (" + std::to_string(count) + " tensors); nothing written");
  }
  const std::vector<char> bytes = torch::pickle_save(params);
  WriteBinaryFile(out_file + ".tmp", bytes);
  std::error_code ec;
  fs::rename(out_file + ".tmp", out_file, ec);
  if (ec) throw Error("export-model: cannot write " + out_file + ": " + ec.message());
  return count;
}

int CheckpointStep(const std::string& manifest_json) { return json::parse(manifest_json).at("step").get<int>(); }

void LoadCheckpoint(const std::string& path, const std::string& manifest_json, AdamW& optimizer) {
  // Any shard may hold any parameter (another partition wrote it): read all.
  std::map<std::string, at::Tensor> all = ReadAllShards(path, json::parse(manifest_json));
  torch::NoGradGuard no_grad;
  for (auto& [name, p] : optimizer.Params()) {
    const auto it = all.find(name);
    if (it == all.end()) throw Error(path + ": the checkpoint has no parameter " + name);
    if (it->second.sizes() != p.sizes()) throw Error(path + ": parameter " + name + " has another shape");
    p.copy_(it->second);
    if (all.count(name + kExpAvg) == 0) continue;
    if (all.count(name + kExpAvgSq) == 0 || all.count(name + kStep) == 0 || all[name + kExpAvg].sizes() != p.sizes() ||
        all[name + kExpAvgSq].sizes() != p.sizes() || all[name + kStep].numel() != 1) {
      throw Error(path + ": the optimizer state of " + name + " is incomplete or has another shape");
    }
    AdamWState& s = optimizer.State()[name];
    s.exp_avg = all[name + kExpAvg].to(p.device()).clone();
    s.exp_avg_sq = all[name + kExpAvgSq].to(p.device()).clone();
    s.step = all[name + kStep].item<int64_t>();
  }
}

}  // namespace pplab
