#include "sim/cost_model.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "schedules/error.h"

namespace pplab::cost_model_test {

TEST_CASE("cost model JSON round-trips", "[cost_model]") {
  const std::string text = R"({
    "format": "pplab.cost", "version": 1,
    "default": {"forward_ms": 1.5, "backward_ms": 3.0, "activation_bytes": 1000, "message_bytes": 64},
    "stages": [{}, {"forward_ms": 2.25, "backward_input_ms": 2.0, "backward_weight_ms": 1.5}],
    "link": {"latency_ms": 0.01, "bandwidth_gbps": 10},
    "links": [{"from": 0, "to": 1, "latency_ms": 0.5}],
    "meta": {"model": "tiny"}
  })";
  const CostModel m = CostModel::FromJson(text, "c.json");
  const CostModel back = CostModel::FromJson(m.ToJson(), "again.json");
  for (const CostModel* c : {&m, &back}) {
    CHECK(c->NumStages() == 2);
    CHECK(c->ComputeTime({ActionKind::kForward, 0, 0}) == 1500000);
    CHECK(c->ComputeTime({ActionKind::kForward, 1, 0}) == 2250000);
    CHECK(c->Stage(1).activation_bytes == 1000);
    CHECK(c->TransferTime(0, 1, 1000) == 500000 + 100);  // override: latency, bandwidth inherited
    CHECK(c->TransferTime(1, 0, 1000) == 10000 + 100);   // 1000 B at 10 B/ns
    CHECK(c->meta_json == R"({"model":"tiny"})");
  }
}

TEST_CASE("B costs I + W when only the split is given, and I = B - W otherwise", "[cost_model]") {
  StageCost split;
  split.forward = 10;
  split.backward_input = 7;
  split.backward_weight = 5;
  const CostModel a = CostModel::Uniform(1, split, Link{});
  CHECK(a.ComputeTime({ActionKind::kBackward, 0, 0}) == 12);
  StageCost full;
  full.forward = 10;
  full.backward = 20;
  full.backward_weight = 8;
  const CostModel b = CostModel::Uniform(1, full, Link{});
  CHECK(b.ComputeTime({ActionKind::kBackwardInput, 0, 0}) == 12);
  CHECK(b.ComputeTime({ActionKind::kBackwardWeight, 0, 0}) == 8);
  full.backward_weight.reset();
  full.backward = 21;
  const CostModel c = CostModel::Uniform(1, full, Link{});
  // Only B: split in halves that still add up to B.
  CHECK(c.ComputeTime({ActionKind::kBackwardInput, 0, 0}) + c.ComputeTime({ActionKind::kBackwardWeight, 0, 0}) == 21);
}

