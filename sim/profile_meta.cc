#include "sim/profile_meta.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <numeric>

#include "schedules/error.h"
#include "schedules/int_list.h"
#include "schedules/json_reader.h"

namespace pplab {

using nlohmann::json;

std::optional<ProfileMeta> ParseProfileMeta(const std::string& meta_json, int num_stages, const std::string& origin) {
  json meta;
  try {
    meta = json::parse(meta_json);
  } catch (const json::parse_error&) {
    throw Error(origin + ": field 'meta' is not valid JSON");
  }
  if (!meta.is_object() || !meta.contains("source") || meta["source"] != kProfileSource) return std::nullopt;
  const std::string at = origin + ": meta";
  if (const auto unknown =
          FirstUnknownField(meta, {"source", "model", "config", "partition", "microbatch_size", "seq_len", "device",
                                   "threads_per_rank", "ranks", "precision", "attention", "tensor_parallel",
                                   "sequence_parallel", "shared_device", "cuda_graphs", "extra", "recomputed"})) {
    throw Error(at + " (source \"pplab profile\"): unknown field '" + *unknown + "'");
  }
  auto need = [&](const char* key) -> const json& {
    if (!meta.contains(key)) throw Error(at + "." + key + " is missing (a \"pplab profile\" meta needs it)");
    return meta[key];
  };
  auto text = [&](const char* key) {
    const json& v = need(key);
    if (!v.is_string() || v.get<std::string>().empty()) throw Error(at + "." + key + " must be a non-empty string");
    return v.get<std::string>();
  };
  auto positive = [&](const char* key) {
    const json& v = need(key);
    if (!v.is_number_integer() || v.get<long long>() < 1 || v.get<long long>() > (1LL << 30)) {
      throw Error(at + "." + key + " must be a positive integer, got " + v.dump());
    }
    return v.get<int>();
  };
  ProfileMeta p;
  p.model = text("model");
  const json& config = need("config");
  if (!config.is_object()) throw Error(at + ".config must be an object (the model config), got " + config.dump());
  p.config_json = config.dump();
  p.partition = text("partition");
  p.microbatch_size = positive("microbatch_size");
  p.seq_len = positive("seq_len");
  p.device = text("device");
  p.threads_per_rank = positive("threads_per_rank");
  p.ranks = positive("ranks");
  if (meta.contains("precision")) {
    const json& v = meta["precision"];
    if (!v.is_string()) throw Error(at + ".precision must be \"fp32\" or \"bf16\", got " + v.dump());
    p.precision = ParsePrecision(v.get<std::string>(), at + ".precision");
  }
  if (meta.contains("attention")) {
    const json& v = meta["attention"];
    if (!v.is_string() || (v != "sdpa" && v != "explicit")) {
      throw Error(at + ".attention must be \"sdpa\" or \"explicit\", got " + v.dump());
    }
    p.attention = v.get<std::string>();
  }
  if (meta.contains("tensor_parallel")) p.tensor_parallel = positive("tensor_parallel");
  if (meta.contains("sequence_parallel")) {
    const json& v = meta["sequence_parallel"];
    if (!v.is_boolean()) throw Error(at + ".sequence_parallel must be true or false, got " + v.dump());
    p.sequence_parallel = v.get<bool>();
    if (p.sequence_parallel && p.tensor_parallel < 2) {
      throw Error(at + ".sequence_parallel is true but tensor_parallel is " + std::to_string(p.tensor_parallel) +
                  " (it needs 2 or more)");
    }
  }
  if (meta.contains("shared_device")) {
    const json& v = meta["shared_device"];
    if (!v.is_string() || (v != "none" && v != "turns" && v != "together")) {
      throw Error(at + ".shared_device must be \"none\", \"turns\" or \"together\", got " + v.dump());
    }
    p.shared_device = v.get<std::string>();
  }
  if (meta.contains("cuda_graphs")) {
    const json& v = meta["cuda_graphs"];
    if (!v.is_boolean()) throw Error(at + ".cuda_graphs must be true or false, got " + v.dump());
    p.cuda_graphs = v.get<bool>();
  }
  // The partition is layers per stage, one positive count per stage of the file.
  const std::optional<std::vector<int>> layers = ParseIntList(p.partition);
  if (!layers || std::any_of(layers->begin(), layers->end(), [](int n) { return n < 1; })) {
    throw Error(at + ".partition must be layers per stage like \"2,2\", got \"" + p.partition + "\"");
  }
  const int entries = static_cast<int>(layers->size());
  if (entries != num_stages) {
    throw Error(at + ".partition \"" + p.partition + "\" has " + std::to_string(entries) + " stages but the file has " +
                std::to_string(num_stages));
  }
  // The stages hold the config's layers, each once.
  if (config.contains("num_hidden_layers") && config["num_hidden_layers"].is_number_integer()) {
    const long long sum = std::accumulate(layers->begin(), layers->end(), 0LL);
    if (sum != config["num_hidden_layers"].get<long long>()) {
      throw Error(at + ".partition \"" + p.partition + "\" holds " + std::to_string(sum) +
                  " layers but meta.config.num_hidden_layers is " + config["num_hidden_layers"].dump());
    }
  }
  if (num_stages % p.ranks != 0) {
    throw Error(at + ".ranks " + std::to_string(p.ranks) + " does not divide the file's " + std::to_string(num_stages) +
                " stages");
  }
  return p;
}

std::string ProfileMetaToJson(const ProfileMeta& p) {
  json doc{{"source", kProfileSource},
           {"model", p.model},
           {"config", json::parse(p.config_json)},
           {"partition", p.partition},
           {"microbatch_size", p.microbatch_size},
           {"seq_len", p.seq_len},
           {"device", p.device},
           {"threads_per_rank", p.threads_per_rank},
           {"ranks", p.ranks},
           {"precision", PrecisionName(p.precision)},
           {"attention", p.attention},
           {"tensor_parallel", p.tensor_parallel},
           {"sequence_parallel", p.sequence_parallel}};
  if (p.shared_device != "none") doc["shared_device"] = p.shared_device;
  if (p.cuda_graphs) doc["cuda_graphs"] = true;
  return doc.dump();
}

}  // namespace pplab
