// What each rank holds, sample by sample (sim/simulator_memory.cc):
// activations in flight, workspaces, message buffers under each transport's
// rules, gradients, weight casts, and the parts of a rank's peak.
#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "schedules/generators.h"
#include "schedules/lowering.h"
#include "sim/recompute.h"
#include "sim/simulator.h"
#include "tests/generator_rules.h"

namespace pplab::simulator_memory_test {
namespace {

// A stage of F 1000 ns and B 2000 ns that holds 1000 activation bytes.
StageCost StageOfThousand() {
  StageCost c;
  c.forward = 1000;
  c.backward = 2000;
  c.activation_bytes = 1000;
  return c;
}

// Two ranks of GPipe, M=2: F 1000 ns, B 2000 ns, 1000 activation bytes, 100-byte messages
// that take 100 ns, and the transport's rules for message buffers.
SimResult GPipeWithMessages(const std::optional<MessageMemory>& messages, std::optional<Bytes> forward_send) {
  StageCost c = StageOfThousand();
  c.message_bytes = 100;
  c.forward_send_bytes = forward_send;
  CostModel costs = CostModel::Uniform(2, c, Link{100, 0});
  costs.SetMessages(messages);
  return Simulate(Lower(GenerateGPipe(2, 2)), costs);
}

// Rank r's memory after its samples up to and including time t.
Bytes HeldAt(const SimResult& r, RankId rank, TimeNs t) {
  Bytes held = 0;
  for (const MemorySample& s : r.timeline.memory) {
    if (s.rank == rank && s.time <= t) held = s.bytes;
  }
  return held;
}

}  // namespace

TEST_CASE("peak in-flight microbatches per rank follow each family's memory rule", "[sim]") {
  const int K = 4, M = 12;
  StageCost c;
  c.forward = 1;
  c.backward = 2;
  c.activation_bytes = 1000;
  c.weight_grad_bytes = 100;
  for (RankId r = 0; r < K; ++r) {
    const SimResult gpipe = Simulate(GenerateGPipe(K, M), CostModel::Uniform(K, c, {}));
    CHECK(gpipe.per_rank[r].peak_inflight == M);
    CHECK(gpipe.per_rank[r].peak_activation_bytes == M * 1000);
    const SimResult f1b1 = Simulate(Generate1F1B(K, M), CostModel::Uniform(K, c, {}));
    CHECK(f1b1.per_rank[r].peak_inflight == K - r);
    CHECK(f1b1.per_rank[r].peak_activation_bytes == (K - r) * 1000);
    const SimResult h1 = Simulate(GenerateZeroBubbleH1(K, M), CostModel::Uniform(K, c, {}));
    CHECK(h1.per_rank[r].peak_inflight == K - r);
    const SimResult h2 = Simulate(GenerateZeroBubbleH2(K, M), CostModel::Uniform(K, c, {}));
    CHECK(h2.per_rank[r].peak_inflight == 2 * (K - r) - 1);
  }
}

TEST_CASE("an action's workspace counts in the peak while it runs, on top of what is held", "[sim]") {
  const int K = 4, M = 12;
  StageCost c;
  c.forward = 1;
  c.backward = 2;
  c.activation_bytes = 1000;
  c.workspace_bytes = 300;
  for (RankId r = 0; r < K; ++r) {
    // GPipe holds all M microbatches when the first B starts; 1F1B holds
    // K - r when a rank's F of its last warm-up microbatch runs.
    CHECK(Simulate(GenerateGPipe(K, M), CostModel::Uniform(K, c, {})).per_rank[r].peak_activation_bytes ==
          M * 1000 + 300);
    CHECK(Simulate(Generate1F1B(K, M), CostModel::Uniform(K, c, {})).per_rank[r].peak_activation_bytes ==
          (K - r) * 1000 + 300);
  }
  // It round-trips through the JSON form.
  const CostModel m = CostModel::Uniform(2, c, {});
  CHECK(CostModel::FromJson(m.ToJson(), "t").Stage(1).workspace_bytes == 300);
}

TEST_CASE("message buffers freed at the step's end and allocated at use (Gloo) count in the peak", "[sim]") {
  // Rank 0: F m0 [0,1000], SEND_F (100 B held to the end), F m1 [1000,2000]
  // with 1000 + 100 + 1000 live, SEND_F (+100: 2200). Rank 1 runs F at
  // 1100 and 2100 and its B's at 3100-5100 and 5100-7100; each SEND_B
  // arrives 100 ns later. Rank 0's first B (5200-7200) has the received
  // gradient allocated when it starts: 2200 + 100.
  const MessageMemory gloo{MessageMemory::SentFreed::kStepEnd, MessageMemory::ReceivePosted::kAtUse};
  const SimResult with = GPipeWithMessages(gloo, std::nullopt);
  const SimResult without = GPipeWithMessages(std::nullopt, std::nullopt);
  CHECK(without.per_rank[0].peak_activation_bytes == 2000);
  CHECK(with.per_rank[0].peak_activation_bytes == 2300);
  // Made of two F's activations, two sent copies and the received gradient.
  CHECK(with.per_rank[0].peak_parts.activations == 2000);
  CHECK(with.per_rank[0].peak_parts.messages == 300);
  CHECK(with.per_rank[0].peak_parts.Total() == 2300);
  CHECK(HeldAt(with, 0, 2000) == 2200);
  // Rank 1 (the last stage) holds its input gradients from each B's end:
  // 1000 + 100 after the first, 100 + 100 after the second.
  CHECK(HeldAt(with, 1, 5100) == 1100);
  CHECK(HeldAt(with, 1, 7100) == 200);
  CHECK(with.per_rank[1].peak_activation_bytes == 2000);
  // Everything is freed by the step's end; times are unchanged.
  CHECK(with.timeline.memory.back().bytes == 0);
  CHECK(HeldAt(with, 0, with.makespan) == 0);
  CHECK(with.makespan == without.makespan);
}

TEST_CASE("message buffers freed after delivery and posted one action ahead (NCCL) count where they live", "[sim]") {
  // NCCL sends a view of outputs F keeps anyway: a SEND_F holds nothing
  // more. Rank 0 posts its first gradient receive with F m1 (2100 live
  // during it) and its second with its first B: 1000 + 1000 + 100 + 100.
  const MessageMemory nccl{MessageMemory::SentFreed::kNextSendAfterDelivery,
                           MessageMemory::ReceivePosted::kOneActionAhead};
  const SimResult r = GPipeWithMessages(nccl, Bytes{0});
  CHECK(r.per_rank[0].peak_activation_bytes == 2200);
  CHECK(HeldAt(r, 0, 1000) == 2100);
  // Rank 1 posts RECV_F m0 at the step's start (no compute before it) and
  // RECV_F m1 with F m0, whose received input then counts in F's own bytes.
  CHECK(HeldAt(r, 1, 0) == 100);
  CHECK(HeldAt(r, 1, 1100) == 1100);
  CHECK(HeldAt(r, 1, 2100) == 2000);
  // Its first SEND_B's gradients (100) are freed by the second SEND_B at
  // 7100, after their delivery at 5200: 100 held after it, 0 at the end.
  CHECK(HeldAt(r, 1, 7100) == 100);
  CHECK(r.timeline.memory.back().bytes == 0);
  // With Gloo's rules rank 0's forwards would hold 200 bytes more.
  const MessageMemory gloo{MessageMemory::SentFreed::kStepEnd, MessageMemory::ReceivePosted::kAtUse};
  CHECK(GPipeWithMessages(gloo, Bytes{0}).per_rank[0].peak_activation_bytes == 2100);
}

TEST_CASE("outputs sent as a view stay held by the message after B releases them, until the transport frees it",
          "[sim]") {
  // Gloo as pplab uses it: receives posted one action ahead, sends freed at
  // the step's end, and a SEND_F that is a view of F's outputs (0 bytes
  // more when sent). Rank 0: F m0 [0,1000], F m1 [1000,2000] with its first
  // gradient receive posted (2100), B m0 [5200,7200] with the second
  // posted (2200). When B m0 ends, its activations go (-1000) and so does
  // the gradient it used (-100), but its outputs' 100 bytes stay with
  // SEND_F m0: 1200, then 200 after B m1, 0 once the step's actions end.
  const MessageMemory gloo{MessageMemory::SentFreed::kStepEnd, MessageMemory::ReceivePosted::kOneActionAhead,
                           /*sent_view=*/true};
  const SimResult r = GPipeWithMessages(gloo, Bytes{0});
  CHECK(r.per_rank[0].peak_activation_bytes == 2200);
  CHECK(HeldAt(r, 0, 1000) == 2100);
  CHECK(HeldAt(r, 0, 7199) == 2200);
  CHECK(HeldAt(r, 0, 7200) == 1200);
  CHECK(HeldAt(r, 0, 9199) == 1200);
  CHECK(r.timeline.memory.back().bytes == 0);
  // Freed after delivery (NCCL's rule), SEND_F m0 is gone by SEND_F m1 at
  // 2000, before B m0: its outputs go with B m0 (1100 after it). SEND_F m1,
  // which no later send frees, keeps its outputs from B m1 to the end (100).
  const MessageMemory nccl{MessageMemory::SentFreed::kNextSendAfterDelivery,
                           MessageMemory::ReceivePosted::kOneActionAhead, /*sent_view=*/true};
  const SimResult n = GPipeWithMessages(nccl, Bytes{0});
  CHECK(HeldAt(n, 0, 7200) == 1100);
  CHECK(HeldAt(n, 0, 9199) == 1100);
  // B m1 ends at 9200 with the step's actions: 100 held, then 0.
  CHECK(std::any_of(n.timeline.memory.begin(), n.timeline.memory.end(),
                    [](const MemorySample& m) { return m.rank == 0 && m.time == 9200 && m.bytes == 100; }));
  CHECK(HeldAt(n, 0, n.makespan) == 0);
  // A transport whose sends copy to another device (Gloo from a GPU) holds
  // nothing on this one: the outputs go with B as well.
  const MessageMemory host_copy{MessageMemory::SentFreed::kStepEnd, MessageMemory::ReceivePosted::kOneActionAhead,
                                /*sent_view=*/false};
  CHECK(HeldAt(GPipeWithMessages(host_copy, Bytes{0}), 0, 7200) == 1100);
  // A send that copied its message (forward_send_bytes = message_bytes)
  // holds the copy from the send (2200 at 1000, 2300 from SEND_F m1, 2400
  // with the second receive posted), and the outputs go with B: 1300.
  const SimResult copied = GPipeWithMessages(gloo, Bytes{100});
  CHECK(HeldAt(copied, 0, 1000) == 2200);
  CHECK(copied.per_rank[0].peak_activation_bytes == 2400);
  CHECK(HeldAt(copied, 0, 7200) == 1300);
}

TEST_CASE("input gradients handed to the previous stage on the same rank are held until its B ends", "[sim]") {
  // K=1, v=2, M=1: F s0, F s1, B s1, B s0. After B s1 the rank holds
  // stage 0's activations and the 100-byte input gradient of stage 1.
  StageCost c = StageOfThousand();
  c.message_bytes = 100;
  CostModel costs = CostModel::Uniform(2, c, Link{});
  costs.SetMessages(MessageMemory{});
  const SimResult r = Simulate(Lower(GenerateInterleaved1F1B(1, 1, 2)), costs);
  CHECK(HeldAt(r, 0, 4000) == 1100);
  CHECK(HeldAt(r, 0, 6000) == 0);
}

TEST_CASE("message_memory and forward_send_bytes round-trip through the cost file and are checked", "[sim]") {
  StageCost c;
  c.forward = 1;
  c.backward = 2;
  c.forward_send_bytes = 0;
  CostModel m = CostModel::Uniform(2, c, {});
  m.SetMessages(MessageMemory{MessageMemory::SentFreed::kNextSendAfterDelivery,
                              MessageMemory::ReceivePosted::kOneActionAhead, /*sent_view=*/true});
  const CostModel back = CostModel::FromJson(m.ToJson(), "t");
  REQUIRE(back.Messages());
  CHECK(back.Messages()->sent_freed == MessageMemory::SentFreed::kNextSendAfterDelivery);
  CHECK(back.Messages()->receive_posted == MessageMemory::ReceivePosted::kOneActionAhead);
  CHECK(back.Messages()->sent_view);
  CHECK(back.Stage(1).forward_send_bytes == Bytes{0});
  CHECK_FALSE(CostModel::FromJson(CostModel::Uniform(2, c, {}).ToJson(), "t").Messages());
  const std::string base = R"({"format": "pplab.cost", "version": 1, "num_stages": 2,
      "default": {"forward_ms": 1, "backward_ms": 2}, "message_memory": )";
  CHECK_THROWS_WITH(CostModel::FromJson(base + R"({"sent_freed": "never", "receive_posted": "at_use"}})", "c.json"),
                    "c.json: message_memory.sent_freed must be \"step_end\" or \"next_send_after_delivery\", "
                    "got \"never\"");
  CHECK_THROWS_WITH(CostModel::FromJson(base + R"({"sent_freed": "step_end"}})", "c.json"),
                    "c.json: message_memory.receive_posted must be \"at_use\" or \"one_action_ahead\"");
  CHECK_THROWS_WITH(
      CostModel::FromJson(base + R"({"sent_freed": "step_end", "receive_posted": "at_use", "x": 1}})", "c.json"),
      "c.json: message_memory: unknown field 'x'");
  // sent_view is optional (files from before it mean no view) and a boolean.
  CHECK_FALSE(CostModel::FromJson(base + R"({"sent_freed": "step_end", "receive_posted": "at_use"}})", "c.json")
                  .Messages()
                  ->sent_view);
  CHECK_THROWS_WITH(CostModel::FromJson(
                        base + R"({"sent_freed": "step_end", "receive_posted": "at_use", "sent_view": 1}})", "c.json"),
                    "c.json: message_memory.sent_view must be true or false, got 1");
}