TEST_CASE("bad cost files are rejected naming the field", "[cost_model]") {
  auto load = [](const std::string& body) {
    return CostModel::FromJson(R"({"format": "pplab.cost", "version": 1, )" + body + "}", "c.json");
  };
  CHECK_THROWS_WITH(load(R"("num_stages": 2, "default": {"forward_ms": -1, "backward_ms": 1})"),
                    Catch::Contains("c.json: default.forward_ms must be finite and >= 0"));
  CHECK_THROWS_WITH(load(R"("stages": [{"forward_ms": 1}])"), Catch::Contains("stages[0] has neither backward_ms"));
  // Without 'stages' every stage is 'default', named as such.
  CHECK_THROWS_WITH(load(R"("num_stages": 2, "default": {"forward_ms": 1})"),
                    "c.json: default has neither backward_ms nor backward_input_ms");
  CHECK_THROWS_WITH(load(R"("num_stages": 2, "default": {"backward_ms": 1})"), "c.json: default has no forward_ms");
  CHECK_THROWS_WITH(load(R"("stages": [{"forward_ms": 1, "backward_ms": "x"}])"),
                    Catch::Contains("stages[0].backward_ms must be a number"));
  CHECK_THROWS_WITH(load(R"("stages": [{"forwrd_ms": 1}])"), Catch::Contains("unknown field 'forwrd_ms'"));
  CHECK_THROWS_WITH(load(R"("default": {"forward_ms": 1, "backward_ms": 1})"), Catch::Contains("num_stages"));
  CHECK_THROWS_WITH(load(R"("num_stages": 1, "default": {"forward_ms": 1, "backward_ms": 1}, "links": [{"to": 1}])"),
                    Catch::Contains("links[0] needs integer 'from' and 'to'"));
  CHECK_THROWS_WITH(CostModel::FromJson("{", "c.json"), Catch::Contains("c.json: not valid JSON"));
  // W is a part of B: without I, I = B - W may not fall below 0 (--w-time's rule).
  CHECK_THROWS_WITH(load(R"("num_stages": 2, "default": {"forward_ms": 1, "backward_ms": 2, "backward_weight_ms": 5})"),
                    Catch::Contains("c.json: default: backward_weight_ms 5.0 exceeds backward_ms 2.0"));
  CHECK_THROWS_WITH(
      load(R"("default": {"forward_ms": 1, "backward_ms": 2}, "stages": [{}, {"backward_weight_ms": 5}])"),
      Catch::Contains("c.json: stages[1]: backward_weight_ms 5.0 exceeds backward_ms 2.0"));
  CHECK_NOTHROW(load(R"("num_stages": 1, "default": {"forward_ms": 1, "backward_ms": 2, "backward_input_ms": 1,
                        "backward_weight_ms": 2.5})"));  // timed apart: I + W may pass B
  // A link given twice would count only its last entry; a rank has no link to itself.
  const std::string defaults = R"("num_stages": 2, "default": {"forward_ms": 1, "backward_ms": 2}, )";
  CHECK_THROWS_WITH(load(defaults + R"("links": [{"from": 0, "to": 1, "bandwidth_gbps": 1},
                                                  {"from": 0, "to": 1, "bandwidth_gbps": 100}])"),
                    Catch::Contains("c.json: links[1] gives the link from rank 0 to rank 1 a second time"));
  CHECK_THROWS_WITH(load(defaults + R"("links": [{"from": 1, "to": 1}])"),
                    Catch::Contains("c.json: links[0] links rank 1 to itself"));
  CHECK_NOTHROW(load(defaults + R"("links": [{"from": 0, "to": 1}, {"from": 1, "to": 0}])"));
  const CostModel two = load(R"("num_stages": 2, "default": {"forward_ms": 1, "backward_ms": 1})");
  CHECK_THROWS_WITH(two.CheckStages(4, "zb-v"),
                    Catch::Contains("c.json: cost model has 2 stages but schedule 'zb-v' has 4"));
  CHECK_THROWS_WITH(load(R"("num_stages": 100000000, "default": {"forward_ms": 1, "backward_ms": 1})"),
                    Catch::Contains("'num_stages' in [1, 1048576]"));
  CHECK_THROWS_WITH(load(R"("num_stages": 1, "default": {"forward_ms": 1e300, "backward_ms": 1})"),
                    Catch::Contains("default.forward_ms must be at most"));
  CHECK_THROWS_WITH(
      load(R"("num_stages": 1, "default": {"forward_ms": 1, "backward_ms": 1, "activation_bytes": 1e19})"),
      Catch::Contains("default.activation_bytes must be at most"));
  CHECK_THROWS_WITH(
      load(R"("num_stages": 1, "default": {"forward_ms": 1, "backward_ms": 1}, "link": {"bandwidth_gbps": 1e-300})"),
      Catch::Contains("bandwidth_gbps must be 0 (infinite) or at least"));
  CHECK_THROWS_WITH(CostModel::FromJson(R"({"format": 5, "version": 1})", "c.json"), Catch::Contains("c.json: "));
  const CostModel only_split = load(R"("num_stages": 1, "default": {"forward_ms": 1, "backward_input_ms": 1})");
  CHECK_THROWS_WITH(only_split.ComputeTime({ActionKind::kBackward, 0, 0}),
                    Catch::Contains("c.json: stage 0 has no backward_weight_ms, which 0B0 needs"));
}

}  // namespace pplab::cost_model_test

