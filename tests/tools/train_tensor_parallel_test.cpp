// Tensor parallelism through the pplab binary (--tp T; Gloo over loopback):
// the D x T x K grid trains the single-process model, clips by the same
// global norm, and writes checkpoints that resume under any T.
#include <torch/torch.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/train/shard_file.h"
#include "schedules/file_io.h"
#include "tests/run_pplab.h"
#include "tests/tools/grad_files.h"

namespace pplab::train_tensor_parallel_test {
namespace {

std::string Tmp(const std::string& name) {
  const std::string dir = std::string(PPLAB_TEST_TMP_DIR) + "/tp_" + name;
  RemoveTree(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// `pplab train` on synthetic tokens with small settings; `args` come last and win.
PplabRun Train(const std::string& args) {
  return Pplab(
      "train --synthetic --out '' -q --model tiny --batch-size 8 --seq-len 16 --steps 3 -m 4 --warmup-steps 0 "
      "--clip-norm 0 --eval-every 0 --seed 7 " +
      args);
}

nlohmann::json Json(const std::string& args) {
  const PplabRun r = Train(args + " --json");
  INFO(args << "\n" << r.out);
  REQUIRE(r.code == 0);
  return nlohmann::json::parse(r.out.substr(r.out.find('{')));
}

std::vector<double> Numbers(const nlohmann::json& j, const char* key) { return j.at(key).get<std::vector<double>>(); }

// A config with every piece the split must handle: biases on q/k/v, o and
// the MLP, qk_norm's whole weights inside a split region, tied embeddings.
std::string OddConfig() {
  const std::string path = Tmp("config") + "/odd.json";
  WriteTextFile(path,
                R"({"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 4, "num_attention_heads": 4,
                    "num_key_value_heads": 2, "vocab_size": 256, "max_position_embeddings": 64, "qk_norm": true,
                    "attention_bias": true, "mlp_bias": true, "tie_word_embeddings": true})");
  return path;
}

}  // namespace

TEST_CASE("tensor-parallel plans give the single-process gradients", "[train][tp]") {
  struct Model {
    std::string flag;
    int tensors;  // gradient files: every parameter of the model
  };
  // tiny: embedding, 4 layers x 9, norm, head; the odd config: embedding,
  // 4 layers x 18 (9 weights, 7 biases, q_norm, k_norm), norm, tied head.
  for (const Model& model : {Model{"--model tiny", 39}, Model{"--model " + OddConfig(), 75}}) {
    const std::string ref = Tmp("ref"), dir = Tmp("run");
    auto dump = [&](const std::string& args, const std::string& into) {
      const PplabRun r = Train(args + " " + model.flag + " --steps 1 --dump-grads " + into);
      INFO(args << "\n" << r.out);
      REQUIRE(r.code == 0);
    };
    dump("-k 1 -m 1", ref);  // the whole batch in one process
    for (const char* plan :
         {"--tp 2 -k 1 -m 1", "--tp 2 -s 1f1b -k 2 -m 4",
          // B split into I and W: W runs the region's backward again
          "--tp 2 -s zb-h1 -k 2 -m 4", "--tp 2 -s zb-v -k 2 -m 4",
          // the D x T grid: replicas of a share sum their gradients
          "--tp 2 --dp 2 -k 1 -m 2",
          // sequence parallelism: the norms' partial gradients summed, the
          // projections' input gathered again in B and W
          "--tp 2 --sequence-parallel -k 1 -m 1", "--tp 2 --sequence-parallel -s zb-h1 -k 2 -m 4",
          "--tp 2 --sequence-parallel -s zb-v -k 2 -m 4", "--tp 2 --sequence-parallel --dp 2 -k 1 -m 2"}) {
      Tmp("run");
      dump(plan, dir);
      const GradError e = CompareGrads(ref, dir);
      std::printf("tensor-parallel gradient parity %-46s %-10s %d tensors, max relative error %.2e (%s)\n", plan,
                  model.tensors == 39 ? "tiny" : "odd", e.compared, e.max_rel, e.worst.c_str());
      INFO(plan << " " << model.flag);
      CHECK(e.compared == model.tensors);
      CHECK(static_cast<int>(ListDirectory(dir).size()) == model.tensors);
      CHECK(e.max_rel <= 1e-5);
    }
  }
}

TEST_CASE("tensor parallelism keeps the single-process losses and global norm, clipping included", "[train][tp]") {
  // Clipping is active: the norm is the whole model's, each split weight
  // counted once over its shares and each whole one once per group.
  const std::string common = " --steps 4 --clip-norm 0.5";
  const nlohmann::json ref = Json("-k 1 -m 1" + common);
  for (const char* plan :
       {"--tp 2 -s 1f1b -k 2 -m 4", "--tp 2 --dp 2 -s 1f1b -k 1 -m 2 --shard-optimizer",
        // B and I run the forward again, its all-reduces included
        "--tp 2 -s zb-h1 -k 2 -m 4 --recompute all",
        // two copies of each share, summed over the copies
        "--tp 2 -s dualpipe -k 2 -m 4", "--tp 2 --sequence-parallel -s zb-h1 -k 2 -m 4 --recompute all",
        "--tp 2 --sequence-parallel -s dualpipe -k 2 -m 4"}) {
    const nlohmann::json got = Json(plan + common);
    INFO(plan);
    CHECK(got.at("tp") == 2);
    const auto want_loss = Numbers(ref, "losses"), got_loss = Numbers(got, "losses");
    const auto want_norm = Numbers(ref, "grad_norms"), got_norm = Numbers(got, "grad_norms");
    REQUIRE(got_loss.size() == want_loss.size());
    for (size_t i = 0; i < want_loss.size(); ++i) {
      CHECK(got_loss[i] == Approx(want_loss[i]).epsilon(1e-5));
      CHECK(got_norm[i] == Approx(want_norm[i]).epsilon(1e-5));
      CHECK(want_norm[i] > 0.5);  // so clipping acted
    }
  }
}

TEST_CASE("tensor-parallel checkpoints hold the whole model and resume under another T", "[train][tp]") {
  // T=2 writes, T=1 resumes; and T=1 writes, T=2 resumes: both continue the
  // uninterrupted run's losses.
  for (const auto& [writer, reader] : {std::pair<std::string, std::string>{"--tp 2 -k 2", "--tp 1 -k 2"},
                                       std::pair<std::string, std::string>{"--tp 1 -k 2", "--tp 2 -k 1 -m 2"}}) {
    const std::string dir = Tmp("ck");
    const std::string common = " --steps 4 --checkpoint-every 2 --checkpoint-dir " + dir;
    const auto straight = Numbers(Json(writer + common), "losses");
    // Every tensor the writer stored is the whole model's (tiny: hidden 32, MLP 64).
    const std::string step2 = dir + "/step-000002";
    std::map<std::string, at::Tensor> stored;
    for (const std::string& name : ListDirectory(step2)) {
      if (std::filesystem::path(name).extension() != ".shard") continue;
      for (auto& [key, t] : DecodeShard(step2 + "/" + name, ReadBinaryFile(step2 + "/" + name), nullptr)) {
        stored[key] = t;
      }
    }
    CHECK(stored.at("layers.0.mlp.gate_proj.weight").sizes() == std::vector<int64_t>{64, 32});
    CHECK(stored.at("layers.3.mlp.down_proj.weight").sizes() == std::vector<int64_t>{32, 64});
    CHECK(stored.at("layers.1.self_attn.o_proj.weight#exp_avg").sizes() == std::vector<int64_t>{32, 32});
    WriteTextFile(dir + "/latest", "step-000002\n");
    const auto resumed = Numbers(Json(reader + common + " --resume"), "losses");
    INFO(writer << " -> " << reader);
    REQUIRE(resumed.size() == 2);  // steps 3 and 4
    CHECK(resumed[0] == Approx(straight[2]).epsilon(1e-5));
    CHECK(resumed[1] == Approx(straight[3]).epsilon(1e-5));
  }
}

TEST_CASE("bf16 tensor parallelism follows bf16 on one rank", "[train][tp]") {
  // The partial sums travel in bf16 under autocast (Gloo sums them in fp32),
  // so the two differ by rounding only.
  const auto one = Numbers(Json("-k 1 -m 2 --precision bf16"), "losses");
  for (const char* plan :
       {"--tp 2 -k 1 -m 2 --precision bf16", "--tp 2 --sequence-parallel -k 1 -m 2 --precision bf16"}) {
    const auto two = Numbers(Json(plan), "losses");
    INFO(plan);
    REQUIRE(two.size() == one.size());
    for (size_t i = 0; i < one.size(); ++i) CHECK(two[i] == Approx(one[i]).epsilon(1e-3));
  }
}

TEST_CASE("train refuses --sequence-parallel without tensor parallelism or with a sequence that does not split",
          "[train][tp]") {
  const PplabRun alone = Train("--sequence-parallel -k 1");
  CHECK(alone.code != 0);
  CHECK(alone.out ==
        "pplab: error: --sequence-parallel splits the positions over the tensor-parallel ranks: it needs --tp 2 or "
        "more\n");
  const PplabRun odd = Train("--tp 2 --sequence-parallel -k 1 --seq-len 15");
  CHECK(odd.code != 0);
  CHECK(odd.out == "pplab: error: --sequence-parallel: the sequence length 15 is not a multiple of 2 (--tp)\n");
}

TEST_CASE("a --tp the model cannot split is refused in one line before any worker starts", "[train][tp]") {
  const PplabRun r = Train("--tp 3 -k 1");
  CHECK(r.code == 2);
  CHECK(r.out == "pplab: error: --tp 3: the model's num_attention_heads 4 is not a multiple of 3\n");
  const PplabRun gqa = Train("--tp 4 -k 1");  // 4 query heads, but 2 key/value heads
  CHECK(gqa.code == 2);
  CHECK_THAT(gqa.out, Catch::Contains("--tp 4: the model's num_key_value_heads 2 is not a multiple of 4"));
}

TEST_CASE("a killed tensor-parallel rank ends the run with a message naming it", "[train][tp]") {
  // Its peer waits in an all-reduce inside the layer, bounded by --comm-timeout.
  const PplabRun r = Train("--tp 2 -k 1 -m 2 --steps 4 --comm-timeout 20 --kill-rank-at 1:2");
  CHECK(r.code != 0);
  CHECK_THAT(r.out, Catch::Contains("rank 1 was killed by signal"));
}

}  // namespace pplab::train_tensor_parallel_test