TEST_CASE("F and B count their own workspace where the stage gives each", "[sim]") {
  // One rank, GPipe, M=2: F0 holds 1000 + 100 while it runs, F1 2000 + 100,
  // the first B 2000 + 300 (workspace_bytes only stands in for a kind
  // that has none of its own).
  StageCost c = StageOfThousand();
  c.workspace_bytes = 5000;
  c.forward_workspace_bytes = 100;
  c.backward_workspace_bytes = 300;
  CHECK(Simulate(Lower(GenerateGPipe(1, 2)), CostModel::Uniform(1, c, {})).per_rank[0].peak_activation_bytes == 2300);
  c.backward_workspace_bytes.reset();  // B falls back to workspace_bytes
  CHECK(Simulate(Lower(GenerateGPipe(1, 2)), CostModel::Uniform(1, c, {})).per_rank[0].peak_activation_bytes == 7000);
  c.backward_workspace_bytes = 300;
  CHECK(c.WorkspaceOf(ActionKind::kForward) == 100);
  CHECK(c.WorkspaceOf(ActionKind::kBackwardWeight) == 300);
  CHECK(c.WorkspaceOf(ActionKind::kBackwardInput) == 300);  // I falls back to B's
  c.backward_input_workspace_bytes = 400;
  CHECK(c.WorkspaceOf(ActionKind::kBackwardInput) == 400);
  CHECK(c.WorkspaceOf(ActionKind::kBackwardWeight) == 300);
  CHECK(c.WorkspaceOf(ActionKind::kBackward) == 300);
  const CostModel back = CostModel::FromJson(CostModel::Uniform(2, c, {}).ToJson(), "t");
  CHECK(back.Stage(1).forward_workspace_bytes == Bytes{100});
  CHECK(back.Stage(1).backward_workspace_bytes == Bytes{300});
  CHECK(back.Stage(1).backward_input_workspace_bytes == Bytes{400});
  CHECK_FALSE(back.Stage(1).backward_weight_workspace_bytes);
}