namespace pplab::cost_model_test {
namespace {

// A cost file as `pplab profile` writes it: tiny model, 2 stages of 2 layers.
std::string ProfiledCost(const std::string& meta_overrides = "") {
  return R"({"format": "pplab.cost", "version": 1,
    "stages": [{"forward_ms": 1.0, "backward_ms": 2.0, "activation_bytes": 4096, "message_bytes": 1024},
               {"forward_ms": 1.5, "backward_ms": 3.0, "activation_bytes": 8192, "message_bytes": 1024}],
    "link": {"latency_ms": 0.01, "bandwidth_gbps": 1},
    "meta": {"source": "pplab profile", "model": "tiny",
             "config": {"vocab_size": 256, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 4,
                        "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 128,
                        "rope_theta": 10000.0, "rms_norm_eps": 1e-05},
             "partition": "2,2", "microbatch_size": 2, "seq_len": 32, "device": "cpu",
             "threads_per_rank": 1, "ranks": 2)" +
         meta_overrides + "}}";
}

}  // namespace

TEST_CASE("a profiled cost file round-trips with its meta and typed profile", "[cost_model]") {
  const CostModel m = CostModel::FromJson(ProfiledCost(), "cost.json");
  const CostModel back = CostModel::FromJson(m.ToJson(), "again.json");
  CHECK(back.ToJson() == m.ToJson());
  CHECK(back.meta_json == m.meta_json);
  for (const CostModel* c : {&m, &back}) {
    const std::optional<ProfileMeta> p = c->Profile();
    REQUIRE(p);
    CHECK(p->model == "tiny");
    CHECK(p->partition == "2,2");
    CHECK(p->microbatch_size == 2);
    CHECK(p->seq_len == 32);
    CHECK(p->device == "cpu");
    CHECK(p->threads_per_rank == 1);
    CHECK(p->ranks == 2);
    CHECK(p->precision == Precision::kFp32);  // no "precision": written before it was recorded, fp32
    CHECK(p->attention == "explicit");        // no "attention": likewise, the explicit path
    CHECK(nlohmann::json::parse(p->config_json)["hidden_size"] == 32);
    CHECK(c->ComputeTime({ActionKind::kForward, 1, 0}) == 1500000);
    CHECK(c->Stage(1).activation_bytes == 8192);
  }
  // The writer's form parses back to the same profile.
  const ProfileMeta p = *m.Profile();
  const std::optional<ProfileMeta> again = ParseProfileMeta(ProfileMetaToJson(p), 2, "x");
  REQUIRE(again);
  CHECK(again->config_json == p.config_json);
  CHECK(again->partition == p.partition);
  CHECK(again->precision == Precision::kFp32);
  // A bf16 profile says so, and its activations take 2 bytes per element.
  nlohmann::json bf16 = nlohmann::json::parse(ProfiledCost());
  bf16["meta"]["precision"] = "bf16";
  const std::optional<ProfileMeta> half = CostModel::FromJson(bf16.dump(), "bf16.json").Profile();
  REQUIRE(half);
  CHECK(half->precision == Precision::kBf16);
  CHECK(ActivationElementBytes(half->precision) == 2);
  CHECK(nlohmann::json::parse(ProfileMetaToJson(*half))["precision"] == "bf16");
  // A profile that ran fused attention says so, and round-trips.
  nlohmann::json fused = nlohmann::json::parse(ProfiledCost());
  fused["meta"]["attention"] = "sdpa";
  const std::optional<ProfileMeta> sdpa = CostModel::FromJson(fused.dump(), "sdpa.json").Profile();
  REQUIRE(sdpa);
  CHECK(sdpa->attention == "sdpa");
  CHECK(ParseProfileMeta(ProfileMetaToJson(*sdpa), 2, "x")->attention == "sdpa");
  // No "tensor_parallel": whole layers (T = 1); a tensor-parallel one round-trips.
  CHECK(m.Profile()->tensor_parallel == 1);
  CHECK_FALSE(m.Profile()->sequence_parallel);
  nlohmann::json split = nlohmann::json::parse(ProfiledCost());
  split["meta"]["tensor_parallel"] = 2;
  split["meta"]["sequence_parallel"] = true;
  const std::optional<ProfileMeta> tp = CostModel::FromJson(split.dump(), "tp.json").Profile();
  REQUIRE(tp);
  CHECK(tp->tensor_parallel == 2);
  CHECK(tp->sequence_parallel);
  const std::optional<ProfileMeta> tp_again = ParseProfileMeta(ProfileMetaToJson(*tp), 2, "x");
  CHECK(tp_again->tensor_parallel == 2);
  CHECK(tp_again->sequence_parallel);
  // No "shared_device": none shared; "together" round-trips.
  CHECK(m.Profile()->shared_device == "none");
  CHECK_FALSE(nlohmann::json::parse(ProfileMetaToJson(p)).contains("shared_device"));
  nlohmann::json together = nlohmann::json::parse(ProfiledCost());
  together["meta"]["shared_device"] = "together";
  const std::optional<ProfileMeta> at_once = CostModel::FromJson(together.dump(), "together.json").Profile();
  REQUIRE(at_once);
  CHECK(at_once->shared_device == "together");
  CHECK(ParseProfileMeta(ProfileMetaToJson(*at_once), 2, "x")->shared_device == "together");
  // Other sources stay free-form.
  CostModel other = m;
  other.meta_json = R"({"source": "measured", "anything": [1, 2]})";
  CHECK_FALSE(other.Profile());
}

TEST_CASE("a bad profile meta is refused naming the field", "[cost_model]") {
  const std::pair<std::string, std::string> cases[] = {
      {R"(, "microbatch_size": 0)", "cost.json: meta.microbatch_size must be a positive integer"},
      {R"(, "seq_len": "32")", "cost.json: meta.seq_len must be a positive integer"},
      {R"(, "partition": "2,x")", "cost.json: meta.partition must be layers per stage"},
      {R"(, "partition": "1,1,2")", "meta.partition \"1,1,2\" has 3 stages but the file has 2"},
      {R"(, "config": "tiny")", "cost.json: meta.config must be an object"},
      {R"(, "device": "")", "cost.json: meta.device must be a non-empty string"},
      {R"(, "ranks": 3)", "meta.ranks 3 does not divide the file's 2 stages"},
      {R"(, "steps": 3)", "unknown field 'steps'"},
      {R"(, "precision": "fp16")", "cost.json: meta.precision 'fp16': expected fp32 or bf16"},
      {R"(, "precision": 16)", "cost.json: meta.precision must be \"fp32\" or \"bf16\", got 16"},
      {R"(, "attention": "auto")", "cost.json: meta.attention must be \"sdpa\" or \"explicit\", got \"auto\""},
      {R"(, "tensor_parallel": 0)", "cost.json: meta.tensor_parallel must be a positive integer, got 0"},
      {R"(, "sequence_parallel": 1)", "cost.json: meta.sequence_parallel must be true or false, got 1"},
      {R"(, "sequence_parallel": true)", "meta.sequence_parallel is true but tensor_parallel is 1"},
      {R"(, "shared_device": "alone")",
       "cost.json: meta.shared_device must be \"none\", \"turns\" or \"together\", got \"alone\""},
  };
  for (const auto& [overrides, says] : cases) {
    INFO(overrides);
    nlohmann::json doc = nlohmann::json::parse(ProfiledCost());
    doc["meta"].update(nlohmann::json::parse("{" + overrides.substr(1) + "}"));
    CHECK_THROWS_WITH(CostModel::FromJson(doc.dump(), "cost.json"), Catch::Contains(says));
  }
  std::string missing = ProfiledCost();
  missing.replace(missing.find(R"("seq_len": 32, )"), std::string(R"("seq_len": 32, )").size(), "");
  CHECK_THROWS_WITH(CostModel::FromJson(missing, "cost.json"), Catch::Contains("cost.json: meta.seq_len is missing"));
}

}  // namespace pplab::cost_model_test

