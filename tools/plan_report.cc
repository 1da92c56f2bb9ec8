#include "tools/plan_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "tools/cli_main.h"
#include "tools/report.h"

namespace pplab::cli {
namespace {

// The families named in --schedules that gave no candidate to cost, each
// with why its first was ruled out ({} when --schedules was not given).
nlohmann::json NoCandidateJson(const PlanSearchOptions& search, const PlanSearchResult& result) {
  nlohmann::json out = nlohmann::json::object();
  if (search.schedules.empty()) return out;
  for (const auto& [name, costed] : result.costed_by_family) {
    if (costed > 0) continue;
    const auto why = result.ruled_out_by_family.find(name);
    std::string text =
        why != result.ruled_out_by_family.end() && !why->second.empty() ? why->second : "none was costed";
    if (text.rfind(name + ": ", 0) == 0) text.erase(0, name.size() + 2);  // the rule's own "dualpipe: "
    out[name] = text;
  }
  return out;
}

// Tokens a second as the table prints them: whole above 100, else three
// significant digits (a plan of a huge model read 0 where it made 0.001).
std::string TokensText(double tokens_per_second) {
  // (From 99.95 up, three digits would round to "100.0".)
  if (tokens_per_second >= 99.95 || tokens_per_second == 0) return Fixed(tokens_per_second, 0);
  const int decimals = std::min(9, 2 - static_cast<int>(std::floor(std::log10(tokens_per_second))));
  return Fixed(tokens_per_second, decimals);
}

using nlohmann::json;

// The peak rank, its model state and the kinds of the rest of its peak.
nlohmann::json PeakMemoryParts(const PlanCandidate& c) {
  nlohmann::json parts = MemoryPartsJson(c.peak_parts);
  parts["rank"] = c.peak_rank;
  parts["model_state"] = c.model_state;
  return parts;
}

json CandidateJson(const PlanCandidate& c) {
  return {{"ranks", c.ranks},
          {"dp", c.dp},
          {"tp", c.tp},
          {"sequence_parallel", c.sequence_parallel},
          {"schedule", c.schedule},
          {"microbatches", c.microbatches},
          {"virtual_stages", c.virtual_stages},
          {"stages", c.stages},
          {"partition", c.partition_method},
          {"layers_per_stage", c.partition.ToString()},
          {"microbatch_size", c.microbatch_size},
          {"step_time", NsToMs(c.step_time)},
          {"bubble_fraction", c.bubble_fraction},
          {"peak_memory_bytes", c.peak_memory},
          {"peak_memory_parts", PeakMemoryParts(c)},
          {"rank_peak_memory_bytes", c.rank_peaks},
          {"tokens_per_second", c.tokens_per_second},
          {"measured_costs", c.measured_costs},
          {"recompute", c.recompute ? "all" : "none"},
          {"samples", c.samples ? json{{"count", c.samples->samples},
                                       {"seed", c.samples->seed},
                                       {"p10", NsToMs(c.samples->p10)},
                                       {"p50", NsToMs(c.samples->p50)},
                                       {"p90", NsToMs(c.samples->p90)}}
                                : json(nullptr)},
          {"tie", c.tie}};
}

// What the tensor-parallel rings of a layer are, in the two layouts.
constexpr const char* kAllReduceRings =
    "2 all-reduces a layer each microbatch in F and in I, blocking; 2 in B, overlapped with the weights' products; "
    "none in W";
constexpr const char* kSequenceParallelRings =
    "per layer and microbatch 2 all-gathers and 2 reduce-scatters in F and in I, 4 and 2 in B, 2 all-gathers in W; "
    "the inputs' gathers again and B's reduce-scatters overlapped with compute";

// "#1 ties with #2, #4": the rows within the noise of the best, or "".
std::string TieLine(const std::vector<PlanCandidate>& ranked, size_t shown) {
  std::string others;
  for (size_t i = 1; i < shown; ++i) {
    if (ranked[i].tie) others += (others.empty() ? "#" : ", #") + std::to_string(i + 1);
  }
  return others.empty() ? "" : "#1 ties with " + others;
}

// Per kind, ms (of ns * scale).
nlohmann::json KindsJson(const double (&values)[4], double scale) {
  return {{"forward", values[0] * scale},
          {"backward", values[1] * scale},
          {"backward_input", values[2] * scale},
          {"backward_weight", values[3] * scale}};
}

// How a profile's fit scales the byte formulas (docs/planning.md, "Costs
// fitted to a profile"); null with analytic costs (all 1).
nlohmann::json ByteScalesJson(const CostFit& f, bool profiled) {
  if (!profiled) return nullptr;
  return {{"activations_layers", f.activation_scale},
          {"activations_head", f.head_activation_scale},
          {"weight_grads", f.weight_grad_scale},
          {"messages", f.message_scale},
          {"workspace", f.workspace_scale},
          {"forward_workspace", f.kind_workspace_fitted[0] ? json(f.kind_workspace_scale[0]) : json(nullptr)},
          {"backward_workspace", f.kind_workspace_fitted[1] ? json(f.kind_workspace_scale[1]) : json(nullptr)},
          {"backward_input_workspace", f.kind_workspace_fitted[2] ? json(f.kind_workspace_scale[2]) : json(nullptr)},
          {"weight_workspace", f.weight_workspace_fitted ? json(f.weight_workspace_scale) : json(nullptr)},
          {"graph_slot", f.graph_slot_scale ? json(*f.graph_slot_scale) : json(nullptr)}};
}

// The fit's ranges of microbatch sizes (CostFit::ranges), each with its
// fixed time a layer (ms) and time per FLOP (ns); null with one size or
// analytic costs.
nlohmann::json SizeRangesJson(const CostFit& f) {
  if (f.ranges.empty()) return nullptr;
  nlohmann::json out = nlohmann::json::array();
  for (const CostFit::SizeRange& r : f.ranges) {
    out.push_back({{"microbatch_sizes", {r.from, r.to}},
                   {"fixed_ms_per_layer", KindsJson(r.times.fixed_ns_per_unit, 1e-6)},
                   {"ns_per_flop", KindsJson(r.times.ns_per_flop, 1)}});
  }
  return out;
}

// The rows a report speaks of: the best, the one written (--pick), how many
// the table shows (--top), and whether their step times were sampled.
struct Rows {
  const PlanCandidate& best;
  const PlanCandidate& chosen;
  size_t shown;
  bool sampled;
};
Rows RowsOf(const PlanCmdOptions& o, const PlanSearchResult& result) {
  const PlanCandidate& best = result.fitting.front();
  return {best, result.fitting[o.pick - 1], std::min(result.fitting.size(), static_cast<size_t>(o.top)),
          best.samples.has_value()};
}

}  // namespace

void PrintPlanJson(const PlanCmdOptions& o, const PlanOutcome& out) {
  const PlanSearchOptions& search = out.search;
  const PlanSearchResult& result = out.result;
  const auto [best, chosen, shown, sampled] = RowsOf(o, result);
  json rows = json::array();
  for (size_t i = 0; i < shown; ++i) rows.push_back(CandidateJson(result.fitting[i]));
  const json j = {
      {"model", o.model},
      {"ranks", chosen.ranks},
      {"dp", chosen.dp},
      {"tp", chosen.tp},
      {"sequence_parallel", chosen.sequence_parallel},
      {"gpus", o.gpus > 0 ? json(o.gpus) : json(nullptr)},
      // Not used where the profile's times hold the collectives ("fitted").
      {"tp_link", search.fit.tensor_parallel > 1 ? json("fitted")
                                                 : (out.tensor_parallel ? json{{"latency_ms", o.tp_latency_ms},
                                                                               {"bandwidth_gbps", o.tp_bandwidth_gbps}}
                                                                        : json(nullptr))},
      {"link",
       {{"latency_ms", NsToMs(search.link.latency)},
        {"bandwidth_gbps", search.link.bandwidth_gbps},
        {"from", out.link_from}}},
      {"gpus_per_node", o.gpus_per_node > 0 ? json(o.gpus_per_node) : json(nullptr)},
      {"dp_bandwidth_gbps", o.dp_bandwidth_gbps},
      {"dp_latency_ms", o.dp_latency_ms},
      {"global_batch", o.global_batch},
      {"seq_len", search.seq_len},
      {"precision", PrecisionName(search.precision)},
      {"cuda_graphs", search.cuda_graphs},
      {"attention", search.fused_attention ? "sdpa" : "explicit"},
      {"shard_optimizer", o.shard_optimizer},
      {"memory_per_rank", search.memory_per_rank},  // less the headroom
      {"memory_headroom_percent", o.memory_headroom_percent},
      {"costs", o.cost_files},  // empty: analytic (out.costs_from)
      {"size_ranges", SizeRangesJson(search.fit)},
      {"byte_scales", ByteScalesJson(search.fit, !out.profiled.empty())},
      {"costs_from", out.costs_from},
      {"simulated", result.simulated},
      {"skipped", result.skipped},
      {"no_candidate", NoCandidateJson(search, result)},
      {"over_memory", result.over_memory},
      {"too_large", result.too_large},
      {"refit", {{"tried", result.refit_starts}, {"fit", result.refitted}, {"simulated", result.refit_simulations}}},
      {"fitting", result.fitting.size()},
      {"candidates", rows},
      {"best", CandidateJson(best)},
      {"pick", o.pick},
      {"picked", CandidateJson(chosen)},
      {"ties", sampled ? json{{"samples", kTieSamples},
                              {"seed", kTieSeed},
                              {"rule",
                               "a candidate ties with the best when their sampled step "
                               "times' [p10, p90] overlap"},
                              {"best_ties_with", TieLine(result.fitting, shown)}}
                       : json(nullptr)},
      {"plan_file", o.out_path},
      {"trace_file", o.trace_path.empty() ? json(nullptr) : json(o.trace_path)},
      {"svg_file", o.svg_path.empty() ? json(nullptr) : json(o.svg_path)},
      {"cost_file", o.cost_out_path.empty() ? json(nullptr) : json(o.cost_out_path)},
      {"train_command", out.train_command}};
  std::printf("%s\n", j.dump(2).c_str());
}

void PrintPlanText(const PlanCmdOptions& o, const PlanOutcome& out) {
  // A family --schedules asked for that gave no candidate at all: said,
  // with why, before the table that lacks it.
  const nlohmann::json no_candidate = NoCandidateJson(out.search, out.result);
  for (const auto& [name, why] : no_candidate.items()) {
    std::printf("note: --schedules %s: no candidate (%s)\n", name.c_str(), why.get<std::string>().c_str());
  }
  const PlanSearchOptions& search = out.search;
  const PlanSearchResult& result = out.result;
  const auto [best, chosen, shown, sampled] = RowsOf(o, result);
  std::printf(
      "%d candidates costed in %s s (%d ruled out by schedule rules or layers, %d over %s per rank%s%s); costs: "
      "%s, %s, attention %s\n",
      result.simulated, Fixed(out.seconds, 2).c_str(), result.skipped, result.over_memory,
      HumanBytes(search.memory_per_rank).c_str(),
      result.too_large == 0
          ? ""
          : (", " + std::to_string(result.too_large) + " too large to cost (times or bytes past int64)").c_str(),
      o.memory_headroom_percent > 0
          ? (", " + Fixed(o.memory_headroom_percent, 1) + " % of --memory-per-rank kept free").c_str()
          : "",
      out.costs_from.c_str(), PrecisionName(search.precision),
      search.fused_attention ? "sdpa (no softmax probabilities kept)" : "explicit");
  // The fit between each two profiled sizes, for a reader to check against
  // the profiles: a fixed time a layer and microbatch, and a time per FLOP.
  for (const CostFit::SizeRange& r : search.fit.ranges) {
    const TimeCoefficients& t = r.times;
    std::printf("fit between microbatches of %d and %d, F/B/I/W: %s/%s/%s/%s ms a layer + %s/%s/%s/%s ns a FLOP\n",
                r.from, r.to, Fixed(t.fixed_ns_per_unit[0] * 1e-6, 3).c_str(),
                Fixed(t.fixed_ns_per_unit[1] * 1e-6, 3).c_str(), Fixed(t.fixed_ns_per_unit[2] * 1e-6, 3).c_str(),
                Fixed(t.fixed_ns_per_unit[3] * 1e-6, 3).c_str(), Fixed(t.ns_per_flop[0], 4).c_str(),
                Fixed(t.ns_per_flop[1], 4).c_str(), Fixed(t.ns_per_flop[2], 4).c_str(),
                Fixed(t.ns_per_flop[3], 4).c_str());
  }
  // The byte formulas' factors, for a reader to see how far the profile's
  // device keeps more (or less) than the formulas.
  if (!out.profiled.empty()) {
    const CostFit& f = search.fit;
    // Each kind's own temporaries, where the profile measured them.
    std::string kinds;
    for (int k = 0; k < 3; ++k) {
      if (f.kind_workspace_fitted[k])
        kinds += std::string(", ") + "FBI"[k] + "'s " + Fixed(f.kind_workspace_scale[k], 3);
    }
    if (f.weight_workspace_fitted) kinds += ", W's " + Fixed(f.weight_workspace_scale, 3);
    // A graph slot against the whole activations' formula.
    const std::string slots =
        f.graph_slot_scale ? "; a CUDA graph slot " + Fixed(*f.graph_slot_scale, 3) + " (all activations)" : "";
    std::printf(
        "bytes fitted to the profile, x the formulas: activations %s (layers), %s (head); W's stash %s; "
        "workspace %s%s; messages %s%s\n",
        Fixed(f.activation_scale, 3).c_str(), Fixed(f.head_activation_scale, 3).c_str(),
        Fixed(f.weight_grad_scale, 3).c_str(), Fixed(f.workspace_scale, 3).c_str(), kinds.c_str(),
        Fixed(f.message_scale, 3).c_str(), slots.c_str());
  }
  if (result.refit_starts > 0) {
    std::printf("%d over memory refitted, fewer layers on the ranks over the limit: %d fit (%d more simulations)\n",
                result.refit_starts, result.refitted, result.refit_simulations);
  }
  // What the messages and rings were costed at: the figures a user checks first.
  const auto link_text = [](const Link& l) {
    if (l.latency == 0 && l.bandwidth_gbps == 0) return std::string("free");
    return (l.bandwidth_gbps > 0 ? Fixed(l.bandwidth_gbps, 1) + " GB/s" : std::string("unbounded GB/s")) + ", " +
           Fixed(NsToMs(l.latency), 3) + " ms";
  };
  const std::string network = search.cost_data_parallel ? link_text(search.dp_link) : "not costed";
  std::printf("links: between stages %s%s%s; data-parallel rings %s\n", link_text(search.link).c_str(),
              out.link_from == "free" ? "" : (" (" + out.link_from + ")").c_str(),
              o.gpus_per_node > 0
                  ? ("; on nodes of " + std::to_string(o.gpus_per_node) + " GPUs, across nodes " + network).c_str()
                  : "",
              o.gpus_per_node > 0 ? "inside a node as between stages, across nodes as above" : network.c_str());
  const bool fitted_collectives = search.fit.tensor_parallel > 1;
  if (fitted_collectives) {
    const std::string which = o.cost_files.size() == 1 ? o.cost_files.front() + " was" : "the profiles were";
    std::printf("tensor-parallel collectives: in the fitted times (%s profiled with --tp %d%s); no rings added\n",
                which.c_str(), search.tp, search.sequence_parallel ? " --sequence-parallel" : "");
  } else if (out.tensor_parallel) {
    std::printf("tensor-parallel rings: %s%s (%s)\n", link_text(search.tp_link).c_str(),
                o.gpus_per_node > 0 ? ", across nodes as data-parallel rings across nodes" : "",
                out.sequence_parallel == "on"
                    ? kSequenceParallelRings
                    : (out.sequence_parallel == "off"
                           ? kAllReduceRings
                           : std::string(kAllReduceRings) + "; sequence-parallel rows (sp): " + kSequenceParallelRings)
                          .c_str());
  }
  // With T > 1 and --sequence-parallel auto, whether each row splits the positions.
  const bool both_layouts = out.tensor_parallel && search.search_sequence_parallel;
  std::vector<std::vector<std::string>> table = {
      {"#", "schedule", "M", "v", "partition", "mb", "recompute", "step_ms", "bubble_%", "peak_mem/rank", "tokens/s"}};
  if (sampled) {
    table[0].push_back("p10..p90_ms");
    table[0].push_back("noise");
  }
  for (size_t i = 0; i < shown; ++i) {
    const PlanCandidate& c = result.fitting[i];
    table.push_back({std::to_string(i + 1), c.schedule, std::to_string(c.microbatches),
                     std::to_string(c.virtual_stages), c.partition_method + (c.measured_costs ? "*" : ""),
                     std::to_string(c.microbatch_size), c.recompute ? "all" : "none", Fixed(NsToMs(c.step_time), 3),
                     Fixed(100 * c.bubble_fraction, 2), HumanBytes(c.peak_memory), TokensText(c.tokens_per_second)});
    if (sampled) {
      table.back().push_back(Fixed(NsToMs(c.samples->p10), 3) + ".." + Fixed(NsToMs(c.samples->p90), 3));
      table.back().push_back(c.tie ? "tie" : "");
    }
    std::vector<std::string> grid;
    if (o.gpus > 0) grid = {std::to_string(c.ranks), std::to_string(c.dp)};
    if (o.gpus > 0 && out.tensor_parallel) grid.push_back(std::to_string(c.tp));
    if (both_layouts) grid.push_back(c.tp == 1 ? "-" : (c.sequence_parallel ? "yes" : "no"));
    table.back().insert(table.back().begin() + 1, grid.begin(), grid.end());
  }
  std::vector<std::string> grid;
  if (o.gpus > 0) grid = {"K", "D"};
  if (o.gpus > 0 && out.tensor_parallel) grid.push_back("T");
  if (both_layouts) grid.push_back("sp");
  table[0].insert(table[0].begin() + 1, grid.begin(), grid.end());
  std::vector<size_t> width(table[0].size(), 0);
  for (const auto& row : table) {
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  for (const auto& row : table) {
    for (size_t c = 0; c < row.size(); ++c) {
      const std::string& name = table[0][c];
      if (c + 1 == row.size() && sampled) {  // the last column, left-aligned: no padding after it
        std::printf("  %s", row[c].c_str());
        continue;
      }
      const bool left = name == "schedule" || name == "partition" || name == "recompute";
      std::printf(left ? "  %-*s" : "  %*s", static_cast<int>(width[c]), row[c].c_str());
    }
    std::printf("\n");
  }
  if (result.fitting.size() > shown) std::printf("  ... %zu more fit\n", result.fitting.size() - shown);
  if (std::any_of(result.fitting.begin(), result.fitting.begin() + shown,
                  [](const PlanCandidate& c) { return c.measured_costs; })) {
    std::printf("* stage costs measured (a profile's own configuration), not fitted\n");
  }
  if (sampled) {
    // Only the rows shown are sampled: with one, there is none to tie.
    const std::string ties = TieLine(result.fitting, shown);
    std::printf("noise: each row's step time sampled %d times (seed %llu) from the profile's spreads; %s\n",
                kTieSamples, static_cast<unsigned long long>(kTieSeed),
                shown < 2 && result.fitting.size() < 2 ? "no other plan fits to compare with #1"
                : shown < 2                            ? "no other row is shown to compare with #1 (--top 2 or more)"
                : ties.empty()                         ? "no row shown ties with #1 (their [p10, p90] do not overlap)"
                               : (ties + ": their [p10, p90] overlap, the difference is within the noise").c_str());
  }
  // One profiled size stands for every size: say so where the plan written
  // runs another (docs/planning.md, "Several profiles").
  if (!out.profiled.empty() && search.fit.ranges.empty() &&
      chosen.microbatch_size != out.profiled.front().Profile()->microbatch_size) {
    std::printf(
        "note: its microbatches of %d are costed from %s at %d in proportion to the FLOPs; what does not "
        "shrink with the microbatch (launches, a collective's latency) is fitted when --cost is given again "
        "with a profile at another size\n",
        chosen.microbatch_size, out.profiled.size() == 1 ? "a profile" : "profiles",
        out.profiled.front().Profile()->microbatch_size);
  }
  // A plan at the limit runs over it by whatever its prediction misses.
  if (o.memory_headroom_percent == 0 &&
      static_cast<double>(chosen.peak_memory) > 0.98 * static_cast<double>(search.memory_per_rank)) {
    std::printf(
        "note: its predicted peak, %s, is %s %% of --memory-per-rank; what the prediction misses (docs/planning.md, "
        "\"Memory per rank\") can take the run over: --memory-headroom 5 keeps 5 %% free\n",
        HumanBytes(chosen.peak_memory).c_str(),
        Fixed(100.0 * static_cast<double>(chosen.peak_memory) / static_cast<double>(search.memory_per_rank), 1)
            .c_str());
  }
  const std::string which = o.pick == 1 ? "best plan" : "plan #" + std::to_string(o.pick);
  std::printf("%s written to %s (%s, M=%d, v=%d, %s partition %s%s%s); run it with:\n  %s\n", which.c_str(),
              o.out_path.c_str(), chosen.schedule.c_str(), chosen.microbatches, chosen.virtual_stages,
              chosen.partition_method.c_str(), chosen.partition.ToString().c_str(),
              chosen.recompute ? ", activations recomputed" : "",
              chosen.tp > 1 ? (", layers split over " + std::to_string(chosen.tp) + " tensor-parallel ranks" +
                               (chosen.sequence_parallel ? " with sequence parallelism" : ""))
                                  .c_str()
                            : "",
              out.train_command.c_str());
  if (!o.trace_path.empty()) {
    std::printf("its simulated step written to %s (where each rank idles: %s explain %s)\n", o.trace_path.c_str(),
                ShellWord(ProgramName()).c_str(), ShellWord(o.trace_path).c_str());
  }
  if (!o.svg_path.empty()) std::printf("its timeline picture written to %s\n", o.svg_path.c_str());
  if (!o.cost_out_path.empty()) {
    std::printf("its costs written to %s (again: %s simulate --plan %s --cost %s)\n", o.cost_out_path.c_str(),
                ShellWord(ProgramName()).c_str(), ShellWord(o.out_path).c_str(), ShellWord(o.cost_out_path).c_str());
  }
}

}  // namespace pplab::cli