TEST_CASE("a W counts its own workspace, not the backward's that it does not run", "[sim]") {
  // zb-h1 on one rank, M=1: F0 holds 1000 + 100 while it runs, I0 1000 +
  // 200, then W0 its 500-byte stash + 50. Without a W workspace W0 falls
  // back to B's, 3000 (the last stage's logits' gradient, say): 3500.
  StageCost c = StageOfThousand();
  c.weight_grad_bytes = 500;
  c.forward_workspace_bytes = 100;
  c.backward_workspace_bytes = 3000;
  c.backward_input_workspace_bytes = 200;
  const Schedule zb = Lower(GenerateZeroBubbleH1(1, 1));
  CHECK(Simulate(zb, CostModel::Uniform(1, c, {})).per_rank[0].peak_activation_bytes == 3500);
  c.backward_weight_workspace_bytes = 50;
  CHECK(c.WorkspaceOf(ActionKind::kBackwardWeight) == 50);
  CHECK(c.WorkspaceOf(ActionKind::kBackward) == 3000);
  const SimResult sim = Simulate(zb, CostModel::Uniform(1, c, {}));
  CHECK(sim.per_rank[0].peak_activation_bytes == 1200);
  CHECK(sim.per_rank[0].peak_parts.workspace == 200);
  c.backward_weight_workspace_bytes = 800;  // 500 + 800 = 1300, W's own peak
  CHECK(Simulate(zb, CostModel::Uniform(1, c, {})).per_rank[0].peak_activation_bytes == 1300);
  const CostModel back = CostModel::FromJson(CostModel::Uniform(1, c, {}).ToJson(), "t");
  CHECK(back.Stage(0).backward_weight_workspace_bytes == Bytes{800});
  CHECK_THROWS_WITH(CostModel::FromJson(R"({"format": "pplab.cost", "version": 1, "stages": [{"forward_ms": 1, )"
                                        R"("backward_ms": 2, "backward_weight_workspace_bytes": -1}]})",
                                        "c.json"),
                    Catch::Contains("c.json: stages[0].backward_weight_workspace_bytes must be finite and >= 0"));
}

