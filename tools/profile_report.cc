// The cost model's JSON and the table of a profile (tools/profile_report.h).
#include "tools/profile_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "models/llama.h"
#include "sim/precision.h"
#include "tools/report.h"

namespace pplab::cli {
namespace {

// KIND_ms, KIND_p10_ms and KIND_p90_ms of one measured time.
void PutSpread(nlohmann::json& into, const std::string& kind, const SampleSpread& x) {
  into[kind + "_ms"] = x.median;
  into[kind + "_p10_ms"] = x.p10;
  into[kind + "_p90_ms"] = x.p90;
}

nlohmann::json SpreadJson(const SampleSpread& x) { return {{"median", x.median}, {"p10", x.p10}, {"p90", x.p90}}; }

// The step's work as the simulator takes it: each cost from the rank whose
// median is the largest (every rank waits for the slowest before the next
// step), with that rank's spread.
nlohmann::json StepJson(const std::vector<StepProfile>& ranks) {
  nlohmann::json step = nlohmann::json::object();
  for (const auto& [kind, member] :
       {std::pair<const char*, SampleSpread StepProfile::*>{"loss_allreduce", &StepProfile::loss_allreduce},
        {"norm_allreduce", &StepProfile::norm_allreduce},
        {"clip", &StepProfile::clip},
        {"optimizer", &StepProfile::optimizer},
        {"tied_exchange", &StepProfile::tied_exchange}}) {
    SampleSpread slowest;
    for (const StepProfile& r : ranks) {
      if ((r.*member).median >= slowest.median) slowest = r.*member;
    }
    // (A model without tied embeddings has no swap: its file has no entry.)
    if (member == &StepProfile::tied_exchange && slowest.p90 == 0) continue;
    PutSpread(step, kind, slowest);
  }
  return step;
}

// A stage's time in ms, or "-" where it was not timed (I and W of graphed
// stages).
std::string Ms(const nlohmann::json& stage, const char* key) {
  return stage.contains(key) ? Fixed(stage[key].get<double>(), 3) : "-";
}

}  // namespace

nlohmann::json CostJson(const ProfileCliOptions& o, const LlamaConfig& config, const Partition& partition,
                        const ProfileResult& r, int threads, const DeviceMap& devices, int turns) {
  using nlohmann::json;
  json stages = json::array(), extra_stages = json::array();
  // What a forward send held as a share of its message, over the stages
  // whose send was measured: for the stages whose next stage was on their
  // own rank here, but may not be in a plan.
  double sent = 0, held = 0;
  for (const StageProfile& p : r.stages) {
    if (!p.forward_send_bytes) continue;
    sent += static_cast<double>(p.forward_message_bytes);
    held += static_cast<double>(*p.forward_send_bytes);
  }
  for (const StageProfile& p : r.stages) {
    const bool last = p.stage == partition.NumStages() - 1;
    json stage = json::object();
    PutSpread(stage, "forward", p.forward);
    PutSpread(stage, "backward", p.backward);
    if (o.dp > 1) PutSpread(stage, "reduce_grad", p.reduce_grad);
    stage.update(json{{"activation_bytes", p.activation_bytes},
                      {"weight_grad_bytes", p.weight_grad_bytes},
                      // The largest of F's, B's and I's temporaries.
                      {"workspace_bytes", std::max({p.forward_transient_bytes, p.backward_transient_bytes,
                                                    p.backward_input_transient_bytes})},
                      // F's and B's own (I's and W's below).
                      {"forward_workspace_bytes", p.forward_transient_bytes},
                      {"backward_workspace_bytes", p.backward_transient_bytes},
                      // What the stage sends: its outputs, or on the last stage its input gradient.
                      {"message_bytes", last ? p.backward_message_bytes : p.forward_message_bytes},
                      // What the stage keeps from F to B when it is recomputed.
                      {"input_bytes", p.input_bytes}});
    if (p.forward_send_bytes) {
      stage["forward_send_bytes"] = *p.forward_send_bytes;
    } else if (!last && sent > 0) {
      stage["forward_send_bytes"] = std::llround(held / sent * static_cast<double>(p.forward_message_bytes));
    }
    // I and W, timed where the stages were eager (graphed ones run whole
    // backwards).
    if (!o.cuda_graphs) {
      PutSpread(stage, "backward_input", p.backward_input);
      PutSpread(stage, "backward_weight", p.backward_weight);
      stage["backward_input_workspace_bytes"] = p.backward_input_transient_bytes;
      stage["backward_weight_workspace_bytes"] = p.backward_weight_transient_bytes;
    }
    if (p.graph_slot_bytes) stage["graph_slot_bytes"] = *p.graph_slot_bytes;
    if (p.stage > 0) stage["input_grad_bytes"] = p.input_grad_bytes;
    stage["cast_weight_bytes"] = p.cast_weight_bytes;
    // On a CPU: how much of its cores each kind keeps busy (StageProfile::
    // cpu_share), the share of its device slot the simulator holds for it.
    for (const auto& [kind, k] :
         {std::pair<const char*, int>{"forward", 0}, {"backward", 1}, {"backward_input", 2}, {"backward_weight", 3}}) {
      // (At least 0.001: the file's shares are positive.)
      if (p.cpu_share[k] >= 0) stage[std::string(kind) + "_device_share"] = std::max(1e-3, p.cpu_share[k]);
    }
    // Whether activation_bytes counts a received input of the stage's own.
    stage["activation_includes_input"] = p.input_received;
    stages.push_back(stage);
    extra_stages.push_back({{"stage", p.stage},
                            {"rank", p.rank},
                            {"layers", partition.End(p.stage) - partition.Begin(p.stage)},
                            {"forward_message_bytes", p.forward_message_bytes},
                            {"backward_message_bytes", p.backward_message_bytes},
                            {"output_bytes", p.output_bytes},
                            {"forward_transient_bytes", p.forward_transient_bytes},
                            {"backward_transient_bytes", p.backward_transient_bytes},
                            {"backward_input_transient_bytes", p.backward_input_transient_bytes},
                            {"backward_weight_transient_bytes", p.backward_weight_transient_bytes}});
  }
  // pplab's executor runs an OVERLAP_F_B's forward and backward parts one
  // after the other (docs/runtime.md): a plan of DualPipe costs them so.
  json doc = {{"format", "pplab.cost"},
              {"version", 1},
              {"stages", stages},
              {"step", StepJson(r.step)},
              {"overlapped_pairs", "in_turn"}};
  // How the transport that carried the messages holds their buffers
  // (docs/cost-model.md, "Message buffers"); one pipeline rank had none.
  if (o.ranks > 1)
    doc["message_memory"] = {
        {"sent_freed", r.buffers.sends_freed_after_delivery ? "next_send_after_delivery" : "step_end"},
        {"receive_posted", r.buffers.receives_allocated_when_posted ? "one_action_ahead" : "at_use"},
        {"sent_view", r.buffers.sends_view_tensors}};
  if (o.dp > 1) doc["data_parallel"] = {{"degree", o.dp}};
  // Ranks that time-sliced a device were timed in turns, each with the
  // device's slots to itself: the simulator queues them for the device
  // (docs/cost-model.md) as the run did. Timed together, each time already
  // holds the others' share of the device: the file gives the device as
  // many slots as it has ranks, so the simulator runs them side by side.
  const bool shared = Oversubscribed(devices);
  if (turns > 1) {
    doc["devices"] = devices.devices;
    doc["device_slots"] = devices.device_slots;
  } else if (shared && o.shared_device == "together") {
    doc["devices"] = devices.devices;
    doc["device_slots"] = SlotsForRanks(devices);
  }
  json step_per_rank = json::array();
  for (const StepProfile& s : r.step) {
    json one = {{"loss_allreduce", SpreadJson(s.loss_allreduce)},
                {"norm_allreduce", SpreadJson(s.norm_allreduce)},
                {"clip", SpreadJson(s.clip)},
                {"optimizer", SpreadJson(s.optimizer)}};
    if (s.tied_exchange.p90 > 0) one["tied_exchange"] = SpreadJson(s.tied_exchange);
    step_per_rank.push_back(one);
  }
  json links = json::array(), extra_links = json::array();
  for (const LinkProfile& l : r.links) {
    json samples = json::array();
    for (const LinkSample& s : l.samples) samples.push_back({{"bytes", s.bytes}, {"one_way_ms", s.one_way_ms}});
    extra_links.push_back({{"from", l.from},
                           {"to", l.to},
                           {"latency_ms", l.latency_ms},
                           {"bandwidth_gbps", l.bandwidth_gbps},
                           {"samples", samples}});
    if (r.links.size() > 1) {  // one pair is the default link; several get their own entries, both ways
      links.push_back(
          {{"from", l.from}, {"to", l.to}, {"latency_ms", l.latency_ms}, {"bandwidth_gbps", l.bandwidth_gbps}});
      links.push_back(
          {{"from", l.to}, {"to", l.from}, {"latency_ms", l.latency_ms}, {"bandwidth_gbps", l.bandwidth_gbps}});
    }
  }
  if (const LinkProfile* l = MedianLink(r.links))
    doc["link"] = {{"latency_ms", l->latency_ms}, {"bandwidth_gbps", l->bandwidth_gbps}};
  if (!links.empty()) doc["links"] = links;
  // Per rank: the executor's overhead, and whether the device waited for
  // the host's launches (null on the host clock, which has no lag).
  double overhead = 0;
  json overhead_per_rank = json::array(), lag_per_rank = json::array(), action_per_rank = json::array(),
       bound_per_rank = json::array();
  for (const ActionOverhead& x : r.action_overhead) {
    overhead += x.overhead_ms;
    overhead_per_rank.push_back(x.overhead_ms);
    const bool lag = std::isfinite(x.device_lag_ms);
    lag_per_rank.push_back(lag ? json(x.device_lag_ms) : json(nullptr));
    action_per_rank.push_back(x.action_ms);
    bound_per_rank.push_back(lag ? json(LaunchBoundLag(x.device_lag_ms, x.action_ms)) : json(nullptr));
  }
  if (!r.action_overhead.empty()) overhead /= static_cast<double>(r.action_overhead.size());
  doc["meta"] = {{"source", "pplab profile"},
                 {"model", o.model},
                 {"config", json::parse(config.ToJson())},
                 {"partition", partition.ToString()},
                 {"microbatch_size", o.microbatch_size},
                 {"seq_len", o.seq_len},
                 {"device", o.device},
                 {"threads_per_rank", threads},
                 {"ranks", o.ranks},
                 {"precision", PrecisionName(ParsePrecision(o.precision))},
                 {"attention", AttentionKindName(ResolveAttention(ParseAttentionKind(o.attention)))},
                 {"tensor_parallel", o.tp},
                 {"sequence_parallel", o.sequence_parallel},
                 {"shared_device", shared ? o.shared_device : "none"},
                 {"cuda_graphs", o.cuda_graphs},
                 {"extra",
                  {{"virtual_stages", o.virtual_stages},
                   {"dp", o.dp},
                   {"warmup", o.warmup},
                   {"repeats", o.repeats},
                   {"seed", o.seed},
                   {"action_overhead_ms", overhead},
                   {"devices", devices.devices},
                   {"device_slots", devices.device_slots},
                   {"measure_turns", turns},
                   {"action_overhead_ms_per_rank", overhead_per_rank},
                   {"device_lag_ms_per_rank", lag_per_rank},
                   {"action_ms_per_rank", action_per_rank},
                   {"launch_bound_per_rank", bound_per_rank},
                   {"step_per_world_rank", step_per_rank},
                   {"stages", extra_stages},
                   {"links", extra_links}}}};
  return doc;
}

std::string LaunchBoundLine(const nlohmann::json& meta) {
  const nlohmann::json& extra = meta["extra"];
  if (meta.value("cuda_graphs", false) || !extra.contains("launch_bound_per_rank")) return "";
  std::string ranks, figures;
  for (size_t r = 0; r < extra["launch_bound_per_rank"].size(); ++r) {
    if (extra["launch_bound_per_rank"][r] != true) continue;
    ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
    figures += (figures.empty() ? "" : "; ") + Fixed(extra["device_lag_ms_per_rank"][r].get<double>(), 3) +
               " ms against " + Fixed(extra["action_ms_per_rank"][r].get<double>(), 3) + " ms";
  }
  if (ranks.empty()) return "";
  return "the GPU waited for the host to launch its kernels on rank" +
         std::string(ranks.find(',') == std::string::npos ? " " : "s ") + ranks +
         " (device lag against a compute action: " + figures +
         "): profile --cuda-graphs may time faster stages, for train --cuda-graphs";
}

void PrintTable(const nlohmann::json& doc, const std::string& output) {
  const auto& meta = doc["meta"];
  std::printf("profile of %s, partition %s, microbatch %d x %d tokens, %d ranks x %d threads, %s\n",
              meta["model"].get<std::string>().c_str(), meta["partition"].get<std::string>().c_str(),
              meta["microbatch_size"].get<int>(), meta["seq_len"].get<int>(), meta["ranks"].get<int>(),
              meta["threads_per_rank"].get<int>(), meta["precision"].get<std::string>().c_str());
  if (meta["tensor_parallel"].get<int>() > 1) {
    std::printf("each pipeline rank is %d tensor-parallel ranks%s: F, B, I and W hold their collectives\n",
                meta["tensor_parallel"].get<int>(),
                meta["sequence_parallel"].get<bool>() ? " with sequence parallelism" : "");
  }
  if (meta["extra"]["measure_turns"].get<int>() > 1) {
    std::printf(
        "ranks share devices past their slots (device by rank %s, slots by device %s): timed in %d turns, "
        "and simulate queues them for the device\n",
        meta["extra"]["devices"].dump().c_str(), meta["extra"]["device_slots"].dump().c_str(),
        meta["extra"]["measure_turns"].get<int>());
  } else if (meta["shared_device"] == "together") {
    std::printf(
        "ranks share devices past their slots (device by rank %s): timed together, so each time holds the "
        "others' time slices; simulate runs them side by side, and plan refuses this file\n",
        meta["extra"]["devices"].dump().c_str());
  }
  std::printf("%5s %4s %10s %10s %10s %10s %13s %13s %11s\n", "stage", "rank", "F ms", "B ms", "I ms", "W ms",
              "activ. MB", "I->W MB", "message KB");
  for (size_t s = 0; s < doc["stages"].size(); ++s) {
    const auto& st = doc["stages"][s];
    std::printf("%5zu %4d %10s %10s %10s %10s %13s %13s %11s\n", s, meta["extra"]["stages"][s]["rank"].get<int>(),
                Fixed(st["forward_ms"].get<double>(), 3).c_str(), Fixed(st["backward_ms"].get<double>(), 3).c_str(),
                Ms(st, "backward_input_ms").c_str(), Ms(st, "backward_weight_ms").c_str(),
                Fixed(st["activation_bytes"].get<double>() / 1e6, 3).c_str(),
                Fixed(st["weight_grad_bytes"].get<double>() / 1e6, 3).c_str(),
                Fixed(st["message_bytes"].get<double>() / 1e3, 1).c_str());
  }
  if (meta.value("cuda_graphs", false)) {
    std::printf("the stages ran as CUDA graphs (whole backwards, so no I and W); what one slot holds, by stage:");
    for (size_t s = 0; s < doc["stages"].size(); ++s) {
      std::printf("%s %s", s == 0 ? "" : ",", HumanBytes(doc["stages"][s]["graph_slot_bytes"].get<Bytes>()).c_str());
    }
    std::printf("\n");
  }
  for (const auto& l : meta["extra"]["links"]) {
    std::printf("link %d <-> %d: latency %s ms, bandwidth %s GB/s (one way:", l["from"].get<int>(), l["to"].get<int>(),
                Fixed(l["latency_ms"].get<double>(), 4).c_str(), Fixed(l["bandwidth_gbps"].get<double>(), 3).c_str());
    for (const auto& s : l["samples"]) {
      std::printf(" %lld B %s ms;", s["bytes"].get<long long>(), Fixed(s["one_way_ms"].get<double>(), 4).c_str());
    }
    std::printf(")\n");
  }
  std::printf("executor overhead: %s ms per action\n",
              Fixed(meta["extra"]["action_overhead_ms"].get<double>(), 4).c_str());
  const std::string launch = LaunchBoundLine(meta);
  if (!launch.empty()) std::printf("%s\n", launch.c_str());
  // Medians with [p10, p90]; the slowest rank's.
  auto spread = [](const nlohmann::json& at, const std::string& kind) {
    return Fixed(at[kind + "_ms"].get<double>(), 3) + " [" + Fixed(at[kind + "_p10_ms"].get<double>(), 3) + ", " +
           Fixed(at[kind + "_p90_ms"].get<double>(), 3) + "]";
  };
  const auto& step = doc["step"];
  std::printf("per step, ms, median [p10, p90]: loss all-reduce %s, norm all-reduce %s, clip %s, optimizer %s\n",
              spread(step, "loss_allreduce").c_str(), spread(step, "norm_allreduce").c_str(),
              spread(step, "clip").c_str(), spread(step, "optimizer").c_str());
  if (step.contains("tied_exchange_ms")) {
    std::printf("tied embeddings' gradient swap between the first and the last stage: %s ms\n",
                spread(step, "tied_exchange").c_str());
  }
  for (size_t s = 0; s < doc["stages"].size(); ++s) {
    const auto& st = doc["stages"][s];
    if (!st.contains("reduce_grad_ms")) continue;
    std::printf("stage %zu REDUCE_GRAD over %d replicas: %s ms\n", s, meta["extra"]["dp"].get<int>(),
                spread(st, "reduce_grad").c_str());
  }
  if (!output.empty()) std::printf("cost model written to %s\n", output.c_str());
}

}  // namespace pplab::cli
