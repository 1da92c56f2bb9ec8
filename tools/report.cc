#include "tools/report.h"

#include <algorithm>
#include <cstdio>
#include <iomanip>
#include <sstream>

#include "sim/analytic.h"

namespace pplab::cli {

std::string Fixed(double x, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, x);
  return buf;
}

std::string HumanBytes(Bytes b) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double x = static_cast<double>(b);
  int u = 0;
  while (x >= 1024 && u < 4) {
    x /= 1024;
    ++u;
  }
  return Fixed(x, u == 0 ? 0 : 2) + " " + kUnits[u];
}

std::string SimulationCsvHeader() {
  return "schedule,ranks,virtual,stages,microbatches,makespan_ms,bubble_fraction,span_bubble_fraction,"
         "analytic_bubble_fraction,analytic_convention,peak_inflight,peak_activation_bytes,p2p_messages,p2p_bytes\n";
}

std::string SimulationCsvRow(const nlohmann::json& j) {
  const int ranks = j["ranks"].get<int>(), stages = j["stages"].get<int>();
  const auto& analytic = j["analytic_bubble_fraction"];
  const auto& convention = j["analytic_convention"];
  return j["schedule"].get<std::string>() + "," + std::to_string(ranks) + "," +
         std::to_string(stages % ranks == 0 ? stages / ranks : 0) + "," + std::to_string(stages) + "," +
         j["microbatches"].dump() + "," + Fixed(j["makespan"].get<double>(), 6) + "," +
         Fixed(j["bubble_fraction"].get<double>(), 6) + "," + Fixed(j["span_bubble_fraction"].get<double>(), 6) + "," +
         (analytic.is_null() ? "" : Fixed(analytic.get<double>(), 6)) + "," +
         (convention.is_null() ? "" : convention.get<std::string>()) + "," + j["peak_inflight"].dump() + "," +
         j["peak_activation_bytes"].dump() + "," + j["p2p_messages"].dump() + "," + j["p2p_bytes"].dump() + "\n";
}

void PrintTable(const std::vector<std::vector<std::string>>& rows, size_t left_columns) {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    if (width.size() < row.size()) width.resize(row.size(), 0);
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      const std::string pad(width[c] - row[c].size(), ' ');
      line += (c == 0 ? "" : "  ") + (c < left_columns ? row[c] + pad : pad + row[c]);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    std::printf("%s\n", line.c_str());
  }
}

nlohmann::json MemoryPartsJson(const MemoryParts& parts) {
  return {{"activations", parts.activations},
          {"weight_grads", parts.weight_grads},
          {"messages", parts.messages},
          {"casts", parts.casts},
          {"params", parts.params},
          {"workspace", parts.workspace},
          {"graphs", parts.graphs}};
}

nlohmann::json SimulationJson(const Schedule& schedule, const CostModel& costs, const SimResult& r) {
  using nlohmann::json;
  json per_rank = json::array();
  int peak_inflight = 0;
  Bytes peak_bytes = 0;
  for (const RankMetrics& m : r.per_rank) {
    per_rank.push_back({{"rank", m.rank},
                        {"busy", NsToMs(m.busy)},
                        {"idle", NsToMs(m.idle)},
                        {"start", NsToMs(m.start)},
                        {"end", NsToMs(m.end)},
                        {"peak_inflight", m.peak_inflight},
                        {"peak_activation_bytes", m.peak_activation_bytes},
                        {"peak_parts", MemoryPartsJson(m.peak_parts)}});
    peak_inflight = std::max(peak_inflight, m.peak_inflight);
    peak_bytes = std::max(peak_bytes, m.peak_activation_bytes);
  }
  const auto analytic = AnalyticBubbleFor(schedule, costs);
  json path = json::array();
  constexpr size_t kMaxPath = 200;
  for (size_t i = 0; i < r.critical_path.size() && i < kMaxPath; ++i) {
    const CriticalStep& c = r.critical_path[i];
    path.push_back("rank " + std::to_string(c.rank) + " " + FormatAction(c.action));
  }
  return {
      {"schedule", schedule.name},
      {"ranks", schedule.ranks},
      {"stages", schedule.stages},
      {"microbatches", schedule.microbatches},
      {"makespan", NsToMs(r.makespan)},
      {"bubble_fraction", r.bubble_fraction},
      {"span_bubble_fraction", r.span_bubble_fraction},
      {"analytic_bubble_fraction", analytic ? json(analytic->fraction) : json(nullptr)},
      {"analytic_convention", analytic ? json(ConventionName(analytic->convention)) : json(nullptr)},
      {"analytic_formula", analytic ? json(analytic->formula) : json(nullptr)},
      {"peak_inflight", peak_inflight},
      {"peak_activation_bytes", peak_bytes},
      {"p2p_messages", r.p2p_messages},
      {"p2p_bytes", r.p2p_bytes},
      {"critical_path",
       {{"actions", r.critical_path.size()},
        {"compute", NsToMs(r.critical_compute)},
        {"comm", NsToMs(r.critical_comm)},
        {"step", NsToMs(r.critical_step)},
        {"path", path},
        {"truncated", r.critical_path.size() > kMaxPath}}},
      {"per_rank", per_rank},
  };
}