TEST_CASE("an I keeps the output gradients it used until its W, as the executor does", "[sim]") {
  // zb-h1, K=2, M=1, free links, Gloo's rules. Rank 0: F0 [0,1000] holds
  // 1000, its SEND_F a 100-byte copy; I0 [3000,4000] gets the 100-byte
  // gradient, then holds 500 for W0 in place of its 1000 of activations:
  // 1000 + 100 + 100 - 1000 + 500 = 700 until W0 ends at 5000, which frees
  // the gradient with its 500: the send's copy is left, until the step ends
  // at the same time.
  StageCost c = StageOfThousand();
  c.backward_weight = 1000;
  c.weight_grad_bytes = 500;
  c.message_bytes = 100;
  CostModel costs = CostModel::Uniform(2, c, Link{});
  costs.SetMessages(MessageMemory{});
  const SimResult r = Simulate(Lower(GenerateZeroBubbleH1(2, 1)), costs);
  CHECK(HeldAt(r, 0, 3000) == 1200);
  CHECK(HeldAt(r, 0, 4000) == 700);
  CHECK(HeldAt(r, 0, 4999) == 700);
  std::vector<Bytes> at_end;
  for (const MemorySample& m : r.timeline.memory) {
    if (m.rank == 0 && m.time == 5000) at_end.push_back(m.bytes);
  }
  // W0 frees its 500, then the gradient, then the step's end the copy.
  CHECK(at_end == std::vector<Bytes>{200, 100, 0});
}