namespace pplab::cost_model_test {

TEST_CASE("cost model devices: one id per rank, round-trips, bad entries named", "[cost_model][devices]") {
  const std::string head = R"({"format": "pplab.cost", "version": 1, "default": {"forward_ms": 1, "backward_ms": 2},
    "num_stages": 2, )";
  const CostModel m = CostModel::FromJson(head + R"("devices": [0, 0]})", "d.json");
  CHECK(m.Devices() == std::vector<int>{0, 0});
  CHECK(CostModel::FromJson(m.ToJson(), "again.json").Devices() == std::vector<int>{0, 0});
  CHECK(CostModel::FromJson(head + R"("link": {}})", "none.json").Devices().empty());
  CHECK_THROWS_WITH(CostModel::FromJson(head + R"("devices": [0, -1]})", "bad.json"),
                    Catch::Contains("bad.json: devices[1] must be an integer device id"));
  CHECK_THROWS_WITH(CostModel::FromJson(head + R"("devices": []})", "empty.json"),
                    Catch::Contains("empty.json: devices must be a non-empty array"));
  CHECK_THROWS_WITH(m.CheckDevices(3, "p"), Catch::Contains("field 'devices' names 2 ranks but schedule 'p' has 3"));
  CHECK_NOTHROW(m.CheckDevices(2, "p"));
}

}  // namespace pplab::cost_model_test

