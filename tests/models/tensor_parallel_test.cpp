// The tensor-parallel layout (models/tensor_parallel.h): which parameter is
// split along which dimension, and which configs can be split.
#include "models/tensor_parallel.h"

#include <catch2/catch.hpp>

namespace pplab::tensor_parallel_test {

TEST_CASE(
    "tensor parallelism splits q/k/v, gate/up, the embedding and the head by rows, o and down by columns, and keeps "
    "the rest whole",
    "[tp]") {
  const LlamaConfig untied = LlamaPreset("tiny");
  LlamaConfig tied = untied;
  tied.tie_word_embeddings = true;
  for (const char* rows :
       {"layers.0.self_attn.q_proj.weight", "layers.0.self_attn.q_proj.bias", "layers.12.self_attn.k_proj.weight",
        "layers.3.self_attn.v_proj.bias", "layers.3.mlp.gate_proj.weight", "layers.3.mlp.up_proj.bias"}) {
    INFO(rows);
    CHECK(TensorParallelSplit(rows, untied) == TensorSplit::kRows);
  }
  CHECK(TensorParallelSplit("layers.1.self_attn.o_proj.weight", untied) == TensorSplit::kColumns);
  CHECK(TensorParallelSplit("layers.1.mlp.down_proj.weight", untied) == TensorSplit::kColumns);
  // Row-parallel biases are added once, after the sum: whole.
  CHECK(TensorParallelSplit("layers.1.self_attn.o_proj.bias", untied) == TensorSplit::kWhole);
  CHECK(TensorParallelSplit("layers.1.mlp.down_proj.bias", untied) == TensorSplit::kWhole);
  CHECK(TensorParallelSplit("layers.1.self_attn.q_norm.weight", untied) == TensorSplit::kPartialGradient);
  CHECK(TensorParallelSplit("layers.1.self_attn.k_norm.weight", untied) == TensorSplit::kPartialGradient);
  // The head and the embedding are split by vocabulary, tied or not.
  for (const LlamaConfig& c : {untied, tied}) {
    CHECK(TensorParallelSplit("lm_head.weight", c) == TensorSplit::kRows);
    CHECK(TensorParallelSplit("embed_tokens.weight", c) == TensorSplit::kRows);
  }
  CHECK(TensorParallelSplit("layers.0.self_attn.q_proj.weight", tied) == TensorSplit::kRows);
  for (const char* whole :
       {"norm.weight", "layers.2.input_layernorm.weight", "layers.2.post_attention_layernorm.weight"}) {
    INFO(whole);
    CHECK(TensorParallelSplit(whole, untied) == TensorSplit::kWhole);
  }
  // Under sequence parallelism the weights that see a share of the
  // positions (the norms, the biases added after a reduce-scatter) have
  // partial gradients; the split ones and the embedding are as before.
  for (const char* partial :
       {"norm.weight", "layers.2.input_layernorm.weight", "layers.2.post_attention_layernorm.weight",
        "layers.1.self_attn.o_proj.bias", "layers.1.mlp.down_proj.bias", "layers.1.self_attn.q_norm.weight"}) {
    INFO(partial);
    CHECK(TensorParallelSplit(partial, untied, /*sequence_parallel=*/true) == TensorSplit::kPartialGradient);
  }
  CHECK(TensorParallelSplit("embed_tokens.weight", tied, true) == TensorSplit::kRows);
  CHECK(TensorParallelSplit("lm_head.weight", tied, true) == TensorSplit::kRows);
  CHECK(TensorParallelSplit("layers.1.self_attn.o_proj.weight", untied, true) == TensorSplit::kColumns);
  CHECK(TensorParallelDim(TensorSplit::kRows) == 0);
  CHECK(TensorParallelDim(TensorSplit::kColumns) == 1);
  CHECK(TensorParallelDim(TensorSplit::kWhole) == -1);
  CHECK(TensorParallelDim(TensorSplit::kPartialGradient) == -1);
}

TEST_CASE("a config splits over T ranks when its heads, key/value heads and MLP width are multiples of T", "[tp]") {
  const LlamaConfig small = LlamaPreset("small");  // 8 heads, 2 key/value heads, intermediate 384
  CHECK(WhyNoTensorParallel(small, 1).empty());
  CHECK(WhyNoTensorParallel(small, 2).empty());
  CHECK(WhyNoTensorParallel(small, 4) == "num_key_value_heads 2 is not a multiple of 4");
  CHECK(WhyNoTensorParallel(small, 3) == "num_attention_heads 8 is not a multiple of 3");
  LlamaConfig odd = small;
  odd.intermediate_size = 385;
  CHECK(WhyNoTensorParallel(odd, 2) == "intermediate_size 385 is not a multiple of 2");
  // The embedding and the head split their vocabulary too, tied or not.
  LlamaConfig vocab = small;
  vocab.vocab_size = 2049;
  for (const bool tied : {false, true}) {
    vocab.tie_word_embeddings = tied;
    CHECK(WhyNoTensorParallel(vocab, 2) ==
          "vocab_size 2049 is not a multiple of 2 (the embedding and the LM head are split by vocabulary)");
  }
}

TEST_CASE("a rank's share of a config has 1 / T of the split widths and every whole piece", "[tp]") {
  const LlamaConfig tiny = LlamaPreset("tiny");  // hidden 32, 4 heads, 2 key/value heads, intermediate 64
  const LlamaConfig share = TensorParallelShare(tiny, 2);
  CHECK(share.num_attention_heads == 2);
  CHECK(share.num_key_value_heads == 1);
  CHECK(share.intermediate_size == 32);
  CHECK(share.HeadDim() == tiny.HeadDim());
  CHECK(share.hidden_size == tiny.hidden_size);
  CHECK(share.vocab_size == tiny.vocab_size / 2);  // the head's and the embedding's share
  // q, k, v, o and the MLP halve; the two norms (2 x 32) stay whole.
  const int64_t norms = 2 * 32;
  CHECK(DecoderLayerParams(share) == (DecoderLayerParams(tiny) - norms) / 2 + norms);
  CHECK(DecoderLayerParams(TensorParallelShare(tiny, 1)) == DecoderLayerParams(tiny));
  // A rank of one stage holds: its share of the layers, of the embedding
  // and of the head, and the final norm.
  const Partition whole = PartitionUniform(tiny, 1);
  const int64_t V = tiny.vocab_size, h = 32;
  CHECK(TensorParallelStageParams(tiny, whole, 0, 2) == 4 * DecoderLayerParams(share) + 2 * (V / 2) * h + h);
  CHECK(TensorParallelStageParams(tiny, whole, 0, 1) == StageParams(tiny, whole, 0));
  // Tied, the embedding and the last stage's copy of it, the head, are
  // split alike.
  LlamaConfig tied = tiny;
  tied.tie_word_embeddings = true;
  CHECK(TensorParallelShare(tied, 2).vocab_size == V / 2);
  CHECK(TensorParallelStageParams(tied, whole, 0, 2) == 4 * DecoderLayerParams(share) + 2 * (V / 2) * h + h);
}

TEST_CASE("sequence parallelism needs the sequence length to be a multiple of T", "[tp]") {
  CHECK(WhyNoSequenceParallel(128, 4).empty());
  CHECK(WhyNoSequenceParallel(127, 1).empty());
  CHECK(WhyNoSequenceParallel(130, 4) == "the sequence length 130 is not a multiple of 4");
}

}  // namespace pplab::tensor_parallel_test