TEST_CASE("gradients are held at their own size, messages at the wire's", "[sim]") {
  // As bf16 on the wire does: 50-byte messages of 100-byte gradients. GPipe,
  // K=2, M=2, Gloo's rules. Rank 1 (the last stage) holds its first B's
  // input gradient (100) until its SEND_B, whose copy then holds 50: after
  // the second B 100 + 50, and after the second SEND_B 50 + 50.
  StageCost c = StageOfThousand();
  c.message_bytes = 50;
  c.input_grad_bytes = 100;
  CostModel costs = CostModel::Uniform(2, c, Link{100, 0});
  costs.SetMessages(MessageMemory{});
  const SimResult r = Simulate(Lower(GenerateGPipe(2, 2)), costs);
  // Rank 1: B's at 3100-5100 and 5100-7100, each SEND_B as its B ends. At
  // 5100: the B frees 1000, holds the gradient's 100, whose SEND_B swaps it
  // for the message's 50.
  std::vector<Bytes> at_first_send;
  for (const MemorySample& m : r.timeline.memory) {
    if (m.rank == 1 && m.time == 5100) at_first_send.push_back(m.bytes);
  }
  CHECK(at_first_send == std::vector<Bytes>{1000, 1100, 1050});
  CHECK(HeldAt(r, 1, 7100) == 50 + 50);
  // Rank 0 holds two 50-byte sent copies; its first B (5200-7200) holds the
  // received gradient as 100 bytes: 2000 + 100 + 100.
  CHECK(r.per_rank[0].peak_activation_bytes == 2200);
  CHECK(r.timeline.memory.back().bytes == 0);
}

