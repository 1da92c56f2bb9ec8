// The tensor-parallel layout (models/tensor_parallel.h): which parameter is
// split along which dimension, and which configs can be split.
#include "models/tensor_parallel.h"

#include <catch2/catch.hpp>

namespace pplab {

TEST_CASE("tensor parallelism splits q/k/v and gate/up by rows, o and down by columns, and keeps the rest whole",
          "[tp]") {
  for (const char* rows :
       {"layers.0.self_attn.q_proj.weight", "layers.0.self_attn.q_proj.bias", "layers.12.self_attn.k_proj.weight",
        "layers.3.self_attn.v_proj.bias", "layers.3.mlp.gate_proj.weight", "layers.3.mlp.up_proj.bias"}) {
    INFO(rows);
    CHECK(TensorParallelSplit(rows) == TensorSplit::kRows);
  }
  CHECK(TensorParallelSplit("layers.1.self_attn.o_proj.weight") == TensorSplit::kColumns);
  CHECK(TensorParallelSplit("layers.1.mlp.down_proj.weight") == TensorSplit::kColumns);
  // Row-parallel biases are added once, after the sum: whole.
  CHECK(TensorParallelSplit("layers.1.self_attn.o_proj.bias") == TensorSplit::kWhole);
  CHECK(TensorParallelSplit("layers.1.mlp.down_proj.bias") == TensorSplit::kWhole);
  CHECK(TensorParallelSplit("layers.1.self_attn.q_norm.weight") == TensorSplit::kPartialGradient);
  CHECK(TensorParallelSplit("layers.1.self_attn.k_norm.weight") == TensorSplit::kPartialGradient);
  for (const char* whole : {"embed_tokens.weight", "lm_head.weight", "norm.weight", "layers.2.input_layernorm.weight",
                            "layers.2.post_attention_layernorm.weight"}) {
    INFO(whole);
    CHECK(TensorParallelSplit(whole) == TensorSplit::kWhole);
  }
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
}

}  // namespace pplab

namespace pplab {

TEST_CASE("a rank's share of a config has 1 / T of the split widths and every whole piece", "[tp]") {
  const LlamaConfig tiny = LlamaPreset("tiny");  // hidden 32, 4 heads, 2 key/value heads, intermediate 64
  const LlamaConfig share = TensorParallelShare(tiny, 2);
  CHECK(share.num_attention_heads == 2);
  CHECK(share.num_key_value_heads == 1);
  CHECK(share.intermediate_size == 32);
  CHECK(share.HeadDim() == tiny.HeadDim());
  CHECK(share.hidden_size == tiny.hidden_size);
  CHECK(share.vocab_size == tiny.vocab_size);
  // q, k, v, o and the MLP halve; the two norms (2 x 32) stay whole.
  const int64_t norms = 2 * 32;
  CHECK(DecoderLayerParams(share) == (DecoderLayerParams(tiny) - norms) / 2 + norms);
  CHECK(DecoderLayerParams(TensorParallelShare(tiny, 1)) == DecoderLayerParams(tiny));
}

}  // namespace pplab
