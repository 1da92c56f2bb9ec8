#include "runtime/train/adamw.h"

#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <memory>

#include "tests/runtime/train/adamw_reference.h"

namespace pplab::adamw_test {

TEST_CASE("AdamW by name makes the updates of torch::optim::AdamW", "[adamw]") {
  torch::manual_seed(3);
  const auto w0 = torch::randn({4, 5}), b0 = torch::randn({5});
  auto w1 = w0.clone().requires_grad_(true), b1 = b0.clone().requires_grad_(true);
  auto w2 = w0.clone().requires_grad_(true), b2 = b0.clone().requires_grad_(true);
  AdamW mine({{"w", w1}, {"b", b1}}, {});
  torch::optim::AdamW theirs({w2, b2}, torch::optim::AdamWOptions(1e-2).betas({0.9, 0.99}).eps(1e-8).weight_decay(0.1));
  for (int step = 0; step < 4; ++step) {
    const auto x = torch::randn({3, 4});
    mine.ZeroGrad();
    theirs.zero_grad();
    torch::tanh(x.matmul(w1) + b1).pow(2).sum().backward();
    torch::tanh(x.matmul(w2) + b2).pow(2).sum().backward();
    mine.Step(1e-2);
    theirs.step();
    INFO("step " << step);
    CHECK(torch::allclose(w1, w2, 1e-6, 1e-7));
    CHECK(torch::allclose(b1, b2, 1e-6, 1e-7));
  }
  CHECK(mine.State().at("w").step == 4);
}

}  // namespace pplab::adamw_test

namespace pplab::adamw_test {

TEST_CASE("foreach AdamW equals the per-parameter update, also with mixed step counts", "[adamw]") {
  torch::manual_seed(5);
  const AdamWConfig config;
  auto a = torch::randn({6, 3}).requires_grad_(true), b = torch::randn({7}).requires_grad_(true);
  auto a_ref = a.detach().clone(), b_ref = b.detach().clone();
  AdamW mine({{"a", a}, {"b", b}}, config);
  // "a" resumes at step 3 with moments from a checkpoint; "b" starts fresh.
  AdamWState a_state{torch::rand({6, 3}) * 1e-2, torch::rand({6, 3}) * 1e-4, 3};
  mine.State()["a"] = {a_state.exp_avg.clone(), a_state.exp_avg_sq.clone(), 3};
  AdamWState b_state{torch::zeros({7}), torch::zeros({7}), 0};
  for (int step = 0; step < 3; ++step) {
    const at::Tensor ga = torch::randn({6, 3}), gb = torch::randn({7});
    a.mutable_grad() = ga.clone();
    b.mutable_grad() = gb.clone();
    a_ref.mutable_grad() = ga.clone();
    b_ref.mutable_grad() = gb.clone();
    mine.Step(1e-2);
    ReferenceAdamWStep(a_ref, a_state, 1e-2, config);
    ReferenceAdamWStep(b_ref, b_state, 1e-2, config);
    INFO("step " << step);
    CHECK((a.detach() - a_ref).abs().max().item<double>() <= 1e-6);
    CHECK((b.detach() - b_ref).abs().max().item<double>() <= 1e-6);
  }
  CHECK(mine.State().at("a").step == 6);
  CHECK(mine.State().at("b").step == 3);
}

}  // namespace pplab::adamw_test

namespace pplab::adamw_test {
namespace {

// Parameters of three shapes (320 elements; with 3 replicas the shares are
// [0, 128), [128, 256), [256, 320), so both boundaries fall inside a
// parameter), in a flat buffer, with fixed values.
struct FlatModel {
  at::Tensor a = (torch::arange(200, torch::kFloat32).reshape({10, 20}) * 0.01).requires_grad_(true);
  at::Tensor b = (torch::arange(50, torch::kFloat32) * 0.5).requires_grad_(true);
  at::Tensor c = torch::full({70}, -0.25).requires_grad_(true);
  std::vector<std::pair<std::string, at::Tensor>> Named() { return {{"a", a}, {"b", b}, {"c", c}}; }
};

// One unsharded AdamW over a FlatModel (the reference) and `count` sharded
// ones over replicas of it, stepped together as the trainer steps them.
struct ShardedReplicas {
  explicit ShardedReplicas(int count) : replicas(count) {
    reference = std::make_unique<AdamW>(whole.Named(), AdamWConfig{}, std::vector<FlatBuffer>{whole_flat});
    for (int d = 0; d < count; ++d) {
      flats.push_back(FlattenParameters(replicas[d].Named()));
      sharded.push_back(std::make_unique<AdamW>(replicas[d].Named(), AdamWConfig{}, std::vector<FlatBuffer>{flats[d]},
                                                OptimizerShard{d, count}));
    }
  }
  // One step of every optimizer with the same gradients (320). Each replica
  // keeps its share of the parameters and takes the others' (what the
  // trainer's sum does); returns whether they equal the reference's.
  bool Step(const at::Tensor& grads) {
    const int count = static_cast<int>(sharded.size());
    reference->ZeroGrad();
    whole_flat.grads.copy_(grads);
    reference->Step(1e-2);
    at::Tensor together = torch::zeros({320});
    for (int d = 0; d < count; ++d) {
      sharded[d]->ZeroGrad();
      flats[d].grads.copy_(grads);
      sharded[d]->Step(1e-2);
      const auto [begin, end] = ShardRange(320, {d, count});
      together.narrow(0, begin, end - begin).copy_(flats[d].values.narrow(0, begin, end - begin));
    }
    for (int d = 0; d < count; ++d) flats[d].values.copy_(together);
    return torch::equal(together, whole_flat.values);
  }

