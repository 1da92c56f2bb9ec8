#include "runtime/train/checkpoint.h"

#include <torch/csrc/jit/serialization/pickle.h>
#include <torch/torch.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "runtime/data/fnv.h"
#include "schedules/error.h"
#include "schedules/file_io.h"

namespace pplab {
namespace fs = std::filesystem;
namespace {

constexpr const char* kExpAvg = "#exp_avg";
constexpr const char* kExpAvgSq = "#exp_avg_sq";
constexpr const char* kStep = "#step";

std::string ShardName(RankId rank) { return "rank-" + std::to_string(rank) + ".pt"; }

std::string Checksum(const std::vector<char>& bytes) { return FnvHex(Fnv1a64(bytes.data(), bytes.size())); }

// A whole shard (shards can exceed the 1 GiB that ReadTextFile allows).
std::vector<char> ReadShard(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw Error("checkpoint: cannot read " + path);
  const std::streamsize size = in.tellg();
  std::vector<char> bytes(static_cast<size_t>(size));
  in.seekg(0);
  if (!in.read(bytes.data(), size)) throw Error("checkpoint: cannot read " + path);
  return bytes;
}

void WriteShardFile(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.flush();
  if (!out) throw Error("checkpoint: cannot write " + path + " (disk full or not writable?)");
}

}  // namespace

std::string CheckpointDirName(const std::string& dir, int step) {
  char name[32];
  std::snprintf(name, sizeof name, "step-%06d", step);
  return (fs::path(dir) / name).string();
}

void WriteShard(const std::string& tmp_dir, RankId rank, AdamW& optimizer) {
  std::error_code ec;
  fs::create_directories(tmp_dir, ec);
  if (ec) throw Error("checkpoint: cannot create " + tmp_dir + ": " + ec.message());
  c10::Dict<std::string, at::Tensor> dict;
  for (const auto& [name, p] : optimizer.Params()) {
    dict.insert(name, p.detach().to(torch::kCPU).clone());
    const auto it = optimizer.State().find(name);
    if (it == optimizer.State().end()) continue;
    dict.insert(name + kExpAvg, it->second.exp_avg.to(torch::kCPU));
    dict.insert(name + kExpAvgSq, it->second.exp_avg_sq.to(torch::kCPU));
    dict.insert(name + kStep, torch::full({1}, it->second.step, torch::kLong));
  }
  WriteShardFile((fs::path(tmp_dir) / ShardName(rank)).string(), torch::pickle_save(dict));
}

void PublishCheckpoint(const std::string& dir, int step, int shards, const std::string& manifest_json) {
  const std::string final_dir = CheckpointDirName(dir, step);
  const std::string tmp_dir = final_dir + ".tmp";
  nlohmann::json manifest = nlohmann::json::parse(manifest_json);
  manifest["format"] = "pplab.checkpoint";
  manifest["version"] = 1;
  manifest["step"] = step;
  manifest["files"] = nlohmann::json::array();
  for (RankId r = 0; r < shards; ++r) {
    const std::vector<char> bytes = ReadShard((fs::path(tmp_dir) / ShardName(r)).string());
    manifest["files"].push_back({{"name", ShardName(r)}, {"bytes", bytes.size()}, {"fnv1a64", Checksum(bytes)}});
  }
  WriteTextFile((fs::path(tmp_dir) / "manifest.json").string(), manifest.dump(2) + "\n");
  std::error_code ec;
  fs::remove_all(final_dir, ec);  // a stale copy of this very step, if a run died after publishing it
  fs::rename(tmp_dir, final_dir, ec);
  if (ec) throw Error("checkpoint: cannot publish " + final_dir + ": " + ec.message());
  WriteTextFile((fs::path(dir) / "latest").string(), fs::path(final_dir).filename().string() + "\n");
  // Keep this checkpoint and the one before it.
  std::vector<std::string> published;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("step-", 0) == 0 && name.find(".tmp") == std::string::npos) published.push_back(name);
  }
  std::sort(published.begin(), published.end());
  for (size_t i = 0; i + 2 < published.size(); ++i) fs::remove_all(fs::path(dir) / published[i], ec);
}