TEST_CASE("a stage fed on its rank holds its input only where the previous stage does not", "[sim]") {
  // K=1, v=2, M=1 (F s0, F s1, B s1, B s0); no message rules. Stage 1's
  // 1000 activation bytes were measured with a received input of 300.
  StageCost c = StageOfThousand();
  c.input_bytes = 300;
  CostModel costs = CostModel::Uniform(2, c, Link{});
  const Schedule k1 = Lower(GenerateInterleaved1F1B(1, 1, 2));
  CHECK(Simulate(k1, costs).per_rank[0].peak_activation_bytes == 2000);  // taken as it is
  StageCost s1 = c;
  s1.activation_includes_input = true;
  costs.SetStage(1, s1);
  // Stage 0 keeps its outputs, which are stage 1's input: 1000 + 700.
  CHECK(Simulate(k1, costs).per_rank[0].peak_activation_bytes == 1700);
  // A recomputed stage 0 hands them over and keeps only its own input (0
  // on the first stage here): stage 1 holds all of its 1000 again (700 if
  // it were shared), and so does stage 0's B, which rebuilds its 1000.
  StageCost s0 = c;
  s0.activation_bytes = 0;
  s0.recomputed_bytes = 1000;
  costs.SetStage(0, s0);
  CHECK(Simulate(k1, costs).per_rank[0].peak_activation_bytes == 1000);
  s0.recomputed_bytes = 10;  // now only stage 1's F shows it
  costs.SetStage(0, s0);
  CHECK(Simulate(k1, costs).per_rank[0].peak_activation_bytes == 1000);
  // Measured handed over, run received (K=2): F s1 holds 300 more.
  costs = CostModel::Uniform(2, c, Link{});
  s1.activation_includes_input = false;
  costs.SetStage(1, s1);
  CHECK(Simulate(Lower(GenerateGPipe(2, 1)), costs).per_rank[1].peak_activation_bytes == 1300);
  // It round-trips through the file.
  CHECK(CostModel::FromJson(costs.ToJson(), "t").Stage(1).activation_includes_input == false);
}

TEST_CASE("a stage's kept weight casts count from its first compute action to the step's end", "[sim]") {
  // 1F1B, K=2, M=2: stage 1's casts (500) from its first F at 1000, stage
  // 0's (300) from 0. Rank 1 holds 1000 + 500 during its first F, which is
  // its peak (it runs F, B, F, B).
  StageCost c = StageOfThousand();
  c.cast_weight_bytes = 300;
  CostModel costs = CostModel::Uniform(2, c, Link{});
  StageCost s1 = c;
  s1.cast_weight_bytes = 500;
  costs.SetStage(1, s1);
  const SimResult r = Simulate(Lower(Generate1F1B(2, 2)), costs);
  CHECK(HeldAt(r, 1, 999) == 0);
  CHECK(HeldAt(r, 1, 1000) == 1500);
  CHECK(r.per_rank[1].peak_activation_bytes == 1500);
  // Rank 0 runs F, F (2000 held) before its first B: 2300.
  CHECK(r.per_rank[0].peak_activation_bytes == 2300);
  CHECK(r.timeline.memory.back().bytes == 0);
  CHECK(CostModel::FromJson(costs.ToJson(), "t").Stage(1).cast_weight_bytes == 500);
}

TEST_CASE("the kinds of a rank's peak add up to it, for every generator", "[sim]") {
  StageCost c = StageOfThousand();
  c.backward_weight = 700;
  c.weight_grad_bytes = 400;
  c.workspace_bytes = 50;
  c.message_bytes = 30;
  c.input_grad_bytes = 60;
  c.cast_weight_bytes = 500;
  int checked = 0;
  for (const GeneratorInfo& g : Generators()) {
    if (g.needs_costs) continue;
    for (int K : {2, 4}) {
      const int M = 2 * K, v = 2;
      if (!FamilyAccepts(g, K, M, v)) continue;
      const Schedule s = Lower(Generate(g.name, {K, M, v}));
      CostModel costs = CostModel::Uniform(s.stages, c, Link{100, 0});
      costs.SetMessages(MessageMemory{MessageMemory::SentFreed::kNextSendAfterDelivery,
                                      MessageMemory::ReceivePosted::kOneActionAhead});
      const SimResult r = Simulate(s, costs);
      for (const RankMetrics& m : r.per_rank) {
        INFO(g.name << " K=" << K << " rank " << m.rank);
        CHECK(m.peak_parts.Total() == m.peak_activation_bytes);
        CHECK(m.peak_parts.casts > 0);  // every rank computes some stage
        ++checked;
      }
      // Every rank ends the step holding nothing (samples are by rank, then time).
      std::map<RankId, Bytes> last;
      for (const MemorySample& m : r.timeline.memory) last[m.rank] = m.bytes;
      for (const auto& [rank, bytes] : last) CHECK(bytes == 0);
    }
  }
  CHECK(checked > 20);
}