  FlatModel whole;
  FlatBuffer whole_flat = FlattenParameters(whole.Named());
  std::unique_ptr<AdamW> reference;
  std::vector<FlatModel> replicas;
  std::vector<FlatBuffer> flats;
  std::vector<std::unique_ptr<AdamW>> sharded;
};

}  // namespace

TEST_CASE("shard ranges cover a buffer once, in order, with empty shares past its end", "[adamw][shard]") {
  using R = std::pair<int64_t, int64_t>;
  CHECK(ShardRange(13, {0, 1}) == R{0, 13});
  CHECK(ShardRange(320, {0, 3}) == R{0, 128});  // ceil(320 / 3) = 107, aligned up to 128
  CHECK(ShardRange(320, {1, 3}) == R{128, 256});
  CHECK(ShardRange(320, {2, 3}) == R{256, 320});
  CHECK(ShardRange(1000, {1, 2}) == R{512, 1000});
  CHECK(ShardRange(13, {0, 2}) == R{0, 13});  // a small buffer falls to the first replica
  CHECK(ShardRange(13, {1, 2}) == R{13, 13});
  CHECK(ShardRange(2, {3, 4}) == R{2, 2});
}

TEST_CASE("sharded AdamW: the replicas' shares make the unsharded update bit for bit, checkpoint state included",
          "[adamw][shard]") {
  torch::manual_seed(11);
  constexpr int kReplicas = 3;
  ShardedReplicas r(kReplicas);
  REQUIRE(r.whole_flat.defined());
  AdamW& reference = *r.reference;
  auto& sharded = r.sharded;
  auto& flats = r.flats;
  const FlatBuffer& whole_flat = r.whole_flat;
  // Each keeps its share of the moments: 128, 128 and 64 of 320 floats.
  CHECK(reference.StateBytes() == 2 * 320 * 4);
  CHECK(sharded[0]->StateBytes() == 2 * 128 * 4);
  CHECK(sharded[2]->StateBytes() == 2 * 64 * 4);
  for (int step = 0; step < 4; ++step) {
    INFO("step " << step);
    CHECK(r.Step(torch::randn({320})));
  }
  // The moments put together, as before a checkpoint, equal the reference's.
  for (int d = 0; d < kReplicas; ++d) {
    at::Tensor avg = torch::zeros({320}), avg_sq = torch::zeros({320});
    for (int e = 0; e < kReplicas; ++e) {
      const AdamW::ShardPart part = sharded[e]->ShardParts().at(0);
      avg.narrow(0, part.begin, part.end - part.begin).copy_(part.exp_avg);
      avg_sq.narrow(0, part.begin, part.end - part.begin).copy_(part.exp_avg_sq);
    }
    sharded[d]->SetWholeMoments(0, avg, avg_sq);
    for (const char* name : {"a", "b", "c"}) {
      INFO("replica " << d << " parameter " << name << ": second moments up to "
                      << (sharded[d]->State().at(name).exp_avg_sq - reference.State().at(name).exp_avg_sq)
                             .abs()
                             .max()
                             .item<double>()
                      << " apart");
      CHECK(torch::equal(sharded[d]->State().at(name).exp_avg, reference.State().at(name).exp_avg));
      CHECK(torch::equal(sharded[d]->State().at(name).exp_avg_sq, reference.State().at(name).exp_avg_sq));
      CHECK(sharded[d]->State().at(name).step == 4);
    }
  }
  // A checkpoint's whole moments loaded into a sharded optimizer: the next
  // step keeps the replica's share, drops the rest, and updates as before.
  const at::Tensor grads = torch::randn({320});
  reference.ZeroGrad();
  whole_flat.grads.copy_(grads);
  reference.Step(1e-2);
  for (int d = 0; d < kReplicas; ++d) {
    sharded[d]->ZeroGrad();
    flats[d].grads.copy_(grads);
    sharded[d]->Step(1e-2);
    CHECK_FALSE(sharded[d]->State().at("a").exp_avg.defined());
    const auto [begin, end] = ShardRange(320, {d, kReplicas});
    CHECK(torch::equal(flats[d].values.narrow(0, begin, end - begin), whole_flat.values.narrow(0, begin, end - begin)));
  }
}

}  // namespace pplab::adamw_test

namespace pplab::adamw_test {

TEST_CASE("sharded AdamW with mixed step counts in a buffer updates each parameter's part with its own count",
          "[adamw][shard]") {
  torch::manual_seed(12);
  constexpr int kReplicas = 2;
  // "a" resumes at step 3 with moments from a checkpoint, "b" and "c" fresh.
  const AdamWState a_state{torch::rand({10, 20}) * 1e-2, torch::rand({10, 20}) * 1e-4, 3};
  ShardedReplicas r(kReplicas);
  auto& sharded = r.sharded;
  r.reference->State()["a"] = {a_state.exp_avg.clone(), a_state.exp_avg_sq.clone(), 3};
  for (int d = 0; d < kReplicas; ++d) {
    sharded[d]->State()["a"] = {a_state.exp_avg.clone(), a_state.exp_avg_sq.clone(), 3};
    sharded[d]->KeepShares();  // as after a load: the share kept, the whole dropped
    CHECK_FALSE(sharded[d]->State().at("a").exp_avg.defined());
  }
  for (int step = 0; step < 3; ++step) {
    INFO("step " << step);
    CHECK(r.Step(torch::randn({320})));
  }
  for (int d = 0; d < kReplicas; ++d) {
    CHECK(sharded[d]->State().at("a").step == 6);
    CHECK(sharded[d]->State().at("b").step == 3);
  }
}

}  // namespace pplab::adamw_test