std::string LatestCheckpoint(const std::string& dir) {
  const fs::path latest = fs::path(dir) / "latest";
  if (!fs::exists(latest)) return "";
  std::string name = ReadTextFile(latest.string());
  while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.pop_back();
  if (name.empty() || name.find('/') != std::string::npos) throw Error(latest.string() + ": not a checkpoint name");
  return (fs::path(dir) / name).string();
}

std::string VerifyCheckpoint(const std::string& path) {
  const std::string manifest_path = (fs::path(path) / "manifest.json").string();
  nlohmann::json manifest;
  try {
    manifest = nlohmann::json::parse(ReadTextFile(manifest_path));
    if (manifest.at("format") != "pplab.checkpoint" || manifest.at("version") != 1) throw Error("unknown format");
    for (const auto& f : manifest.at("files")) {
      const std::string file = (fs::path(path) / f.at("name").get<std::string>()).string();
      const std::vector<char> bytes = ReadShard(file);
      if (bytes.size() != f.at("bytes").get<size_t>()) {
        throw Error(file + ": " + std::to_string(bytes.size()) + " bytes, the manifest says " + f.at("bytes").dump() +
                    " (partial or corrupted checkpoint)");
      }
      if (Checksum(bytes) != f.at("fnv1a64").get<std::string>()) {
        throw Error(file + ": checksum mismatch (corrupted checkpoint)");
      }
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error(manifest_path + ": " + e.what());
  }
  return manifest.dump();
}

namespace {

// Every tensor of a verified checkpoint's shards, by key.
std::map<std::string, at::Tensor> ReadAllShards(const std::string& path, const nlohmann::json& manifest) {
  std::map<std::string, at::Tensor> all;
  for (const auto& f : manifest.at("files")) {
    const std::string file = (fs::path(path) / f.at("name").get<std::string>()).string();
    c10::IValue value;
    try {
      value = torch::pickle_load(ReadShard(file));
    } catch (const std::exception& e) {
      throw Error(file + ": not a pplab checkpoint shard");
    }
    for (const auto& item : value.toGenericDict()) all[item.key().toStringRef()] = item.value().toTensor();
  }
  return all;
}

}  // namespace

std::string ResolveCheckpoint(const std::string& path) {
  if (fs::exists(fs::path(path) / "manifest.json")) return path;
  const std::string dir = LatestCheckpoint(path);
  if (dir.empty()) throw Error("--checkpoint " + path + " holds no checkpoint");
  return dir;
}

int ExportModel(const std::string& path, const std::string& out_file) {
  const std::string dir = ResolveCheckpoint(path);
  const nlohmann::json manifest = nlohmann::json::parse(VerifyCheckpoint(dir));
  c10::Dict<std::string, at::Tensor> params;
  int count = 0;
  for (const auto& [key, tensor] : ReadAllShards(dir, manifest)) {
    if (key.find('#') != std::string::npos) continue;  // optimizer state
    params.insert(key, tensor);
    ++count;
  }
  const std::vector<char> bytes = torch::pickle_save(params);
  WriteShardFile(out_file + ".tmp", bytes);
  std::error_code ec;
  fs::rename(out_file + ".tmp", out_file, ec);
  if (ec) throw Error("export-model: cannot write " + out_file + ": " + ec.message());
  return count;
}

int CheckpointStep(const std::string& manifest_json) { return nlohmann::json::parse(manifest_json).at("step"); }

void LoadCheckpoint(const std::string& path, const std::string& manifest_json, AdamW& optimizer) {
  // Any shard may hold any parameter (another partition wrote it): read all.
  std::map<std::string, at::Tensor> all = ReadAllShards(path, nlohmann::json::parse(manifest_json));
  torch::NoGradGuard no_grad;
  for (auto& [name, p] : optimizer.Params()) {
    const auto it = all.find(name);
    if (it == all.end()) throw Error(path + ": the checkpoint has no parameter " + name);
    if (it->second.sizes() != p.sizes()) throw Error(path + ": parameter " + name + " has another shape");
    p.copy_(it->second);
    if (all.count(name + kExpAvg) == 0) continue;
    AdamWState& s = optimizer.State()[name];
    s.exp_avg = all[name + kExpAvg].to(p.device()).clone();
    s.exp_avg_sq = all[name + kExpAvgSq].to(p.device()).clone();
    s.step = all[name + kStep].item<int64_t>();
  }
}

}  // namespace pplab