namespace pplab::cost_model_test {

TEST_CASE("cost model step: optional per-step costs in ms, round-trip, unknown fields named", "[cost_model][step]") {
  const std::string head = R"({"format": "pplab.cost", "version": 1, "default": {"forward_ms": 1, "backward_ms": 2},
    "num_stages": 2, )";
  const CostModel m = CostModel::FromJson(
      head + R"("step": {"optimizer_ms": 1.5, "clip_ms": 0.25, "loss_allreduce_ms": 0.1, "norm_allreduce_ms": 0.2}})",
      "s.json");
  for (const CostModel& c : {m, CostModel::FromJson(m.ToJson(), "again.json")}) {
    CHECK(c.Step().optimizer == 1500000);
    CHECK(c.Step().clip == 250000);
    CHECK(c.Step().loss_allreduce == 100000);
    CHECK(c.Step().norm_allreduce == 200000);
  }
  CHECK(CostModel::FromJson(head + R"("step": {}})", "e.json").Step().optimizer == 0);
  CHECK_THROWS_WITH(CostModel::FromJson(head + R"("step": {"adam_ms": 1}})", "bad.json"),
                    Catch::Contains("bad.json: step: unknown field 'adam_ms'"));
  CHECK_THROWS_WITH(CostModel::FromJson(head + R"("step": {"clip_ms": -1}})", "neg.json"),
                    Catch::Contains("neg.json: step.clip_ms must be finite and >= 0"));
}

}  // namespace pplab::cost_model_test

