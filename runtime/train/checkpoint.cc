#include "runtime/train/checkpoint.h"

#include <sys/stat.h>
#include <torch/csrc/jit/serialization/pickle.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "models/llama_config.h"
#include "models/pretrained.h"
#include "models/safetensors.h"
#include "runtime/data/fnv.h"
#include "runtime/data/tokenizer.h"
#include "runtime/train/manifest.h"
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

std::string Checksum(const std::vector<char>& bytes) { return FnvHex(Fnv1a64(bytes.data(), bytes.size())); }

bool IsStepName(const std::string& name) {
  if (name.size() < 11 || name.compare(0, 5, "step-") != 0) return false;
  return std::all_of(name.begin() + 5, name.end(), [](char c) { return c >= '0' && c <= '9'; });
}

void RemoveAllOrThrow(const fs::path& p) {
  const std::string failure = RemoveTree(p.string());
  if (!failure.empty()) throw Error("checkpoint: cannot remove " + failure);
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

void WriteShard(const std::string& tmp_dir, RankId rank, int step, const CheckpointIdentity& id, AdamW& optimizer,
                const std::set<std::string>& only) {
  WriteShardTensors(tmp_dir, rank, step, id, ShardTensors(optimizer, only, nullptr));
}

NamedTensors ShardTensors(AdamW& optimizer, const std::set<std::string>& only, const TensorMap& whole) {
  auto out = [&whole](const std::string& name, const at::Tensor& t) { return whole ? whole(name, t) : t; };
  NamedTensors tensors;
  for (const auto& [name, p] : optimizer.Params()) {
    if (!only.empty() && only.count(name) == 0) continue;
    tensors.emplace_back(name, out(name, p.detach()));
    const auto it = optimizer.State().find(name);
    if (it == optimizer.State().end()) continue;
    if (!it->second.exp_avg.defined() || !it->second.exp_avg_sq.defined()) {
      // A sharded optimizer's moments live in the replicas' shares until
      // they are gathered (AdamW::SetWholeMoments); a shard without them
      // would lose the optimizer state.
      throw Error("checkpoint: the optimizer state of " + name + " was not gathered from its shards");
    }
    tensors.emplace_back(name + kExpAvg, out(name, it->second.exp_avg));
    tensors.emplace_back(name + kExpAvgSq, out(name, it->second.exp_avg_sq));
    tensors.emplace_back(name + kStep, torch::full({1}, it->second.step, torch::kLong));
  }
  return tensors;
}

void WriteShardTensors(const std::string& tmp_dir, RankId rank, int step, const CheckpointIdentity& id,
                       const NamedTensors& tensors) {
  std::error_code ec;
  fs::create_directories(tmp_dir, ec);
  if (ec) throw Error("checkpoint: cannot create " + tmp_dir + ": " + ec.message());
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
  manifest["version"] = kCheckpointVersion;
  manifest["step"] = step;
  manifest["run_id"] = id.run_id;
  manifest["ranks"] = shards;
  manifest["files"] = json::array();
  for (RankId r = 0; r < shards; ++r) {
    const std::vector<char> bytes = ReadBinaryFile((fs::path(tmp_dir) / ShardName(r)).string());
    manifest["files"].push_back({{"name", ShardName(r)}, {"bytes", bytes.size()}, {"fnv1a64", Checksum(bytes)}});
  }
  WriteTextFile((fs::path(tmp_dir) / "manifest.json").string(), manifest.dump(2) + "\n");
  RemoveTree(final_dir);  // a stale copy of this very step, if a run died after publishing it
  std::error_code ec;
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

namespace {

// DIR's step-NNNNNN folders whose step `keep` takes, by step.
std::vector<std::pair<long, std::string>> StepFolders(const std::string& dir, const std::function<bool(long)>& keep) {
  std::vector<std::pair<long, std::string>> found;
  std::error_code ec;
  for (const std::string& name : ListDirectory(dir)) {
    if (!IsStepName(name) || name.size() > 14 || !fs::is_directory(fs::path(dir) / name, ec)) continue;
    const long n = std::stol(name.substr(5));
    if (keep(n)) found.emplace_back(n, (fs::path(dir) / name).string());
  }
  std::sort(found.begin(), found.end());
  return found;
}

}  // namespace

std::vector<std::string> CheckpointsBelow(const std::string& dir, int step) {
  std::vector<std::string> out;
  for (auto& [n, path] : StepFolders(dir, [step](long n) { return n < step; })) out.push_back(std::move(path));
  return out;
}

std::vector<std::pair<int, std::string>> CheckpointsAbove(const std::string& dir, int step) {
  std::vector<std::pair<int, std::string>> out;
  for (auto& [n, path] : StepFolders(dir, [step](long n) { return n > step; })) {
    out.emplace_back(static_cast<int>(n), std::move(path));
  }
  return out;
}

std::string LatestCheckpoint(const std::string& dir, bool for_training) {
  const fs::path latest = fs::path(dir) / "latest";
  std::error_code ec;
  if (!fs::exists(latest, ec)) return "";
  std::string name = ReadTextFile(latest.string());
  while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.pop_back();
  if (!IsStepName(name)) {
    throw Error(latest.string() + ": expected a checkpoint name like step-000012, found '" + Printable(name) +
                "' (write the name of the step to continue from into it" +
                (for_training ? ", or pass --overwrite to start over)" : ")"));
  }
  const fs::path path = fs::path(dir) / name;
  if (!fs::is_directory(path, ec)) {
    throw Error(latest.string() + " names " + name + ", which does not exist (deleted by hand?)");
  }
  return path.string();
}

namespace {

// A failed save's directory: a step's name and ".tmp".
bool IsStepTmpName(const std::string& name) {
  return EndsWith(name, ".tmp") && IsStepName(name.substr(0, name.size() - 4));
}

// The tokenizer copy a text run keeps beside its checkpoints:
// tokenizer-<16 hex digits>.model or .json (cmd_train.cpp).
bool IsTokenizerCopyName(const std::string& name) {
  const size_t dot = name.rfind('.');
  if (dot == std::string::npos || name.compare(0, 10, "tokenizer-") != 0 || dot != 26) return false;
  const std::string ext = name.substr(dot);
  return (ext == ".model" || ext == ".json") && std::all_of(name.begin() + 10, name.begin() + 26, [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

}  // namespace

bool HoldsCheckpoints(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return false;
  for (const std::string& name : ListDirectory(dir)) {
    if (name == "latest" || (IsStepName(name) && fs::is_directory(fs::path(dir) / name, ec))) return true;
  }
  return false;
}

bool IsCheckpointEntry(const std::string& name) {
  return name == "latest" || IsStepName(name) || IsStepTmpName(name) || IsTokenizerCopyName(name);
}

void RemoveCheckpoints(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return;
  std::vector<fs::path> doomed;
  for (const std::string& name : ListDirectory(dir)) {
    const fs::path path = fs::path(dir) / name;
    // Steps are directories, `latest` and the tokenizer copies files: a
    // user's file or folder of such a name is left alone.
    const bool folder = fs::is_directory(fs::symlink_status(path, ec));
    if (IsCheckpointEntry(name) && folder == (IsStepName(name) || IsStepTmpName(name))) doomed.push_back(path);
  }
  for (const fs::path& p : doomed) RemoveAllOrThrow(p);
}

std::string PrepareCheckpointDir(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return "";
  std::vector<fs::path> stale;
  bool steps = false;
  for (const std::string& name : ListDirectory(dir)) {
    const fs::path path = fs::path(dir) / name;
    if (!fs::is_directory(fs::symlink_status(path, ec))) continue;
    if (IsStepTmpName(name)) stale.push_back(path);
    steps = steps || IsStepName(name);
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
  return ParseManifest(ReadTextFile(manifest_path), manifest_path).dump();
}

namespace {

void CheckShardSize(const std::string& file, uint64_t size, const json& entry) {
  if (size != entry.at("bytes").get<uint64_t>()) {
    throw Error(file + ": " + std::to_string(size) + " bytes, the manifest says " + entry.at("bytes").dump() +
                " (partial or corrupted checkpoint)");
  }
}

}  // namespace

std::string CheckShardSizes(const std::string& path) {
  const json manifest = json::parse(ReadManifest(path));
  for (const auto& f : manifest.at("files")) {
    const std::string file = (fs::path(path) / f.at("name").get<std::string>()).string();
    struct stat st {};
    if (stat(file.c_str(), &st) != 0) throw Error("cannot read " + file + ": " + std::strerror(errno));
    if (!S_ISREG(st.st_mode)) throw Error(file + ": not a regular file (corrupted checkpoint)");
    CheckShardSize(file, static_cast<uint64_t>(st.st_size), f);
  }
  return manifest.dump();
}

std::string VerifyCheckpoint(const std::string& path) {
  const json manifest = json::parse(ReadManifest(path));
  for (const auto& f : manifest.at("files")) {
    const std::string file = (fs::path(path) / f.at("name").get<std::string>()).string();
    const std::vector<char> bytes = ReadBinaryFile(file);
    CheckShardSize(file, bytes.size(), f);
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
  std::map<std::string, std::string> shard_of;  // each key's file
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
      // Parameters and AdamW moments are stored as float32, a step count as int64.
      const at::ScalarType want = EndsWith(key, kStep) ? at::kLong : at::kFloat;
      if (tensor.scalar_type() != want) {
        throw Error(file + ": tensor " + key + " is " + c10::toString(tensor.scalar_type()) + ", not " +
                    c10::toString(want));
      }
      const auto [where, fresh] = shard_of.emplace(key, file);
      if (!fresh) {
        throw Error(file + ": tensor " + key +
                    (where->second == file ? " is in this shard twice" : " is in " + where->second + " too"));
      }
      all.emplace(key, std::move(tensor));
    }
    ++rank;
  }
  return all;
}

}  // namespace

namespace {

// A step folder given as such: its parent must be the checkpoint directory,
// where `latest` and the tokenizer copy are. "ck/step-000003/", or ".../."
// and "." from inside it, or a link to it, have no such parent as written:
// the first loses its slashes, the others are resolved.
std::string StepFolder(const std::string& path) {
  std::string s = fs::path(path).lexically_normal().string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  const fs::path step(s);
  std::error_code ec;
  if (step.filename() == "." || step.filename() == ".." || fs::is_symlink(step, ec)) {
    const fs::path real = fs::canonical(step, ec);
    if (!ec) return real.string();
  }
  return s;
}

}  // namespace

std::string ResolveCheckpoint(const std::string& path) {
  std::error_code ec;
  if (fs::exists(fs::path(path) / "manifest.json", ec)) return StepFolder(path);
  if (!fs::exists(path, ec)) throw Error("--checkpoint " + path + ": no such file or directory");
  if (!fs::is_directory(path, ec)) throw Error("--checkpoint " + path + " is a file, not a checkpoint directory");
  const std::string dir = LatestCheckpoint(path, false);
  if (dir.empty() && HoldsCheckpoints(path)) {
    throw Error("--checkpoint " + path + " holds step directories but no 'latest' file: give one of them as " +
                "--checkpoint, or write its name into " + path + "/latest");
  }
  if (dir.empty()) throw Error("--checkpoint " + path + " holds no checkpoint (no manifest.json, no 'latest' file)");
  return dir;
}

namespace {

// Whether `file` is in the checkpoint folder `checkpoint` (a step's), or is
// one of its checkpoint directory's own entries (IsCheckpointEntry): what
// export-model reads, so never what it writes.
bool WithinCheckpoint(const std::string& file, const std::string& checkpoint) {
  std::string step = checkpoint;
  while (step.size() > 1 && step.back() == '/') step.pop_back();
  const std::string parent = fs::path(step).parent_path().string();
  return !EntryWithin(step, file).empty() || IsCheckpointEntry(EntryWithin(parent.empty() ? "." : parent, file));
}

}  // namespace

int ExportModel(const std::string& path, const std::string& out_file, bool bf16) {
  const std::string dir = ResolveCheckpoint(path);
  if (out_file.empty()) throw Error("export-model: -o is empty; give a file or a folder (DIR/)");
  if (out_file.back() != '/' && WithinCheckpoint(out_file, dir)) {
    throw Error("export-model: -o " + out_file + " is among the checkpoints of " +
                fs::path(dir).parent_path().string() + ", which it reads");
  }
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
  // Hugging Face's names and layout; a tied head is the embedding there.
  const bool tied = manifest.contains("model") && manifest["model"].value("tie_word_embeddings", false);
  auto write_safetensors = [&](const std::string& file) {
    std::vector<at::Tensor> keep;
    std::vector<TensorToWrite> tensors;
    for (const auto& item : params) {
      if (tied && item.key() == "lm_head.weight") continue;
      keep.push_back(item.value().to(at::kFloat).contiguous());
      tensors.push_back({HuggingFaceName(item.key()), keep.back().sizes().vec(), keep.back().data_ptr<float>()});
    }
    WriteSafetensors(file, tensors, bf16, {{"format", "pt"}, {"written_by", "pplab export-model"}});
    return static_cast<int>(tensors.size());
  };
  // (M.SAFETENSORS too: a pickle under that name would be refused by
  // --init-from, which reads safetensors whatever the name.)
  std::string lower = out_file;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  if (EndsWith(lower, ".safetensors")) return write_safetensors(out_file);
  struct stat info;
  if (!out_file.empty() && (out_file.back() == '/' || (stat(out_file.c_str(), &info) == 0 && S_ISDIR(info.st_mode)))) {
    // A model's folder as Hugging Face keeps one: the weights, config.json
    // and the run's tokenizer, all checked before anything is written.
    if (!manifest.contains("model")) throw Error("export-model: " + dir + "/manifest.json has no model config");
    const LlamaConfig config = LlamaConfigFromJson(manifest["model"].dump(), dir + "/manifest.json");
    std::string config_json = HuggingFaceConfigJson(config, bf16 ? "bfloat16" : "float32");
    std::string tokenizer;
    if (manifest.contains("tokenizer_file")) {
      const std::string copy = (fs::path(dir).parent_path() / manifest["tokenizer_file"].get<std::string>()).string();
      tokenizer = ReadTextFile(copy);
      // The special tokens' ids, which loaders otherwise take from their
      // defaults (Hugging Face's Llama: BOS 1, EOS 2; pplab's tokenizers
      // give PAD 0, BOS 2, EOS 3), so generation would stop at the BOS.
      const Tokenizer t = Tokenizer::Load(copy);
      // The copy must be the tokenizer the run trained with (generate
      // checks the same): another one gives the folder wrong text.
      if (manifest.contains("tokenizer") && manifest["tokenizer"].is_string() &&
          FnvHex(t.Fingerprint()) != manifest["tokenizer"].get<std::string>()) {
        throw Error("export-model: tokenizer " + copy + " (fingerprint " + FnvHex(t.Fingerprint()) +
                    ") is not the one the checkpoint was trained with (" + manifest["tokenizer"].get<std::string>() +
                    "); nothing written");
      }
      json doc = json::parse(config_json);
      doc["bos_token_id"] = t.Bos();
      doc["eos_token_id"] = t.Eos();
      doc["pad_token_id"] = t.Pad();
      config_json = doc.dump(2);
    }
    const fs::path folder(out_file);
    // The copy's name says its kind (tokenizer-<fingerprint>.model or .json).
    const bool json_tokenizer = EndsWith(manifest.value("tokenizer_file", ""), ".json");
    const std::string weights = (folder / "model.safetensors").string(),
                      config_file = (folder / "config.json").string(),
                      tokenizer_file = (folder / (json_tokenizer ? "tokenizer.json" : "tokenizer.model")).string();
    // Files a loader of the folder (train --init-from, generate) reads before
    // or instead of the ones written here: another model's, left behind.
    // Hugging Face's loaders also read tokenizer_config.json and
    // special_tokens_map.json (the tokenizer's class and special tokens) and
    // adapter_config.json (weights on top of these): none is written here.
    std::vector<std::string> shadowing = {"model.safetensors.index.json", "generation_config.json",
                                          "tokenizer_config.json", "special_tokens_map.json", "adapter_config.json"};
    if (tokenizer.empty() || json_tokenizer) shadowing.push_back("tokenizer.model");
    if (tokenizer.empty() || !json_tokenizer) shadowing.push_back("tokenizer.json");
    for (const std::string& name : shadowing) {
      std::error_code ec;
      if (fs::exists(fs::symlink_status(folder / name, ec))) {
        throw Error("export-model: -o " + out_file + " holds " + name + ", which loaders of the folder read " +
                    (name == "model.safetensors.index.json" ? "instead of the model.safetensors written here"
                     : name == "generation_config.json"     ? "for the ids that end a text"
                     : name == "tokenizer_config.json"      ? "for the tokenizer's class and special tokens"
                     : name == "special_tokens_map.json"    ? "for the special tokens"
                     : name == "adapter_config.json"        ? "as an adapter over these weights"
                     : tokenizer.empty()                    ? "as this model's tokenizer (this run has none)"
                                                            : "before the tokenizer written here") +
                    ": another model's, left behind? Remove it, or export into an empty folder");
      }
    }
    const bool made = ::mkdir(out_file.c_str(), 0755) == 0;
    if (!made && errno != EEXIST) {
      throw Error("export-model: cannot make the folder " + out_file + ": " + std::strerror(errno));
    }
    for (const std::string& file : {weights, config_file, tokenizer_file}) {
      if (file == tokenizer_file && tokenizer.empty()) continue;
      std::string why;
      try {
        CheckWritable(file);
      } catch (const Error& e) {
        why = "export-model: -o " + out_file + ": " + e.what();
      }
      if (why.empty() && WithinCheckpoint(file, dir)) {
        why = "export-model: " + file + " would replace a file of the checkpoint it reads";
      }
      if (!why.empty()) {
        if (made) ::rmdir(out_file.c_str());  // checked before anything is written: nothing left behind
        throw Error(why);
      }
    }
    const int count = write_safetensors(weights);
    WriteTextFile(config_file, config_json + "\n");
    if (!tokenizer.empty()) WriteTextFile(tokenizer_file, tokenizer);
    return count;
  }
  if (bf16) throw Error("export-model: --bf16 writes a .safetensors file; " + out_file + " would be torch.load's");
  const std::vector<char> bytes = torch::pickle_save(params);
  WriteFile(out_file,
            [&bytes](std::ostream& out) { out.write(bytes.data(), static_cast<std::streamsize>(bytes.size())); });
  return count;
}

int CheckpointStep(const std::string& manifest_json) { return json::parse(manifest_json).at("step").get<int>(); }

void LoadCheckpoint(const std::string& path, const std::string& manifest_json, AdamW& optimizer,
                    const TensorMap& share) {
  // Any shard may hold any parameter (another partition wrote it): read all.
  std::map<std::string, at::Tensor> all = ReadAllShards(path, json::parse(manifest_json));
  torch::NoGradGuard no_grad;
  // This rank's part of a stored tensor; its shape is checked after the cut,
  // so a tensor whose whole cannot be cut evenly is refused too.
  auto mine = [&](const std::string& name, const at::Tensor& t) -> at::Tensor {
    if (!share) return t;
    try {
      return share(name, t);
    } catch (const std::exception&) {
      throw Error(path + ": parameter " + name + " has another shape");
    }
  };
  for (auto& [name, p] : optimizer.Params()) {
    const auto it = all.find(name);
    if (it == all.end()) throw Error(path + ": the checkpoint has no parameter " + name);
    const at::Tensor value = mine(name, it->second);
    if (value.sizes() != p.sizes()) throw Error(path + ": parameter " + name + " has another shape");
    p.copy_(value);
    // A parameter with no state has none of the three; one part without
    // the others (a moment lost) was loaded as a fresh moment, unsaid.
    const size_t parts = all.count(name + kExpAvg) + all.count(name + kExpAvgSq) + all.count(name + kStep);
    if (parts == 0) continue;
    if (parts != 3 || all[name + kExpAvg].sizes() != it->second.sizes() ||
        all[name + kExpAvgSq].sizes() != it->second.sizes() || all[name + kStep].numel() != 1) {
      throw Error(path + ": the optimizer state of " + name + " is incomplete or has another shape");
    }
    const int64_t step = all[name + kStep].item<int64_t>();
    if (step < 0) throw Error(path + ": the optimizer state of " + name + " counts " + std::to_string(step) + " steps");
    AdamWState& s = optimizer.State()[name];
    s.exp_avg = mine(name, all[name + kExpAvg]).to(p.device()).clone();
    s.exp_avg_sq = mine(name, all[name + kExpAvgSq]).to(p.device()).clone();
    s.step = step;
  }
}

}  // namespace pplab