TEST_CASE("a graphed stage holds one slot per microbatch in flight, for the whole step", "[sim]") {
  // F 1000 ns, B 2000 ns, 1000 activation bytes, and a slot of 5000 bytes:
  // the graphs' pool and static tensors of one microbatch. The slots
  // outlive a step, so every step but a run's first holds them from its
  // start.
  StageCost c = StageOfThousand();
  c.graph_slot_bytes = 5000;
  SECTION("GPipe at K=1, M=4: four slots, held before the first F") {
    const SimResult r = Simulate(Lower(GenerateGPipe(1, 4)), CostModel::Uniform(1, c, {}));
    CHECK(r.per_rank[0].peak_activation_bytes == 4 * (5000 + 1000));
    CHECK(r.per_rank[0].peak_parts.graphs == 4 * 5000);
    CHECK(r.per_rank[0].peak_parts.activations == 4 * 1000);
    CHECK(HeldAt(r, 0, 0) == 4 * 5000 + 1000);
    CHECK(HeldAt(r, 0, 3000) == 4 * 6000);
    // Each B frees its activations, not its slot: the four stay held.
    CHECK(HeldAt(r, 0, r.makespan) == 4 * 5000);
  }
  SECTION("1F1B at K=1: one slot, freed by each B and taken again by the next F") {
    const SimResult r = Simulate(Lower(Generate1F1B(1, 4)), CostModel::Uniform(1, c, {}));
    CHECK(r.per_rank[0].peak_activation_bytes == 5000 + 1000);
    CHECK(HeldAt(r, 0, r.makespan) == 5000);
  }
  SECTION("1F1B at K=2, M=4: rank 0 holds two microbatches at once, rank 1 one") {
    const SimResult r = Simulate(Lower(Generate1F1B(2, 4)), CostModel::Uniform(2, c, {}));
    CHECK(r.per_rank[0].peak_parts.graphs == 2 * 5000);
    CHECK(r.per_rank[1].peak_parts.graphs == 5000);
    CHECK(r.per_rank[0].peak_activation_bytes == 2 * 6000);
  }
  SECTION("an eager stage beside a graphed one holds its activations only") {
    StageCost eager = StageOfThousand();
    CostModel costs = CostModel::FromStages({c, eager}, {});
    const SimResult r = Simulate(Lower(GenerateGPipe(2, 2)), costs);
    CHECK(r.per_rank[0].peak_activation_bytes == 2 * 6000);
    CHECK(r.per_rank[1].peak_activation_bytes == 2 * 1000);
    CHECK(r.per_rank[1].peak_parts.graphs == 0);
  }
}

TEST_CASE("graphed stages refuse plans that split B, and recomputation", "[sim]") {
  StageCost c = StageOfThousand();
  c.graph_slot_bytes = 5000;
  CostModel costs = CostModel::Uniform(2, c, {});
  costs.SetOrigin("graphs.json");
  CHECK_THROWS_WITH(Simulate(Lower(Generate("zb-h1", {2, 4, 1})), costs),
                    "graphs.json: its stages ran as CUDA graphs (graph_slot_bytes), which run whole backwards; zb-h1 "
                    "splits B into I and W");
  CHECK_THROWS_WITH(WithRecompute(costs, {1}, {0}),
                    "graphs.json: stage 1 ran as CUDA graphs (graph_slot_bytes), whose slots keep the activations: it "
                    "is not recomputed");
  CHECK_THROWS_WITH(
      CostModel::FromJson(
          R"({"format": "pplab.cost", "version": 1, "stages": [{"forward_ms": 1, "backward_ms": 2, "graph_slot_bytes": 10,
                              "recomputed_bytes": 5}]})",
          "g.json"),
      Catch::Contains("graph_slot_bytes and recomputed_bytes: a stage that runs as CUDA graphs is not recomputed"));
  // The field round-trips, and a stage without it stays eager.
  CostModel two = CostModel::FromStages({c, StageOfThousand()}, {});
  const CostModel back = CostModel::FromJson(two.ToJson(), "back");
  CHECK(back.Stage(0).graph_slot_bytes == 5000);
  CHECK_FALSE(back.Stage(1).graph_slot_bytes.has_value());
  CHECK(back.Graphed());
  CHECK_FALSE(CostModel::Uniform(1, StageOfThousand(), {}).Graphed());
}

}  // namespace pplab::simulator_memory_test