namespace pplab::cost_model_test {

TEST_CASE("cost model spread: p10, median and p90 are the 10th, 50th and 90th percentiles of the draws",
          "[cost_model][samples]") {
  const std::string head = R"({"format": "pplab.cost", "version": 1, "num_stages": 1, "default": )";
  const CostModel m = CostModel::FromJson(
      head + R"({"forward_ms": 1, "forward_p10_ms": 0.8, "forward_p90_ms": 1.4, "backward_ms": 2}})", "s.json");
  const Action f{ActionKind::kForward, 0, 0};
  CHECK(m.SampleComputeTime(f, 0.1) == 800000);
  CHECK(m.SampleComputeTime(f, 0.5) == 1000000);
  CHECK(m.SampleComputeTime(f, 0.9) == 1400000);
  CHECK(m.SampleComputeTime(f, 0.0) == 750000);   // 1 - 1.25 * 0.2
  CHECK(m.SampleComputeTime(f, 1.0) == 1500000);  // 1 + 1.25 * 0.4
  CHECK(m.SampleComputeTime(f, 0.3) == 900000);   // halfway between p10 and the median
  // No spread for B: every draw is the model's time.
  CHECK(m.SampleComputeTime({ActionKind::kBackward, 0, 0}, 0.99) == 2000000);
  CHECK(CostModel::FromJson(m.ToJson(), "again.json").SampleComputeTime(f, 0.9) == 1400000);
  // A wide low side is cut at 0.
  const CostModel wide = CostModel::FromJson(
      head + R"({"forward_ms": 1, "forward_p10_ms": 0.1, "forward_p90_ms": 1, "backward_ms": 2}})", "w.json");
  CHECK(wide.SampleComputeTime(f, 0.0) == 0);
  CHECK_THROWS_WITH(
      CostModel::FromJson(head + R"({"forward_ms": 1, "forward_p10_ms": 0.8, "backward_ms": 2}})", "half.json"),
      Catch::Contains("half.json: default: give both forward_p10_ms and forward_p90_ms"));
  // A median outside its spread is refused when the file loads.
  CHECK_THROWS_WITH(
      CostModel::FromJson(
          head + R"({"forward_ms": 2, "forward_p10_ms": 0.8, "forward_p90_ms": 1.4, "backward_ms": 2}})", "o.json"),
      Catch::Contains("o.json: default: forward_p10_ms <= forward_ms <= forward_p90_ms must hold, got 0.8, 2.0, 1.4"));
  // One whose median is derived (I = B / 2 here) is checked when drawn.
  const CostModel derived = CostModel::FromJson(
      head + R"({"forward_ms": 1, "backward_ms": 2, "backward_input_p10_ms": 1.5, "backward_input_p90_ms": 2}})",
      "i.json");
  CHECK_THROWS_WITH(
      derived.SampleComputeTime({ActionKind::kBackwardInput, 0, 0}, 0.5),
      Catch::Contains("i.json: stage 0: backward_input_p10_ms <= the backward_input time <= backward_input_p90_ms"));
}

TEST_CASE("cost model spread: a B's spread is shared by the I and W made from it, and I and W's add up to B's",
          "[cost_model][samples]") {
  const std::string head = R"({"format": "pplab.cost", "version": 1, "num_stages": 1, "default": )";
  // B = 2 ms in [1, 4]: I = W = 1 ms each, half of it, in [0.5, 2].
  const CostModel b = CostModel::FromJson(
      head + R"({"forward_ms": 1, "backward_ms": 2, "backward_p10_ms": 1, "backward_p90_ms": 4}})", "b.json");
  for (const ActionKind kind : {ActionKind::kBackwardInput, ActionKind::kBackwardWeight}) {
    const std::optional<Spread> sp = b.SpreadOf({kind, 0, 0});
    REQUIRE(sp);
    CHECK(sp->p10 == 500000);
    CHECK(sp->p90 == 2000000);
    CHECK(b.SampleComputeTime({kind, 0, 0}, 1.0) == 2250000);  // 1 + 1.25 x (2 - 1) ms
  }
  // With I given (0.5 ms), W is the rest (1.5 ms): three quarters of B's spread.
  const CostModel parts =
      CostModel::FromJson(head + R"({"forward_ms": 1, "backward_ms": 2, "backward_p10_ms": 1, "backward_p90_ms": 4,
                 "backward_input_ms": 0.5}})",
                          "p.json");
  CHECK(parts.SpreadOf({ActionKind::kBackwardWeight, 0, 0})->p10 == 750000);
  CHECK(parts.SpreadOf({ActionKind::kBackwardWeight, 0, 0})->p90 == 3000000);
  // A B made of I and W with spreads: theirs added.
  const CostModel split = CostModel::FromJson(
      head + R"({"forward_ms": 1, "backward_input_ms": 1, "backward_input_p10_ms": 0.5, "backward_input_p90_ms": 2,
                 "backward_weight_ms": 1, "backward_weight_p10_ms": 0.75, "backward_weight_p90_ms": 1.5}})",
      "s.json");
  CHECK(split.SpreadOf({ActionKind::kBackward, 0, 0})->p10 == 1250000);
  CHECK(split.SpreadOf({ActionKind::kBackward, 0, 0})->p90 == 3500000);
}

