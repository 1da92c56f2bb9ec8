#include "schedules/dependencies.h"

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/depth_first_search.hpp>

#include "schedules/action_kinds.h"

namespace pplab {

ActionIndex::ActionIndex(const Schedule& schedule) : stages_(schedule.stages), microbatches_(schedule.microbatches) {
  offsets_.assign(schedule.programs.size() + 1, 0);
  for (size_t r = 0; r < schedule.programs.size(); ++r) {
    offsets_[r + 1] = offsets_[r] + static_cast<int>(schedule.programs[r].size());
  }
  node_of_.assign(static_cast<size_t>(kNumActionKinds) * stages_ * microbatches_, -1);
  for (size_t r = 0; r < schedule.programs.size(); ++r) {
    const Program& p = schedule.programs[r];
    for (size_t i = 0; i < p.size(); ++i) {
      const int node = Node(static_cast<RankId>(r), static_cast<int>(i));
      auto record = [&](const Action& a) {
        const int64_t key = Key(a.kind, a.stage, a.microbatch);
        if (key >= 0 && node_of_[key] < 0) node_of_[key] = node;
      };
      record(p[i]);
      // A composite is found under each of its parts too.
      if (p[i].kind == ActionKind::kOverlapFB) {
        for (const Action& part : PartsOf(p[i])) record(part);
      }
    }
  }
}

ActionRef ActionIndex::Ref(int node) const {
  RankId r = 0;
  while (offsets_[r + 1] <= node) ++r;
  return {r, node - offsets_[r]};
}

int64_t ActionIndex::Key(ActionKind kind, StageId stage, MicrobatchId microbatch) const {
  if (stage < 0 || stage >= stages_ || microbatch < 0 || microbatch >= microbatches_) return -1;
  return (static_cast<int64_t>(kind) * stages_ + stage) * microbatches_ + microbatch;
}

int ActionIndex::Find(ActionKind kind, StageId stage, MicrobatchId microbatch) const {
  const int64_t key = Key(kind, stage, microbatch);
  return key < 0 ? -1 : node_of_[key];
}

int ActionIndex::FindInputGrad(StageId stage, MicrobatchId microbatch) const {
  const int b = Find(ActionKind::kBackward, stage, microbatch);
  return b >= 0 ? b : Find(ActionKind::kBackwardInput, stage, microbatch);
}

std::vector<std::pair<int, int>> DependencyEdges(const Schedule& schedule, const ActionIndex& index) {
  std::vector<std::pair<int, int>> edges;
  auto add = [&](int from, int to) {
    if (from >= 0 && to >= 0) edges.emplace_back(from, to);
  };
  const int S = schedule.stages;
  // What one simple compute action (a part of `node`) waits for.
  auto compute_deps = [&](const Action& a, int node) {
    const StageId s = a.stage;
    const MicrobatchId m = a.microbatch;
    if (a.kind == ActionKind::kForward) {
      if (s > schedule.FirstStage(m)) add(index.Find(ActionKind::kForward, s - 1, m), node);
      add(index.Find(ActionKind::kRecvF, s, m), node);
    } else if (IsInputGrad(a.kind)) {
      add(index.Find(ActionKind::kForward, s, m), node);
      if (s < schedule.LastStage(m)) add(index.FindInputGrad(s + 1, m), node);
      add(index.Find(ActionKind::kRecvB, s, m), node);
    } else {  // W
      add(index.Find(ActionKind::kBackwardInput, s, m), node);
    }
  };
  for (RankId r = 0; r < schedule.ranks; ++r) {
    const Program& p = schedule.programs[r];
    for (size_t i = 0; i < p.size(); ++i) {
      const int node = index.Node(r, static_cast<int>(i));
      if (i > 0) add(node - 1, node);
      const Action& a = p[i];
      const StageId s = a.stage;
      const MicrobatchId m = a.microbatch;
      switch (InfoOf(a.kind).role) {
        case KindRole::kCompute:
        case KindRole::kComposite:
          for (const Action& part : PartsOf(a)) compute_deps(part, node);
          break;
        case KindRole::kSend:
          add(a.kind == ActionKind::kSendF ? index.Find(ActionKind::kForward, s, m) : index.FindInputGrad(s, m), node);
          break;
        case KindRole::kRecv: {
          const StageId from = PeerStage(a);
          if (from >= 0 && from < S) {
            add(index.Find(a.kind == ActionKind::kRecvF ? ActionKind::kSendF : ActionKind::kSendB, from, m), node);
          }
          break;
        }
        case KindRole::kPerStage:
          // The reduction follows every gradient of its stage; UNSHARD and
          // RESHARD are ordered by their program alone.
          if (a.kind == ActionKind::kReduceGrad) {
            for (MicrobatchId mb = 0; mb < schedule.microbatches; ++mb) {
              add(index.Find(ActionKind::kBackward, s, mb), node);
              add(index.Find(ActionKind::kBackwardWeight, s, mb), node);
            }
          }
          break;
      }
    }
  }
  return edges;
}

namespace {

using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS>;

// Records the DFS tree and stops at the first back edge, which closes a cycle.
struct CycleVisitor : boost::default_dfs_visitor {
  std::vector<int>* parent;
  std::pair<int, int>* first_back;
  void tree_edge(Graph::edge_descriptor e, const Graph& g) const {
    (*parent)[boost::target(e, g)] = static_cast<int>(boost::source(e, g));
  }
  void back_edge(Graph::edge_descriptor e, const Graph& g) const {
    if (first_back->first < 0) {
      *first_back = {static_cast<int>(boost::source(e, g)), static_cast<int>(boost::target(e, g))};
    }
  }
};

}  // namespace

std::vector<int> FindCycle(int num_nodes, const std::vector<std::pair<int, int>>& edges) {
  Graph g(edges.begin(), edges.end(), num_nodes);
  std::vector<int> parent(num_nodes, -1);
  std::pair<int, int> back = {-1, -1};
  CycleVisitor visitor;
  visitor.parent = &parent;
  visitor.first_back = &back;
  std::vector<boost::default_color_type> color(num_nodes);
  boost::depth_first_search(g, boost::visitor(visitor).color_map(boost::make_iterator_property_map(
                                   color.begin(), boost::get(boost::vertex_index, g))));
  if (back.first < 0) return {};
  // back = (u -> v) with v an ancestor of u: the cycle is v -> ... -> u -> v.
  std::vector<int> cycle;
  for (int n = back.first; n != back.second; n = parent[n]) cycle.push_back(n);
  cycle.push_back(back.second);
  return {cycle.rbegin(), cycle.rend()};
}

}  // namespace pplab
