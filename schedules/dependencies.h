// The dependency DAG of a schedule, shared by validation and analysis.
//
// Nodes are the actions of all programs, numbered rank by rank in program
// order. Edges are the dependencies the IR implies:
//   - program order: each action after the previous one on its rank;
//   - data: F(s,m) -> F(s+1,m); F(S-1,m) -> B/I(S-1,m); F(s,m) -> B/I(s,m);
//           B/I(s+1,m) -> B/I(s,m); I(s,m) -> W(s,m);
//   - messages: producer -> SEND -> RECV -> consumer, e.g.
//           F(s,m) -> SEND_F(s,m) -> RECV_F(s+1,m) -> F(s+1,m).
//   - composites: an OVERLAP_F_B waits for what each of its parts waits for,
//           and is found (ActionIndex::Find) under each part's kind;
//   - per-stage: REDUCE_GRAD(s) after every B and W of stage s.
// A RECV is treated as blocking until its message arrives, which is the
// conservative reading: a schedule without a cycle here cannot deadlock in an
// executor whether its receives block or are posted ahead.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "schedules/schedule.h"

namespace pplab {

struct ActionRef {
  RankId rank = 0;
  int step = 0;  // index in programs[rank]
  friend bool operator==(const ActionRef& a, const ActionRef& b) { return a.rank == b.rank && a.step == b.step; }
};

class ActionIndex {
 public:
  explicit ActionIndex(const Schedule& schedule);
  // Node id of (rank, step).
  int Node(RankId rank, int step) const { return offsets_[rank] + step; }
  ActionRef Ref(int node) const;
  int NumNodes() const { return offsets_.back(); }
  // Node of the unique action (kind, stage, microbatch), or -1 if there is
  // none. When an action occurs several times, the first occurrence.
  int Find(ActionKind kind, StageId stage, MicrobatchId microbatch) const;
  // Node of the B or I of (stage, microbatch), or -1.
  int FindInputGrad(StageId stage, MicrobatchId microbatch) const;

 private:
  int64_t Key(ActionKind kind, StageId stage, MicrobatchId microbatch) const;
  std::vector<int> offsets_;  // size K + 1
  int stages_, microbatches_;
  std::vector<int> node_of_;  // key -> node or -1
};

// Edges (from, to) of the dependency DAG described above; edges whose
// endpoints are missing from the schedule are left out.
std::vector<std::pair<int, int>> DependencyEdges(const Schedule& schedule, const ActionIndex& index);

// One cycle of the graph as a node list n0, n1, ..., nk where each node must
// finish before the next starts and nk must finish before n0; empty when the
// graph is acyclic. Uses Boost.Graph's depth-first search.
std::vector<int> FindCycle(int num_nodes, const std::vector<std::pair<int, int>>& edges);

}  // namespace pplab
