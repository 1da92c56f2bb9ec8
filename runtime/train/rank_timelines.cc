#include "runtime/train/rank_timelines.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <limits>
#include <optional>
#include <string>

#include "runtime/comm/collectives.h"

namespace pplab {
namespace {

// This boot of this host: the FNV-1a hash of /proc/sys/kernel/random/boot_id,
// in 63 bits; 0 when it cannot be read.
int64_t BootId() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  if (!(in >> id)) return 0;
  uint64_t h = 14695981039346656037ULL;
  for (const unsigned char c : id) h = (h ^ c) * 1099511628211ULL;
  return static_cast<int64_t>(h >> 1);
}

// Events travel to rank 0 as nine int64 per action: the action (with an
// overlap's backward part), its start and end, and the live bytes at its
// end (kNoBytes: none measured).
constexpr size_t kEventWords = 9;
constexpr int64_t kNoBytes = std::numeric_limits<int64_t>::min();

std::vector<int64_t> Encode(const std::vector<TimelineEvent>& events,
                            const std::vector<std::optional<Bytes>>& live_after) {
  std::vector<int64_t> out;
  out.reserve(events.size() * kEventWords);
  for (size_t i = 0; i < events.size(); ++i) {
    const TimelineEvent& e = events[i];
    const Action& a = e.action;
    const std::optional<Bytes> live = i < live_after.size() ? live_after[i] : std::nullopt;
    out.insert(out.end(), {static_cast<int64_t>(a.kind), a.stage, a.microbatch, static_cast<int64_t>(a.overlap_kind),
                           a.overlap_stage, a.overlap_microbatch, e.start, e.end, live.value_or(kNoBytes)});
  }
  return out;
}

void Decode(RankId rank, const std::vector<int64_t>& words, Timeline& into) {
  for (size_t i = 0; i + kEventWords <= words.size(); i += kEventWords) {
    TimelineEvent e;
    e.rank = rank;
    e.action.kind = static_cast<ActionKind>(words[i]);
    e.action.stage = static_cast<StageId>(words[i + 1]);
    e.action.microbatch = static_cast<MicrobatchId>(words[i + 2]);
    e.action.overlap_kind = static_cast<ActionKind>(words[i + 3]);
    e.action.overlap_stage = static_cast<StageId>(words[i + 4]);
    e.action.overlap_microbatch = static_cast<MicrobatchId>(words[i + 5]);
    e.start = words[i + 6];
    e.end = words[i + 7];
    into.events.push_back(e);
    if (words[i + 8] != kNoBytes) into.memory.push_back({rank, e.end, words[i + 8]});
  }
}

// Step events travel as three int64 each: the name's index in
// kStepEventNames, start and end.
constexpr size_t kStepWords = 3;

std::vector<int64_t> EncodeSteps(const std::vector<StepEvent>& steps) {
  std::vector<int64_t> out;
  for (const StepEvent& e : steps) {
    const auto* it = std::find_if(std::begin(kStepEventNames), std::end(kStepEventNames),
                                  [&](const char* name) { return e.name == name; });
    if (it == std::end(kStepEventNames)) continue;  // a name the trace format does not know
    out.insert(out.end(), {static_cast<int64_t>(it - std::begin(kStepEventNames)), e.start, e.end});
  }
  return out;
}

void DecodeSteps(RankId rank, const std::vector<int64_t>& words, Timeline& into) {
  constexpr int64_t kNames = static_cast<int64_t>(std::size(kStepEventNames));
  for (size_t i = 0; i + kStepWords <= words.size(); i += kStepWords) {
    if (words[i] < 0 || words[i] >= kNames) continue;
    into.step_events.push_back({rank, kStepEventNames[words[i]], words[i + 1], words[i + 2]});
  }
}

}  // namespace

std::chrono::steady_clock::time_point SharedOrigin(ProcessGroupHandle& group,
                                                   std::chrono::steady_clock::time_point mine,
                                                   std::chrono::milliseconds timeout) {
  const int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(mine.time_since_epoch()).count();
  const std::vector<std::vector<int64_t>> all = AllGatherWords(group, {ns, BootId()}, timeout);
  constexpr int64_t kSecond = 1000000000;
  for (const std::vector<int64_t>& r : all) {
    if (r.at(1) == 0 || r[1] != all[0].at(1) || std::llabs(r[0] - all[0][0]) > kSecond) return mine;
  }
  return std::chrono::steady_clock::time_point(
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::nanoseconds(all[0][0])));
}

void GatherLastStep(const Schedule& schedule, RankId rank, ProcessGroupHandle* group, const TrainerOptions& options,
                    int tp_size, const std::vector<TimelineEvent>& events,
                    const std::vector<std::optional<Bytes>>& live_after, const std::vector<StepEvent>& step_events,
                    Bytes peak, TrainSummary& summary) {
  // World rank k T of the first pipeline is its pipeline rank k.
  const int T = tp_size;
  std::vector<std::vector<int64_t>> all, all_steps;
  if (group != nullptr) {
    all = GatherToRank0(*group, Encode(events, live_after), options.comm_timeout);
    all_steps = GatherToRank0(*group, EncodeSteps(step_events), options.comm_timeout);
  } else {
    all.push_back(Encode(events, live_after));
    all_steps.push_back(EncodeSteps(step_events));
  }
  if (options.memory != nullptr) {
    const std::vector<std::vector<int64_t>> peaks = group != nullptr
                                                        ? GatherToRank0(*group, {peak}, options.comm_timeout)
                                                        : std::vector<std::vector<int64_t>>{{peak}};
    for (RankId r = 0; r * T < static_cast<RankId>(peaks.size()) && r < schedule.ranks; ++r) {
      summary.peak_activation_bytes.push_back(peaks[r * T].at(0));
    }
  }
  // A collective's result on one rank does not mean its own bytes reached
  // the others: over NCCL's socket transport they may still be on their way
  // when it returns and tears its communicators down (ProcessGroupNCCL's
  // destructor aborts them). Every rank has read the gathers' results once
  // all have passed this barrier, which runs through the store alone, so no
  // collective is left in flight behind it.
  if (group != nullptr) HostBarrier(*group, options.comm_timeout);
  if (rank != 0) return;
  Timeline& t = summary.last_step;
  t.name = schedule.name;
  t.source = "measured";
  t.ranks = schedule.ranks;
  for (RankId r = 0; r * T < static_cast<RankId>(all.size()) && r < schedule.ranks; ++r) Decode(r, all[r * T], t);
  for (RankId r = 0; r * T < static_cast<RankId>(all_steps.size()) && r < schedule.ranks; ++r) {
    DecodeSteps(r, all_steps[r * T], t);
  }
  TimeNs first = t.events.empty() ? 0 : t.events.front().start;
  for (const TimelineEvent& e : t.events) first = std::min(first, e.start);
  t.ShiftEarlier(first);
  // Each rank's samples in time order (a send may end after the compute
  // that follows it), as the simulator's are.
  std::stable_sort(t.memory.begin(), t.memory.end(), [](const MemorySample& a, const MemorySample& b) {
    return a.rank != b.rank ? a.rank < b.rank : a.time < b.time;
  });
}

}  // namespace pplab
