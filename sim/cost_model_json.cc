// The cost model's JSON file (docs/cost-model.md): reading it with a check
// of every field, each error naming the file and the field, and writing it.
#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <tuple>

#include "schedules/action_kinds.h"
#include "schedules/error.h"
#include "schedules/json_reader.h"
#include "sim/cost_model.h"

namespace pplab {
namespace {

using nlohmann::json;

double NonNegative(const json& obj, const char* key, const std::string& at, double max) {
  const json& v = obj.at(key);
  if (!v.is_number()) throw Error(at + "." + key + " must be a number");
  const double x = v.get<double>();
  if (!std::isfinite(x) || x < 0) throw Error(at + "." + key + " must be finite and >= 0, got " + v.dump());
  if (x > max) throw Error(at + "." + key + " must be at most " + json(max).dump() + ", got " + v.dump());
  return x;
}

void CheckKeys(const json& obj, const std::vector<std::string>& known, const std::string& at) {
  if (!obj.is_object()) throw Error(at + " must be an object");
  if (const auto unknown = FirstUnknownField(obj, known)) throw Error(at + ": unknown field '" + *unknown + "'");
}

// KIND_p10_ms and KIND_p90_ms of `obj`: both or neither, p10 <= p90.
void ReadSpread(const json& obj, const std::string& kind, std::optional<Spread>& out, const std::string& at) {
  const std::string p10 = kind + "_p10_ms", p90 = kind + "_p90_ms";
  if (!obj.contains(p10) && !obj.contains(p90)) return;
  if (!obj.contains(p10) || !obj.contains(p90)) throw Error(at + ": give both " + p10 + " and " + p90);
  const Spread sp{MsToNs(NonNegative(obj, p10.c_str(), at, kMaxActionMs)),
                  MsToNs(NonNegative(obj, p90.c_str(), at, kMaxActionMs))};
  if (sp.p10 > sp.p90) {
    throw Error(at + "." + p10 + " must not exceed " + p90 + ", got " + obj[p10].dump() + " > " + obj[p90].dump());
  }
  out = sp;
}

// The median (the KIND_ms time) of a spread given with it must lie inside it.
void CheckMedian(const std::optional<TimeNs>& median, const std::optional<Spread>& spread, const std::string& kind,
                 const std::string& at) {
  if (!median || !spread) return;
  if (spread->p10 > *median || *median > spread->p90) {
    throw Error(at + ": " + kind + "_p10_ms <= " + kind + "_ms <= " + kind + "_p90_ms must hold, got " +
                json(NsToMs(spread->p10)).dump() + ", " + json(NsToMs(*median)).dump() + ", " +
                json(NsToMs(spread->p90)).dump());
  }
}

// The kinds of StageCost::device_share, as the file names them.
constexpr const char* kDeviceShareKinds[4] = {"forward", "backward", "backward_input", "backward_weight"};

// Overlays the fields present in `obj` onto `cost`.
void ReadStage(const json& obj, StageCost& cost, const std::string& at) {
  CheckKeys(obj,
            {"forward_ms",
             "backward_ms",
             "backward_input_ms",
             "backward_weight_ms",
             "activation_bytes",
             "weight_grad_bytes",
             "workspace_bytes",
             "forward_workspace_bytes",
             "backward_workspace_bytes",
             "backward_input_workspace_bytes",
             "backward_weight_workspace_bytes",
             "recomputed_bytes",
             "message_bytes",
             "input_bytes",
             "activation_includes_input",
             "input_grad_bytes",
             "cast_weight_bytes",
             "forward_send_bytes",
             "graph_slot_bytes",
             "forward_backward_ms",
             "overlap_penalty_ms",
             "param_bytes",
             "forward_p10_ms",
             "forward_p90_ms",
             "backward_p10_ms",
             "backward_p90_ms",
             "backward_input_p10_ms",
             "backward_input_p90_ms",
             "backward_weight_p10_ms",
             "backward_weight_p90_ms",
             "reduce_grad_ms",
             "reduce_grad_p10_ms",
             "reduce_grad_p90_ms",
             "forward_device_share",
             "backward_device_share",
             "backward_input_device_share",
             "backward_weight_device_share"},
            at);
  auto time = [&](const char* key, std::optional<TimeNs>& out) {
    if (obj.contains(key)) out = MsToNs(NonNegative(obj, key, at, kMaxActionMs));
  };
  auto bytes = [&](const char* key, Bytes& out) {
    if (obj.contains(key)) out = static_cast<Bytes>(std::llround(NonNegative(obj, key, at, kMaxBytes)));
  };
  auto spread = [&](const std::string& kind, std::optional<Spread>& out) { ReadSpread(obj, kind, out, at); };
  time("forward_ms", cost.forward);
  time("backward_ms", cost.backward);
  time("backward_input_ms", cost.backward_input);
  time("backward_weight_ms", cost.backward_weight);
  bytes("activation_bytes", cost.activation_bytes);
  bytes("weight_grad_bytes", cost.weight_grad_bytes);
  bytes("workspace_bytes", cost.workspace_bytes);
  bytes("recomputed_bytes", cost.recomputed_bytes);
  bytes("message_bytes", cost.message_bytes);
  bytes("cast_weight_bytes", cost.cast_weight_bytes);
  for (const auto& [key, out] :
       {std::pair<const char*, std::optional<Bytes>*>{"forward_workspace_bytes", &cost.forward_workspace_bytes},
        {"backward_workspace_bytes", &cost.backward_workspace_bytes},
        {"backward_input_workspace_bytes", &cost.backward_input_workspace_bytes},
        {"backward_weight_workspace_bytes", &cost.backward_weight_workspace_bytes},
        {"input_grad_bytes", &cost.input_grad_bytes},
        {"input_bytes", &cost.input_bytes},
        {"forward_send_bytes", &cost.forward_send_bytes},
        {"graph_slot_bytes", &cost.graph_slot_bytes}}) {
    if (obj.contains(key)) *out = static_cast<Bytes>(std::llround(NonNegative(obj, key, at, kMaxBytes)));
  }
  if (obj.contains("activation_includes_input")) {
    if (!obj["activation_includes_input"].is_boolean()) {
      throw Error(at + ".activation_includes_input must be true or false, got " +
                  obj["activation_includes_input"].dump());
    }
    cost.activation_includes_input = obj["activation_includes_input"].get<bool>();
  }
  if (cost.graph_slot_bytes && cost.recomputed_bytes > 0) {
    throw Error(at + ": graph_slot_bytes and recomputed_bytes: a stage that runs as CUDA graphs is not recomputed");
  }
  time("forward_backward_ms", cost.forward_backward);
  if (obj.contains("overlap_penalty_ms")) {
    cost.overlap_penalty = MsToNs(NonNegative(obj, "overlap_penalty_ms", at, kMaxActionMs));
  }
  bytes("param_bytes", cost.param_bytes);
  spread("forward", cost.forward_spread);
  spread("backward", cost.backward_spread);
  spread("backward_input", cost.backward_input_spread);
  spread("backward_weight", cost.backward_weight_spread);
  time("reduce_grad_ms", cost.reduce_grad);
  spread("reduce_grad", cost.reduce_grad_spread);
  for (int k = 0; k < 4; ++k) {
    const std::string key = std::string(kDeviceShareKinds[k]) + "_device_share";
    if (!obj.contains(key)) continue;
    const json& v = obj[key];
    if (!v.is_number() || !(v.get<double>() > 0) || v.get<double>() > 1) {
      throw Error(at + "." + key + " must be a number in (0, 1], got " + v.dump());
    }
    cost.device_share[k] = v.get<double>();
  }
}

// Each stage's spreads against the times given beside them.
void CheckStageMedians(const StageCost& c, const std::string& at) {
  CheckMedian(c.forward, c.forward_spread, "forward", at);
  CheckMedian(c.backward, c.backward_spread, "backward", at);
  CheckMedian(c.backward_input, c.backward_input_spread, "backward_input", at);
  CheckMedian(c.backward_weight, c.backward_weight_spread, "backward_weight", at);
  CheckMedian(c.reduce_grad, c.reduce_grad_spread, "reduce_grad", at);
  // Without backward_input_ms a split schedule's I is backward_ms -
  // backward_weight_ms (the --w-time flag refuses the same).
  if (c.backward && c.backward_weight && !c.backward_input && *c.backward_weight > *c.backward) {
    throw Error(at + ": backward_weight_ms " + json(NsToMs(*c.backward_weight)).dump() + " exceeds backward_ms " +
                json(NsToMs(*c.backward)).dump() +
                ", of which it is a part (give backward_input_ms too where I and W were timed apart)");
  }
}

Link ReadLink(const json& obj, Link link, const std::string& at, const std::vector<std::string>& extra_keys = {}) {
  std::vector<std::string> known = {"latency_ms", "bandwidth_gbps"};
  known.insert(known.end(), extra_keys.begin(), extra_keys.end());
  CheckKeys(obj, known, at);
  if (obj.contains("latency_ms")) link.latency = MsToNs(NonNegative(obj, "latency_ms", at, kMaxActionMs));
  if (obj.contains("bandwidth_gbps")) {
    link.bandwidth_gbps = NonNegative(obj, "bandwidth_gbps", at, 1e12);
    if (link.bandwidth_gbps > 0 && link.bandwidth_gbps < kMinBandwidthGbps) {
      throw Error(at + ".bandwidth_gbps must be 0 (infinite) or at least " + json(kMinBandwidthGbps).dump());
    }
  }
  return link;
}

// The per-step costs by name, as the file spells them.
std::vector<std::tuple<std::string, TimeNs*, std::optional<Spread>*>> StepFields(StepCosts& step) {
  return {{"optimizer", &step.optimizer, &step.optimizer_spread},
          {"clip", &step.clip, &step.clip_spread},
          {"loss_allreduce", &step.loss_allreduce, &step.loss_allreduce_spread},
          {"norm_allreduce", &step.norm_allreduce, &step.norm_allreduce_spread},
          {"tied_exchange", &step.tied_exchange, &step.tied_exchange_spread},
          {"copy_exchange", &step.copy_exchange, &step.copy_exchange_spread}};
}

// "step": {"optimizer_ms": .., "clip_ms": .., "loss_allreduce_ms": .., "norm_allreduce_ms": ..,
// "tied_exchange_ms": .., "copy_exchange_ms": ..}, each with
// optional KIND_p10_ms / KIND_p90_ms.
StepCosts ReadStepCosts(const json& obj, const std::string& at) {
  std::vector<std::string> known;
  StepCosts step;
  for (const auto& [kind, time, spread] : StepFields(step)) {
    for (const char* suffix : {"_ms", "_p10_ms", "_p90_ms"}) known.push_back(kind + suffix);
  }
  CheckKeys(obj, known, at);
  for (const auto& [kind, time, spread] : StepFields(step)) {
    const std::string key = kind + "_ms";
    if (obj.contains(key)) *time = MsToNs(NonNegative(obj, key.c_str(), at, kMaxActionMs));
    ReadSpread(obj, kind, *spread, at);
    if (*spread) CheckMedian(*time, *spread, kind, at);
  }
  return step;
}

// A non-empty array of integers in [lo, hi]; `list_rule` and `item_rule`
// say what it must be in the errors, which name the field and the entry.
std::vector<int> ReadIntArray(const json& list, const std::string& at, long long lo, long long hi,
                              const std::string& list_rule, const std::string& item_rule) {
  if (!list.is_array() || list.empty()) throw Error(at + " must be " + list_rule);
  std::vector<int> out;
  for (size_t i = 0; i < list.size(); ++i) {
    const json& d = list[i];
    if (!d.is_number_integer() || d.get<long long>() < lo || d.get<long long>() > hi) {
      throw Error(at + "[" + std::to_string(i) + "] must be " + item_rule + ", got " + d.dump());
    }
    out.push_back(static_cast<int>(d.get<long long>()));
  }
  return out;
}

// "devices": [0, 0, 1, 1]: the device of each rank.
std::vector<int> ReadDevices(const json& list, const std::string& at) {
  return ReadIntArray(list, at, 0, 1LL << 30, "a non-empty array of device ids, one per rank",
                      "an integer device id in [0, 2^30]");
}

// "device_slots": [2, 1]: compute actions each device id runs at once.
std::vector<int> ReadDeviceSlots(const json& list, const std::string& at) {
  return ReadIntArray(list, at, 1, 1LL << 20, "a non-empty array of positive integers, one per device id",
                      "an integer in [1, 2^20]");
}

constexpr std::pair<MessageMemory::SentFreed, const char*> kSentFreedNames[] = {
    {MessageMemory::SentFreed::kStepEnd, "step_end"},
    {MessageMemory::SentFreed::kNextSendAfterDelivery, "next_send_after_delivery"}};
constexpr std::pair<MessageMemory::ReceivePosted, const char*> kReceivePostedNames[] = {
    {MessageMemory::ReceivePosted::kAtUse, "at_use"},
    {MessageMemory::ReceivePosted::kOneActionAhead, "one_action_ahead"}};

// "message_memory": {"sent_freed": "step_end" | "next_send_after_delivery",
//                    "receive_posted": "at_use" | "one_action_ahead"}, both given,
//                    and optionally "sent_view": true | false (default false).
MessageMemory ReadMessageMemory(const json& obj, const std::string& at) {
  CheckKeys(obj, {"sent_freed", "receive_posted", "sent_view"}, at);
  MessageMemory m;
  auto pick = [&](const char* key, const auto& names, auto& out) {
    std::string choices;
    for (const auto& [value, name] : names) {
      choices += (choices.empty() ? "\"" : " or \"") + std::string(name) + "\"";
      if (obj.contains(key) && obj[key] == name) {
        out = value;
        return;
      }
    }
    throw Error(at + "." + key + " must be " + choices + (obj.contains(key) ? ", got " + obj[key].dump() : ""));
  };
  pick("sent_freed", kSentFreedNames, m.sent_freed);
  pick("receive_posted", kReceivePostedNames, m.receive_posted);
  if (obj.contains("sent_view")) {
    if (!obj["sent_view"].is_boolean())
      throw Error(at + ".sent_view must be true or false, got " + obj["sent_view"].dump());
    m.sent_view = obj["sent_view"].get<bool>();
  }
  return m;
}

json MessageMemoryToJson(const MessageMemory& m) {
  json j = json::object();
  for (const auto& [value, name] : kSentFreedNames) {
    if (value == m.sent_freed) j["sent_freed"] = name;
  }
  for (const auto& [value, name] : kReceivePostedNames) {
    if (value == m.receive_posted) j["receive_posted"] = name;
  }
  j["sent_view"] = m.sent_view;
  return j;
}

json StageToJson(const StageCost& c) {
  json j = json::object();
  if (c.forward) j["forward_ms"] = NsToMs(*c.forward);
  if (c.backward) j["backward_ms"] = NsToMs(*c.backward);
  if (c.backward_input) j["backward_input_ms"] = NsToMs(*c.backward_input);
  if (c.backward_weight) j["backward_weight_ms"] = NsToMs(*c.backward_weight);
  j["activation_bytes"] = c.activation_bytes;
  j["weight_grad_bytes"] = c.weight_grad_bytes;
  if (c.workspace_bytes != 0) j["workspace_bytes"] = c.workspace_bytes;
  if (c.forward_workspace_bytes) j["forward_workspace_bytes"] = *c.forward_workspace_bytes;
  if (c.backward_workspace_bytes) j["backward_workspace_bytes"] = *c.backward_workspace_bytes;
  if (c.backward_input_workspace_bytes) j["backward_input_workspace_bytes"] = *c.backward_input_workspace_bytes;
  if (c.backward_weight_workspace_bytes) j["backward_weight_workspace_bytes"] = *c.backward_weight_workspace_bytes;
  if (c.recomputed_bytes != 0) j["recomputed_bytes"] = c.recomputed_bytes;
  j["message_bytes"] = c.message_bytes;
  if (c.input_bytes) j["input_bytes"] = *c.input_bytes;
  if (c.activation_includes_input) j["activation_includes_input"] = *c.activation_includes_input;
  if (c.forward_send_bytes) j["forward_send_bytes"] = *c.forward_send_bytes;
  if (c.input_grad_bytes) j["input_grad_bytes"] = *c.input_grad_bytes;
  if (c.cast_weight_bytes != 0) j["cast_weight_bytes"] = c.cast_weight_bytes;
  if (c.graph_slot_bytes) j["graph_slot_bytes"] = *c.graph_slot_bytes;
  if (c.forward_backward) j["forward_backward_ms"] = NsToMs(*c.forward_backward);
  if (c.overlap_penalty != 0) j["overlap_penalty_ms"] = NsToMs(c.overlap_penalty);
  if (c.param_bytes != 0) j["param_bytes"] = c.param_bytes;
  if (c.reduce_grad) j["reduce_grad_ms"] = NsToMs(*c.reduce_grad);
  for (int k = 0; k < 4; ++k) {
    if (c.device_share[k]) j[std::string(kDeviceShareKinds[k]) + "_device_share"] = *c.device_share[k];
  }
  for (const auto& [kind, sp] : {std::pair<std::string, const std::optional<Spread>*>{"forward", &c.forward_spread},
                                 {"backward", &c.backward_spread},
                                 {"backward_input", &c.backward_input_spread},
                                 {"backward_weight", &c.backward_weight_spread},
                                 {"reduce_grad", &c.reduce_grad_spread}}) {
    if (!*sp) continue;
    j[kind + "_p10_ms"] = NsToMs((*sp)->p10);
    j[kind + "_p90_ms"] = NsToMs((*sp)->p90);
  }
  return j;
}

}  // namespace

CostModel CostModel::FromJson(const std::string& text, const std::string& origin) {
  try {
    CostModel m = FromJsonDoc(text, origin);
    m.origin_ = origin;
    return m;
  } catch (const json::exception& e) {
    throw Error(origin + ": " + JsonErrorText(e));
  }
}

CostModel CostModel::FromJsonDoc(const std::string& text, const std::string& origin) {
  json doc = ParseJsonStrict(text, origin);  // refuses a key given twice
  CheckKeys(doc,
            {"format", "version", "stages", "default", "num_stages", "link", "links", "meta", "data_parallel",
             "devices", "device_slots", "step", "message_memory", "overlapped_pairs"},
            origin);
  if (doc.value("format", std::string()) != "pplab.cost") {
    throw Error(origin + ": field 'format' must be \"pplab.cost\"");
  }
  if (!doc.contains("version") || doc["version"] != 1) {
    throw Error(origin + ": field 'version' must be 1");
  }
  StageCost base;
  if (doc.contains("default")) ReadStage(doc["default"], base, origin + ": default");
  CostModel m;
  if (doc.contains("stages")) {
    const json& stages = doc["stages"];
    if (!stages.is_array() || stages.empty()) throw Error(origin + ": field 'stages' must be a non-empty array");
    for (size_t s = 0; s < stages.size(); ++s) {
      StageCost c = base;
      ReadStage(stages[s], c, origin + ": stages[" + std::to_string(s) + "]");
      CheckStageMedians(c, origin + ": stages[" + std::to_string(s) + "]");
      m.stages_.push_back(c);
    }
    if (doc.contains("num_stages") && doc["num_stages"] != stages.size()) {
      throw Error(origin + ": field 'num_stages' disagrees with the length of 'stages'");
    }
  } else {
    if (!doc.contains("num_stages") || !doc["num_stages"].is_number_integer() ||
        doc["num_stages"].get<long long>() < 1 || doc["num_stages"].get<long long>() > kMaxStages) {
      throw Error(origin +
                  ": give either 'stages' (one entry per stage) or 'default' with an integer 'num_stages' in [1, " +
                  std::to_string(kMaxStages) + "]");
    }
    CheckStageMedians(base, origin + ": default");
    m.stages_.assign(static_cast<size_t>(doc["num_stages"].get<long long>()), base);
  }
  if (doc.contains("link")) m.link_ = ReadLink(doc["link"], Link{}, origin + ": link");
  if (doc.contains("links")) {
    if (!doc["links"].is_array()) throw Error(origin + ": field 'links' must be an array");
    for (size_t i = 0; i < doc["links"].size(); ++i) {
      const json& l = doc["links"][i];
      const std::string at = origin + ": links[" + std::to_string(i) + "]";
      auto rank = [&](const char* key) {
        if (!l.is_object() || !l.contains(key) || !l[key].is_number_integer() || l[key].get<long long>() < 0 ||
            l[key].get<long long>() > (1LL << 30)) {
          throw Error(at + " needs integer 'from' and 'to' ranks");
        }
        return static_cast<RankId>(l[key].get<long long>());
      };
      const RankId from = rank("from"), to = rank("to");
      if (from == to) throw Error(at + " links rank " + std::to_string(from) + " to itself");
      if (!m.links_.emplace(std::make_pair(from, to), ReadLink(l, m.link_, at, {"from", "to"})).second) {
        throw Error(at + " gives the link from rank " + std::to_string(from) + " to rank " + std::to_string(to) +
                    " a second time");
      }
    }
  }
  if (doc.contains("data_parallel")) {
    const json& dp = doc["data_parallel"];
    const std::string at = origin + ": data_parallel";
    if (!dp.is_object() || !dp.contains("degree") || !dp["degree"].is_number_integer() ||
        dp["degree"].get<long long>() < 1 || dp["degree"].get<long long>() > (1LL << 20)) {
      throw Error(at + " needs an integer 'degree' in [1, 1048576]");
    }
    m.dp_.degree = static_cast<int>(dp["degree"].get<long long>());
    m.dp_.link = ReadLink(dp, Link{}, at, {"degree"});
  }
  if (doc.contains("step")) m.step_ = ReadStepCosts(doc["step"], origin + ": step");
  if (doc.contains("message_memory")) {
    m.messages_ = ReadMessageMemory(doc["message_memory"], origin + ": message_memory");
  }
  if (doc.contains("overlapped_pairs")) {
    const json& pairs = doc["overlapped_pairs"];
    if (pairs != "at_once" && pairs != "in_turn") {
      throw Error(origin + ": field 'overlapped_pairs' must be \"at_once\" or \"in_turn\", got " +
                  pairs.dump().substr(0, 40));
    }
    m.pairs_in_turn_ = pairs == "in_turn";
  }
  if (doc.contains("devices")) m.devices_ = ReadDevices(doc["devices"], origin + ": devices");
  if (doc.contains("device_slots")) m.device_slots_ = ReadDeviceSlots(doc["device_slots"], origin + ": device_slots");
  if (doc.contains("meta")) {
    m.meta_json = doc["meta"].dump();
    ParseProfileMeta(m.meta_json, static_cast<int>(m.stages_.size()), origin);  // validates a profiler's meta
  }
  // Resolve every stage once so a model that cannot cost F fails at load.
  // (Without 'stages', every stage is 'default', and the error names it.)
  const bool listed = doc.contains("stages");
  const auto at = [&](size_t s) { return origin + ": " + (listed ? "stages[" + std::to_string(s) + "]" : "default"); };
  for (size_t s = 0; s < m.stages_.size(); ++s) {
    if (!m.stages_[s].forward) throw Error(at(s) + " has no forward_ms");
    if (!m.stages_[s].backward && !m.stages_[s].backward_input) {
      throw Error(at(s) + " has neither backward_ms nor backward_input_ms");
    }
  }
  return m;
}

std::string CostModel::ToJson() const {
  json stages = json::array();
  for (const StageCost& c : stages_) stages.push_back(StageToJson(c));
  json links = json::array();
  for (const auto& [pair, link] : links_) {
    links.push_back({{"from", pair.first},
                     {"to", pair.second},
                     {"latency_ms", NsToMs(link.latency)},
                     {"bandwidth_gbps", link.bandwidth_gbps}});
  }
  json doc = {{"format", "pplab.cost"},
              {"version", 1},
              {"stages", stages},
              {"link", {{"latency_ms", NsToMs(link_.latency)}, {"bandwidth_gbps", link_.bandwidth_gbps}}},
              {"links", links},
              {"meta", json::parse(meta_json)}};
  if (pairs_in_turn_) doc["overlapped_pairs"] = "in_turn";
  if (!devices_.empty()) doc["devices"] = devices_;
  if (!device_slots_.empty()) doc["device_slots"] = device_slots_;
  if (messages_) doc["message_memory"] = MessageMemoryToJson(*messages_);
  StepCosts step = step_;
  json step_json = json::object();
  bool any_step = false;
  for (const auto& [kind, time, spread] : StepFields(step)) {
    // (Files of models without tied embeddings stay as they were.)
    if ((kind == "tied_exchange" || kind == "copy_exchange") && *time == 0 && !*spread) continue;
    step_json[kind + "_ms"] = NsToMs(*time);
    any_step = any_step || *time != 0 || *spread;
    if (!*spread) continue;
    step_json[kind + "_p10_ms"] = NsToMs((*spread)->p10);
    step_json[kind + "_p90_ms"] = NsToMs((*spread)->p90);
  }
  if (any_step) doc["step"] = step_json;
  if (dp_.degree != 1) {
    doc["data_parallel"] = {
        {"degree", dp_.degree}, {"latency_ms", NsToMs(dp_.link.latency)}, {"bandwidth_gbps", dp_.link.bandwidth_gbps}};
  }
  return doc.dump(2) + "\n";
}

}  // namespace pplab
