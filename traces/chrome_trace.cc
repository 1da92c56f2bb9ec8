#include "traces/chrome_trace.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "schedules/error.h"
#include "schedules/json_reader.h"

namespace pplab {
namespace {

using nlohmann::json;

enum Thread { kComputeTid = 0, kSendTid = 1, kRecvTid = 2, kStepTid = 3, kDataParallelTid = 4 };

// Microseconds with three decimals: exact for integer nanoseconds.
double Us(TimeNs ns) { return static_cast<double>(ns) / 1000.0; }
TimeNs FromUs(double us) { return static_cast<TimeNs>(std::llround(us * 1000.0)); }

int ThreadOf(ActionKind kind) {
  if (IsSend(kind)) return kSendTid;
  if (IsRecv(kind)) return kRecvTid;
  // Overlaps the compute that follows it, so it has a track of its own.
  if (kind == ActionKind::kReduceGrad) return kDataParallelTid;
  return kComputeTid;
}

}  // namespace

std::string TimelineToChromeTrace(const Timeline& timeline) {
  std::string out = "{\"displayTimeUnit\":\"ms\",\"otherData\":";
  json other = {{"pplab_trace_version", kTraceFormatVersion},
                {"source", timeline.source},
                {"name", timeline.name},
                {"ranks", timeline.ranks}};
  if (!timeline.devices.empty()) other["devices"] = timeline.devices;
  if (!timeline.device_slots.empty()) other["device_slots"] = timeline.device_slots;
  if (!timeline.recompute.empty()) other["recompute"] = timeline.recompute;
  if (timeline.data_parallel > 1) other["data_parallel"] = timeline.data_parallel;
  out += other.dump();
  out += ",\"traceEvents\":[\n";
  bool first = true;
  auto emit = [&](const json& event) {
    if (!first) out += ",\n";
    first = false;
    out += event.dump();
  };
  static const char* kThreadNames[] = {"compute", "send", "recv", "step", "data-parallel"};
  // The step thread only where there is per-step work, so older traces keep their bytes.
  const int threads = timeline.step_events.empty() ? 3 : 4;
  const bool reduces = std::any_of(timeline.events.begin(), timeline.events.end(),
                                   [](const TimelineEvent& e) { return e.action.kind == ActionKind::kReduceGrad; });
  for (RankId r = 0; r < timeline.ranks; ++r) {
    emit({{"ph", "M"},
          {"name", "process_name"},
          {"pid", r},
          {"tid", 0},
          {"args", {{"name", "rank " + std::to_string(r)}}}});
    emit({{"ph", "M"}, {"name", "process_sort_index"}, {"pid", r}, {"tid", 0}, {"args", {{"sort_index", r}}}});
    for (int t = 0; t < threads; ++t) {
      emit({{"ph", "M"}, {"name", "thread_name"}, {"pid", r}, {"tid", t}, {"args", {{"name", kThreadNames[t]}}}});
    }
    if (reduces) {
      emit({{"ph", "M"},
            {"name", "thread_name"},
            {"pid", r},
            {"tid", kDataParallelTid},
            {"args", {{"name", kThreadNames[kDataParallelTid]}}}});
    }
  }
  // SEND events by message, to draw the flow arrow when the RECV comes by.
  std::map<MessageKey, const TimelineEvent*> sends;
  for (const TimelineEvent& e : timeline.events) {
    if (IsSend(e.action.kind)) sends[MessageOf(e.action)] = &e;
  }
  std::map<MessageKey, int> flow_ids;
  for (const TimelineEvent& e : timeline.events) {
    const Action& a = e.action;
    emit({{"ph", "X"},
          {"name", EventName(a)},
          {"cat", IsCompute(a.kind) ? "compute" : "comm"},
          {"pid", e.rank},
          {"tid", ThreadOf(a.kind)},
          {"ts", Us(e.start)},
          {"dur", Us(e.end - e.start)},
          {"args",
           {{"kind", KindName(a.kind)},
            {"stage", a.stage},
            {"microbatch", a.microbatch},
            {"action", FormatAction(a)}}}});
    if (IsRecv(a.kind)) {
      const auto it = sends.find(MessageOf(a));
      if (it == sends.end()) continue;
      const int id = static_cast<int>(flow_ids.size()) + 1;
      flow_ids[MessageOf(a)] = id;
      const TimelineEvent& s = *it->second;
      emit({{"ph", "s"},
            {"name", "p2p"},
            {"cat", "p2p"},
            {"id", id},
            {"pid", s.rank},
            {"tid", kSendTid},
            {"ts", Us(s.start)}});
      emit({{"ph", "f"},
            {"bp", "e"},
            {"name", "p2p"},
            {"cat", "p2p"},
            {"id", id},
            {"pid", e.rank},
            {"tid", kRecvTid},
            {"ts", Us(e.end)}});
    }
  }
  for (const StepEvent& e : timeline.step_events) {
    emit({{"ph", "X"},
          {"name", e.name},
          {"cat", "step"},
          {"pid", e.rank},
          {"tid", kStepTid},
          {"ts", Us(e.start)},
          {"dur", Us(e.end - e.start)},
          {"args", {{"step", e.name}}}});
  }
  for (const MemorySample& m : timeline.memory) {
    emit({{"ph", "C"},
          {"name", "activation bytes"},
          {"pid", m.rank},
          {"ts", Us(m.time)},
          {"args", {{"bytes", m.bytes}}}});
  }
  out += "\n]}\n";
  return out;
}

// Largest timestamp or duration accepted, in microseconds (~31 years): far
// inside int64 nanoseconds, so sums over a trace cannot overflow.
constexpr double kMaxUs = 1e15;
// Largest byte count a counter sample may hold: what Bytes (int64) holds.
constexpr Bytes kMaxBytes = std::numeric_limits<Bytes>::max();

// A time as the trace writes it: microseconds, three decimals.
static std::string UsText(TimeNs ns) {
  char text[48];
  std::snprintf(text, sizeof text, "%.3f us", Us(ns));
  return text;
}

// A rank computes one action at a time (the simulator and the executor run
// them in program order): busy time, bubbles and explain's idle split count
// each instant of a rank once. Two compute actions of one rank that share
// time, or the same action twice over the same interval (a zero-length
// copy shares no time), are refused; comm, collectives and step work may
// overlap compute, and ranks that share a device may compute at once.
static void CheckOneComputeAtATime(const Timeline& t, const std::vector<size_t>& where, const std::string& origin) {
  std::vector<std::vector<size_t>> by_rank(static_cast<size_t>(t.ranks));
  for (size_t i = 0; i < t.events.size(); ++i) {
    if (IsCompute(t.events[i].action.kind)) by_rank[static_cast<size_t>(t.events[i].rank)].push_back(i);
  }
  // By start, then end, then the action, so that copies of one event lie side by side.
  auto key = [&](size_t i) {
    const TimelineEvent& e = t.events[i];
    const Action& a = e.action;
    return std::make_tuple(e.start, e.end, static_cast<int>(a.kind), a.stage, a.microbatch,
                           static_cast<int>(a.overlap_kind), a.overlap_stage, a.overlap_microbatch, i);
  };
  for (size_t r = 0; r < by_rank.size(); ++r) {
    std::vector<size_t>& list = by_rank[r];
    std::sort(list.begin(), list.end(), [&](size_t a, size_t b) { return key(a) < key(b); });
    // Sorted by start, the first action to overlap an earlier one overlaps the one just before it.
    for (size_t k = 1; k < list.size(); ++k) {
      const TimelineEvent& before = t.events[list[k - 1]];
      const TimelineEvent& next = t.events[list[k]];
      const std::string rank = origin + ": rank " + std::to_string(r) + " runs ";
      const std::string first = "traceEvents[" + std::to_string(where[list[k - 1]]) + "]";
      const std::string second = "traceEvents[" + std::to_string(where[list[k]]) + "]";
      if (next.action == before.action && next.start == before.start && next.end == before.end) {
        throw Error(rank + FormatAction(next.action) + " twice over the same time, " + first + " and " + second +
                    " (from " + UsText(next.start) + " to " + UsText(next.end) +
                    "); a rank runs each compute action once");
      }
      if (next.start < before.end) {
        throw Error(rank + FormatAction(next.action) + " (" + second + ") from " + UsText(next.start) + ", before " +
                    FormatAction(before.action) + " (" + first + ") ends at " + UsText(before.end) +
                    "; a rank runs one compute action at a time");
      }
    }
  }
}

// What every command that reads a trace relies on of its actions;
// where[i] is the index in traceEvents of t.events[i].
static void CheckActions(const Timeline& t, const std::vector<size_t>& where, const std::string& origin) {
  // A timeline's makespan, bubbles and costs are measured over its compute
  // actions: without one there is nothing to measure (an empty or cut trace).
  size_t parts = 0;
  for (const TimelineEvent& e : t.events) parts += PartsOf(e.action).count;
  if (parts == 0) throw Error(origin + ": the trace has no compute action (F, B, I, W or OVERLAP_F_B)");
  // The trace does not record its stage count. Every stage computes at
  // least once, so the stages are below the number of compute parts: a
  // bound that keeps what readers build per stage (stats' table, a cost
  // file's stages) within the size of the file.
  for (size_t i = 0; i < t.events.size(); ++i) {
    const Action& a = t.events[i].action;
    StageId stage = a.stage;
    for (const Action& part : PartsOf(a)) stage = std::max(stage, part.stage);
    if (static_cast<size_t>(stage) >= parts) {
      throw Error(origin + ": traceEvents[" + std::to_string(where[i]) + "]: action " + FormatAction(a) +
                  " is on stage " + std::to_string(stage) + ", but the trace computes " + std::to_string(parts) +
                  " F, B, I and W (each part of an OVERLAP_F_B counted) and every stage computes at least once, so "
                  "its stages are below " +
                  std::to_string(parts));
    }
  }
  // Readers add up compute time (a rank's busy time, all ranks', a shared
  // device's) in int64 nanoseconds: the total of all is held below 2^62.
  __int128 compute = 0;
  for (const TimelineEvent& e : t.events) {
    if (IsCompute(e.action.kind)) compute += e.end - e.start;
  }
  if (compute > (static_cast<__int128>(1) << 62)) {
    throw Error(origin + ": its compute events add up to " + std::to_string(static_cast<double>(compute) / 1e9) +
                " s, past the 2^62 ns (146 years) that pplab's sums of time hold");
  }
  CheckOneComputeAtATime(t, where, origin);
  // A step runs each compute action once: a second copy (an event
  // relabelled, two traces pasted together) would be read as the first's
  // time and message, and stats gave a negative message time.
  // So are its sends, receives and collectives: a copy of a RECV with a later
  // end was read as the message's arrival, whichever came last in the file.
  std::map<std::tuple<int, StageId, MicrobatchId>, size_t> seen;
  for (size_t i = 0; i < t.events.size(); ++i) {
    const Action& action = t.events[i].action;
    // (UNSHARD and RESHARD of a stage may alternate several times a step,
    // as validate allows: not counted.)
    if (action.kind == ActionKind::kUnshard || action.kind == ActionKind::kReshard) continue;
    // A compute action's parts, or the action itself (no allocation an
    // event: traces run to hundreds of thousands).
    ComputeParts own = PartsOf(action);
    if (own.count == 0) {
      own.part[0] = action;
      own.count = 1;
    }
    for (const Action& part : own) {
      const auto [it, fresh] =
          seen.emplace(std::make_tuple(static_cast<int>(part.kind), part.stage, part.microbatch), where[i]);
      if (!fresh) {
        const std::string what = FormatAction(t.events[i].action) == FormatAction(part)
                                     ? "action " + FormatAction(part)
                                     : "action " + FormatAction(t.events[i].action) + " runs " + FormatAction(part);
        throw Error(origin + ": traceEvents[" + std::to_string(where[i]) + "]: " + what + ", which traceEvents[" +
                    std::to_string(it->second) + "] ran already; a step runs each action once");
      }
    }
  }
  // The recomputed stages, as train writes them: "all" or distinct ids of
  // the trace's stages, comma-separated.
  if (!t.recompute.empty() && t.recompute != "all") {
    StageId below = 0;
    for (const auto& [key, index] : seen) below = std::max(below, std::get<1>(key) + 1);
    const std::string bad = origin + ": otherData.recompute must be \"all\" or distinct stage ids below " +
                            std::to_string(below) + " like \"0,2\", got \"" + t.recompute + "\"";
    std::set<long> ids;
    size_t from = 0;
    while (from <= t.recompute.size()) {
      const size_t comma = std::min(t.recompute.find(',', from), t.recompute.size());
      const std::string id = t.recompute.substr(from, comma - from);
      if (id.empty() || id.size() > 9 || id.find_first_not_of("0123456789") != std::string::npos) throw Error(bad);
      if (std::stol(id) >= below || !ids.insert(std::stol(id)).second) throw Error(bad);
      from = comma + 1;
    }
  }
}

static Timeline TimelineFromChromeTraceDoc(const std::string& text, const std::string& origin) {
  const json doc = ParseJsonStrict(text, origin);  // a key given twice is refused
  if (!doc.is_object() || !doc.contains("traceEvents") || !doc["traceEvents"].is_array()) {
    throw Error(origin + ": not a Chrome trace (no 'traceEvents' array)");
  }
  const json other = doc.value("otherData", json::object());
  if (!other.is_object() || !other.contains("pplab_trace_version")) {
    throw Error(origin + ": not a pplab trace (otherData.pplab_trace_version missing)");
  }
  if (other["pplab_trace_version"] != kTraceFormatVersion) {
    throw Error(origin + ": unsupported pplab_trace_version " + other["pplab_trace_version"].dump());
  }
  Timeline t;
  for (const char* key : {"name", "source"}) {
    if (other.contains(key) && !other[key].is_string()) {
      throw Error(origin + ": otherData." + key + " must be a string, got " + other[key].dump());
    }
  }
  t.name = other.value("name", std::string());
  t.source = other.value("source", std::string());
  for (const std::string* field : {&t.name, &t.source}) {
    for (unsigned char c : *field) {
      if (c < 0x20 || c == 0x7f) throw Error(origin + ": otherData name/source must not hold control characters");
    }
  }
  const json& events = doc["traceEvents"];
  // Each rank has its metadata events, so a trace cannot have more ranks than events.
  const json ranks = other.value("ranks", json(0));
  if (!ranks.is_number_integer() || ranks.get<long long>() < 1 ||
      ranks.get<long long>() > static_cast<long long>(std::max<size_t>(events.size(), 1))) {
    throw Error(origin + ": otherData.ranks must be an integer in [1, number of events], got " + ranks.dump());
  }
  t.ranks = static_cast<int>(ranks.get<long long>());
  if (other.contains("recompute")) {
    if (!other["recompute"].is_string()) {
      throw Error(origin + ": otherData.recompute must be a string (the recomputed stages), got " +
                  other["recompute"].dump());
    }
    t.recompute = other["recompute"].get<std::string>();
  }
  if (other.contains("data_parallel")) {
    const json& d = other["data_parallel"];
    if (!d.is_number_integer() || d.get<long long>() < 1 || d.get<long long>() > (1LL << 20)) {
      throw Error(origin + ": otherData.data_parallel must be an integer in [1, 2^20] (the replicas), got " + d.dump());
    }
    t.data_parallel = static_cast<int>(d.get<long long>());
  }
  if (other.contains("devices")) {
    const json& devices = other["devices"];
    if (!devices.is_array() || devices.size() != static_cast<size_t>(t.ranks)) {
      throw Error(origin + ": otherData.devices must be an array of one device per rank (" + std::to_string(t.ranks) +
                  ")");
    }
    for (const json& d : devices) {
      if (!d.is_number_integer() || d.get<long long>() < 0 || d.get<long long>() > (1LL << 30)) {
        throw Error(origin + ": otherData.devices entries must be integers in [0, 2^30], got " + d.dump());
      }
      t.devices.push_back(static_cast<int>(d.get<long long>()));
    }
  }
  if (other.contains("device_slots")) {
    const json& slots = other["device_slots"];
    if (!slots.is_array() || slots.empty()) {
      throw Error(origin + ": otherData.device_slots must be a non-empty array of slots per device id");
    }
    for (const json& n : slots) {
      if (!n.is_number_integer() || n.get<long long>() < 1 || n.get<long long>() > (1LL << 20)) {
        throw Error(origin + ": otherData.device_slots entries must be integers in [1, 2^20], got " + n.dump());
      }
      t.device_slots.push_back(static_cast<int>(n.get<long long>()));
    }
    for (RankId r = 0; r < t.ranks; ++r) {
      const int device = t.devices.empty() ? r : t.devices[r];
      if (device >= static_cast<int>(t.device_slots.size())) {
        throw Error(origin + ": otherData.device_slots has " + std::to_string(t.device_slots.size()) +
                    " entries, but rank " + std::to_string(r) + " is on device " + std::to_string(device));
      }
    }
  }
  std::vector<size_t> where;  // the index in traceEvents of each of t.events
  // A rank's per-step work, each once a step: a copy (two traces pasted
  // together, an event duplicated by hand) moved the step's end.
  std::map<std::pair<RankId, std::string>, size_t> step_seen;
  for (size_t i = 0; i < events.size(); ++i) {
    const json& e = events[i];
    const std::string at = origin + ": traceEvents[" + std::to_string(i) + "]";
    if (!e.is_object() || !e.contains("ph") || !e["ph"].is_string()) throw Error(at + ": event without 'ph'");
    const std::string ph = e["ph"];
    if (ph != "X" && ph != "C") continue;
    if (!e.contains("pid") || !e["pid"].is_number_integer() || !e.contains("ts") || !e["ts"].is_number()) {
      throw Error(at + ": needs integer 'pid' and numeric 'ts'");
    }
    // As the file writes it: 2^64 - 1 read as a signed integer was "pid -1".
    if (e["pid"].is_number_unsigned() && e["pid"].get<uint64_t>() > static_cast<uint64_t>(t.ranks)) {
      throw Error(at + ": pid " + e["pid"].dump() + " is not a rank");
    }
    const long long pid = e["pid"].get<long long>();
    if (pid < 0 || pid >= t.ranks) throw Error(at + ": pid " + std::to_string(pid) + " is not a rank");
    const RankId rank = static_cast<RankId>(pid);
    const double ts_us = e["ts"].get<double>();
    if (!(ts_us >= 0 && ts_us <= kMaxUs)) throw Error(at + ": 'ts' must be in [0, 1e15] microseconds");
    const TimeNs ts = FromUs(ts_us);
    if (ph == "C") {
      const json args = e.value("args", json::object());
      if (!args.contains("bytes") || !args["bytes"].is_number()) throw Error(at + ": counter without args.bytes");
      const json& bytes = args["bytes"];
      // One past int64 would wrap to a negative Bytes. A measured sample is
      // the live bytes above those of the step's start, below 0 when the
      // step freed more than it made (runtime/exec/executor.cc); a simulated
      // one is bytes held, never below 0.
      const bool measured = t.source == "measured";
      const bool in_range = bytes.is_number_unsigned()
                                ? bytes.get<std::uint64_t>() <= static_cast<std::uint64_t>(kMaxBytes)
                                : bytes.is_number_integer() && (measured || bytes.get<std::int64_t>() >= 0);
      if (!in_range) {
        throw Error(at + ": counter args.bytes must be an integer in [" + (measured ? "-2^63" : "0") +
                    ", 2^63 - 1], got " + bytes.dump());
      }
      t.memory.push_back({rank, ts, bytes.get<Bytes>()});
      continue;
    }
    const json args = e.value("args", json::object());
    if (!e.contains("dur") || !e["dur"].is_number() || !(e["dur"].get<double>() >= 0) ||
        e["dur"].get<double>() > kMaxUs) {
      throw Error(at + ": needs a 'dur' in [0, 1e15] microseconds");
    }
    if (e.value("cat", json()) == "step") {
      if (!args.contains("step") || !args["step"].is_string()) throw Error(at + ": step event without args.step");
      const std::string name = args["step"].get<std::string>();
      if (std::find(std::begin(kStepEventNames), std::end(kStepEventNames), name) == std::end(kStepEventNames)) {
        std::string known;
        for (const char* n : kStepEventNames) known += (known.empty() ? "" : ", ") + std::string(n);
        throw Error(at + ": args.step " + nlohmann::json(name).dump() + " is not per-step work a trace holds (" +
                    known + ")");
      }
      if (const auto [it, fresh] = step_seen.emplace(std::make_pair(rank, name), i); !fresh) {
        throw Error(at + ": rank " + std::to_string(rank) + "'s args.step " + nlohmann::json(name).dump() +
                    ", which traceEvents[" + std::to_string(it->second) + "] ran already; a step runs each once");
      }
      t.step_events.push_back({rank, name, ts, ts + FromUs(e["dur"].get<double>())});
      continue;
    }
    if (!args.contains("action") || !args["action"].is_string()) throw Error(at + ": event without args.action");
    TimelineEvent ev;
    ev.rank = rank;
    try {
      ev.action = ParseAction(args["action"].get<std::string>());
    } catch (const Error& err) {
      throw Error(at + ": " + err.what());
    }
    ev.start = ts;
    ev.end = ts + FromUs(e["dur"].get<double>());
    t.events.push_back(ev);
    where.push_back(i);
  }
  CheckActions(t, where, origin);
  // Time 0 is the step's start, where each of pplab's traces has an event
  // (rank 0's first compute; a measured run's receives, posted then). A
  // trace whose events all start later (another clock's origin) is read from
  // its first event, so that every command measures its steps alike.
  if (const TimeNs first = t.Start(); first > 0) t.ShiftEarlier(first);
  return t;
}

Timeline TimelineFromChromeTrace(const std::string& text, const std::string& origin) {
  try {
    return TimelineFromChromeTraceDoc(text, origin);
  } catch (const json::exception& e) {
    throw Error(origin + ": " + JsonErrorText(e));
  }
}

}  // namespace pplab