std::string SimulationText(const nlohmann::json& j) {
  std::ostringstream out;
  out << j["schedule"].get<std::string>() << ": K=" << j["ranks"] << " S=" << j["stages"] << " M=" << j["microbatches"]
      << "\n";
  out << "  makespan          " << Fixed(j["makespan"].get<double>(), 3) << " ms\n";
  out << "  bubble            " << Fixed(100 * j["bubble_fraction"].get<double>(), 2) << " % (makespan convention)\n";
  out << "  span bubble       " << Fixed(100 * j["span_bubble_fraction"].get<double>(), 2)
      << " % (worst rank, own span)\n";
  if (!j["analytic_bubble_fraction"].is_null()) {
    out << "  analytic bubble   " << Fixed(100 * j["analytic_bubble_fraction"].get<double>(), 2)
        << " % = " << j["analytic_formula"].get<std::string>() << " (" << j["analytic_convention"].get<std::string>()
        << " convention, free communication)\n";
  } else {
    out << "  analytic bubble   none (no closed form for this plan and these costs)\n";
  }
  out << "  peak in-flight    " << j["peak_inflight"] << " (stage, microbatch) forwards awaiting backward, "
      << j["peak_activation_bytes"] << " activation bytes (max over ranks)\n";
  out << "  p2p               " << j["p2p_messages"] << " messages, " << j["p2p_bytes"] << " bytes\n";
  out << "  critical path     " << j["critical_path"]["actions"]
      << " actions: " << Fixed(j["critical_path"]["compute"].get<double>(), 3) << " ms compute + "
      << Fixed(j["critical_path"]["comm"].get<double>(), 3) << " ms transfer";
  if (j["critical_path"]["step"].get<double>() > 0) {
    out << " + " << Fixed(j["critical_path"]["step"].get<double>(), 3) << " ms per-step work";
  }
  out << "\n";
  out << "  rank     busy ms     idle ms    start ms      end ms  in-flight  peak bytes\n";
  for (const auto& r : j["per_rank"]) {
    char line[160];
    std::snprintf(line, sizeof line, "  %4d %11.3f %11.3f %11.3f %11.3f %10d %11lld\n", r["rank"].get<int>(),
                  r["busy"].get<double>(), r["idle"].get<double>(), r["start"].get<double>(), r["end"].get<double>(),
                  r["peak_inflight"].get<int>(), static_cast<long long>(r["peak_activation_bytes"].get<Bytes>()));
    out << line;
  }
  // What each rank's peak is made of, where more than activations make it up.
  bool parts = false;
  for (const auto& r : j["per_rank"]) parts = parts || r["peak_parts"]["activations"] != r["peak_activation_bytes"];
  if (parts) {
    // The graphs' slots only where a stage ran as CUDA graphs.
    bool graphs = false;
    for (const auto& r : j["per_rank"]) graphs = graphs || r["peak_parts"].value("graphs", Bytes{0}) != 0;
    out << "  peak bytes by kind: activations + weight grads + messages + casts + params + workspace"
        << (graphs ? " + CUDA graphs' slots" : "") << "\n";
    for (const auto& r : j["per_rank"]) {
      const auto& p = r["peak_parts"];
      out << "  " << std::setw(4) << r["rank"].get<int>() << "  " << p["activations"] << " + " << p["weight_grads"]
          << " + " << p["messages"] << " + " << p["casts"] << " + " << p["params"] << " + " << p["workspace"];
      if (graphs) out << " + " << p["graphs"];
      out << "\n";
    }
  }
  return out.str();
}

nlohmann::json SharedDevicesJson(const std::vector<DeviceUse>& shared) {
  nlohmann::json out = nlohmann::json::array();
  for (const DeviceUse& d : shared) {
    out.push_back({{"device", d.device},
                   {"ranks", d.ranks},
                   {"slots", d.slots},
                   {"busy", NsToMs(d.busy)},
                   {"over_slots", NsToMs(d.over_slots)},
                   {"compute", NsToMs(d.compute)}});
  }
  return out;
}

std::string SharedDevicesText(const std::vector<DeviceUse>& shared, TimeNs makespan) {
  std::string out;
  for (const DeviceUse& d : shared) {
    std::string ranks;
    for (const RankId r : d.ranks) ranks += (ranks.empty() ? "" : ",") + std::to_string(r);
    const double busy_share = makespan > 0 ? 100.0 * static_cast<double>(d.busy) / static_cast<double>(makespan) : 0;
    const double stretch = d.busy > 0 ? static_cast<double>(d.compute) / static_cast<double>(d.busy) : 0;
    out += "device " + std::to_string(d.device) + " (ranks " + ranks + ", " + std::to_string(d.slots) + " slot" +
           (d.slots == 1 ? "" : "s") + "): some rank computing " + Fixed(NsToMs(d.busy), 3) + " ms (" +
           Fixed(busy_share, 1) + " % of the makespan), more ranks than slots at once " +
           Fixed(NsToMs(d.over_slots), 3) + " ms; their compute " + Fixed(NsToMs(d.compute), 3) + " ms, " +
           Fixed(stretch, 2) + "x the time the device was busy\n";
  }
  return out;
}

}  // namespace pplab::cli
