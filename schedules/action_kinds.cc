#include "schedules/action_kinds.h"

namespace pplab {

const std::vector<KindInfo>& KindTable() {
  using R = KindRole;
  using X = KindResource;
  using C = KindCost;
  using Mem = KindMemory;
  static const std::vector<KindInfo> kTable = {
      {ActionKind::kForward, "F", R::kCompute, true, X::kCompute, C::kForward, Mem::kHoldActivations,
       "F(s-1,m) (or its RECV_F)", "#0072B2", "#ffffff", "F forward", 'F'},
      {ActionKind::kBackward, "B", R::kCompute, true, X::kCompute, C::kBackward, Mem::kReleaseActivations,
       "F(s,m) and B/I(s+1,m) (or its RECV_B)", "#009E73", "#ffffff", "B backward", 'B'},
      {ActionKind::kBackwardInput, "I", R::kCompute, true, X::kCompute, C::kBackwardInput,
       Mem::kSwapActivationsForStash, "F(s,m) and B/I(s+1,m) (or its RECV_B)", "#E69F00", "#000000", "I input grad",
       'I'},
      {ActionKind::kBackwardWeight, "W", R::kCompute, true, X::kCompute, C::kBackwardWeight, Mem::kReleaseStash,
       "I(s,m)", "#CC79A7", "#000000", "W weight grad", 'W'},
      {ActionKind::kSendF, "SEND_F", R::kSend, true, X::kLink, C::kTransfer, Mem::kNone, "F(s,m)", "#555555", "#000000",
       "SEND transfer", '>'},
      {ActionKind::kRecvF, "RECV_F", R::kRecv, true, X::kLink, C::kFree, Mem::kNone, "SEND_F(s-1,m)", "#777777",
       "#000000", "RECV posted to arrival", '<'},
      {ActionKind::kSendB, "SEND_B", R::kSend, true, X::kLink, C::kTransfer, Mem::kNone, "B/I(s,m)", "#555555",
       "#000000", "SEND transfer", '>'},
      {ActionKind::kRecvB, "RECV_B", R::kRecv, true, X::kLink, C::kFree, Mem::kNone, "SEND_B(s+1,m)", "#777777",
       "#000000", "RECV posted to arrival", '<'},
      {ActionKind::kOverlapFB, "OVERLAP_F_B", R::kComposite, true, X::kCompute, C::kOverlap, Mem::kParts,
       "what its F part and its B/I part each depend on", "#56B4E9", "#000000", "F&B overlapped", 'X'},
      {ActionKind::kReduceGrad, "REDUCE_GRAD", R::kPerStage, false, X::kOverlappedCollective, C::kAllReduce, Mem::kNone,
       "every B/W of stage s", "#D55E00", "#ffffff", "REDUCE_GRAD all-reduce", 'R'},
      {ActionKind::kUnshard, "UNSHARD", R::kPerStage, false, X::kCollective, C::kAllGather, Mem::kHoldParams,
       "program order", "#F0E442", "#000000", "UNSHARD all-gather", 'U'},
      {ActionKind::kReshard, "RESHARD", R::kPerStage, false, X::kCollective, C::kFree, Mem::kReleaseParams,
       "program order", "#999999", "#000000", "RESHARD free", 'S'},
  };
  return kTable;
}

const KindInfo& InfoOf(ActionKind kind) { return KindTable()[static_cast<int>(kind)]; }

}  // namespace pplab