TEST_CASE("cost model spread: an old file without spreads loads with zero spread", "[cost_model][samples]") {
  const CostModel old = CostModel::FromJson(R"({"format": "pplab.cost", "version": 1, "num_stages": 2,
    "default": {"forward_ms": 1, "backward_ms": 2},
    "step": {"optimizer_ms": 1, "clip_ms": 0.5, "loss_allreduce_ms": 0, "norm_allreduce_ms": 0}})",
                                            "old.json");
  CHECK_FALSE(old.HasSpread());
  for (const Action& a : {Action{ActionKind::kForward, 0, 0}, Action{ActionKind::kBackward, 1, 0}}) {
    CHECK_FALSE(old.SpreadOf(a));
    for (double u : {0.0, 0.1, 0.5, 0.9, 1.0}) CHECK(old.SampleComputeTime(a, u) == old.ComputeTime(a));
  }
  CHECK_FALSE(old.Step().optimizer_spread);
  // Its round trip writes no spread fields.
  const std::string back = old.ToJson();
  CHECK(back.find("p10") == std::string::npos);
  CHECK(back.find("p90") == std::string::npos);
}

TEST_CASE("cost model spread: per-step and REDUCE_GRAD spreads round-trip, bad ones named by file and field",
          "[cost_model][samples][step]") {
  const std::string head = R"({"format": "pplab.cost", "version": 1, "num_stages": 1, "default": )";
  const CostModel m = CostModel::FromJson(head + R"({"forward_ms": 1, "backward_ms": 2, "reduce_grad_ms": 0.5,
      "reduce_grad_p10_ms": 0.4, "reduce_grad_p90_ms": 0.75},
    "data_parallel": {"degree": 2},
    "step": {"optimizer_ms": 1.5, "optimizer_p10_ms": 1.25, "optimizer_p90_ms": 2, "clip_ms": 0.25,
             "clip_p10_ms": 0.25, "clip_p90_ms": 0.25, "loss_allreduce_ms": 0.1, "norm_allreduce_ms": 0.2,
             "norm_allreduce_p10_ms": 0.15, "norm_allreduce_p90_ms": 0.3}})",
                                          "s.json");
  const Action reduce{ActionKind::kReduceGrad, 0, 0};
  for (const CostModel& c : {m, CostModel::FromJson(m.ToJson(), "again.json")}) {
    CHECK(c.HasSpread());
    CHECK(c.Stage(0).reduce_grad == TimeNs{500000});
    CHECK(c.CollectiveTime(reduce) == 500000);
    REQUIRE(c.SpreadOf(reduce));
    CHECK(c.SpreadOf(reduce)->p10 == 400000);
    CHECK(c.SampleCollectiveTime(reduce, 0.9) == 750000);
    REQUIRE(c.Step().optimizer_spread);
    CHECK(c.Step().optimizer_spread->p10 == 1250000);
    CHECK(c.Step().optimizer_spread->p90 == 2000000);
    CHECK(c.Step().clip_spread->p90 == 250000);
    CHECK(c.Step().norm_allreduce_spread->p10 == 150000);
    CHECK_FALSE(c.Step().loss_allreduce_spread);
  }
  auto refused = [&](const std::string& body, const std::string& message) {
    INFO(body);
    CHECK_THROWS_WITH(CostModel::FromJson(head + body, "bad.json"), Catch::Contains(message));
  };
  const std::string fb = R"("forward_ms": 1, "backward_ms": 2)";
  refused("{" + fb + R"(, "forward_p10_ms": "fast", "forward_p90_ms": 1}})",
          "bad.json: default.forward_p10_ms must be a number");
  refused("{" + fb + R"(, "forward_p10_ms": -0.1, "forward_p90_ms": 1}})",
          "bad.json: default.forward_p10_ms must be finite and >= 0, got -0.1");
  refused("{" + fb + R"(, "forward_p10_ms": 1.2, "forward_p90_ms": 0.9}})",
          "bad.json: default.forward_p10_ms must not exceed forward_p90_ms, got 1.2 > 0.9");
  refused("{" + fb + R"(}, "step": {"optimizer_ms": 1, "optimizer_p10_ms": 2, "optimizer_p90_ms": 1}})",
          "bad.json: step.optimizer_p10_ms must not exceed optimizer_p90_ms");
  refused("{" + fb + R"(}, "step": {"optimizer_ms": 1, "optimizer_p90_ms": 1.5}})",
          "bad.json: step: give both optimizer_p10_ms and optimizer_p90_ms");
  refused("{" + fb + R"(}, "step": {"clip_ms": 1, "clip_p10_ms": 1.5, "clip_p90_ms": 2}})",
          "bad.json: step: clip_p10_ms <= clip_ms <= clip_p90_ms must hold");
  refused("{" + fb + R"(}, "step": {"clip_ms": 1, "clip_p10_ms": [1], "clip_p90_ms": 2}})",
          "bad.json: step.clip_p10_ms must be a number");
  refused("{" + fb + R"(, "reduce_grad_ms": 1, "reduce_grad_p10_ms": 0.5, "reduce_grad_p90_ms": 0.8}})",
          "bad.json: default: reduce_grad_p10_ms <= reduce_grad_ms <= reduce_grad_p90_ms must hold");
}

TEST_CASE("cost model device_slots: one count per device id, round-trips, bad entries named", "[cost_model][devices]") {
  const std::string head = R"({"format": "pplab.cost", "version": 1, "default": {"forward_ms": 1, "backward_ms": 2},
    "num_stages": 2, "devices": [0, 0], )";
  const CostModel m = CostModel::FromJson(head + R"("device_slots": [2]})", "d.json");
  CHECK(m.DeviceSlots() == std::vector<int>{2});
  CHECK(CostModel::FromJson(m.ToJson(), "again.json").DeviceSlots() == std::vector<int>{2});
  CHECK_NOTHROW(m.CheckDevices(2, "p"));
  CHECK_THROWS_WITH(CostModel::FromJson(head + R"("device_slots": [0]})", "zero.json"),
                    Catch::Contains("zero.json: device_slots[0] must be an integer in [1, 2^20], got 0"));
  CHECK_THROWS_WITH(CostModel::FromJson(head + R"("device_slots": "2"})", "text.json"),
                    Catch::Contains("text.json: device_slots must be a non-empty array"));
  CostModel moved = m;
  moved.SetDevices({0, 3});
  CHECK_THROWS_WITH(moved.CheckDevices(2, "p"),
                    Catch::Contains("field 'device_slots' has 1 entries, but rank 1 is on device 3"));
}

TEST_CASE("cost model: a link or a device slot the plan cannot use is refused when it is simulated",
          "[cost_model][devices]") {
  const std::string head = R"({"format": "pplab.cost", "version": 1, "default": {"forward_ms": 1, "backward_ms": 2},
    "num_stages": 2, )";
  const CostModel link = CostModel::FromJson(head + R"("links": [{"from": 0, "to": 5, "latency_ms": 0.5}]})", "l.json");
  CHECK_THROWS_WITH(link.CheckDevices(2, "1f1b"),
                    "l.json: field 'links' links rank 0 to rank 5, but schedule '1f1b' "
                    "has ranks 0 to 1");
  CHECK_NOTHROW(link.CheckDevices(6, "1f1b"));
  const CostModel slots = CostModel::FromJson(head + R"("devices": [0, 0], "device_slots": [1, 5]})", "s.json");
  CHECK_THROWS_WITH(slots.CheckDevices(2, "1f1b"),
                    "s.json: field 'device_slots' has 2 entries, but 'devices' names devices 0 to 0 (give one entry "
                    "per device id)");
  // Without 'devices' each rank is its own device: more slots serve plans of more ranks.
  CHECK_NOTHROW(CostModel::FromJson(head + R"("device_slots": [1, 1, 1]})", "r.json").CheckDevices(2, "1f1b"));
}

}  // namespace pplab::cost_model_test
