// Llama's element-wise operations, each one autograd node with a backward
// written by hand (fewer kernels, and fewer tensors kept, than autograd's
// graph of the same operations), and its losses (LibTorch). The stages of
// models/llama.h are built from them.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "models/tensor_parallel.h"
#include "runtime/exec/tensor_parallel_comm.h"

namespace pplab {

// Whether this LibTorch has at::rms_norm (2.4 and later).
bool FusedRmsNormAvailable();
// x * rsqrt(mean over the last dimension of x^2 + eps) * weight: through
// at::rms_norm where `fused` and available (one fused kernel each way on
// CUDA in recent LibTorch), else written out in tensor ops. Llama's norms
// take the fused path.
at::Tensor RmsNorm(const at::Tensor& x, const at::Tensor& weight, double eps, bool fused);

// Rotary position encoding in the rotate-half form, x cos + rotate_half(x)
// sin with rotate_half(x) = [-x_2, x_1] (the last dimension's halves); cos
// and sin (T, head_dim), x (..., T, head_dim). `fused`: one autograd node of
// three kernels each way, as the stages run it (RotaryQueryKey); else
// written out in tensor ops.
at::Tensor RotaryEncoding(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, bool fused);
// The sine table (T, head_dim) with its first half negated, [-sin_1, sin_2],
// as RotaryQueryKey takes it.
at::Tensor SignedSin(const at::Tensor& sin);
// The rotary encoding of q (B,T,H,hd) and k (B,T,KV,hd) in one autograd
// node: {q rotated, k rotated}, in the promoted dtype (fp32 for bf16 inputs,
// as x cos gives). cos and signed_sin (T, hd), fp32. Where k continues q in
// memory (the stacked q/k/v projection's output) both are rotated as one
// tensor, and their gradients handed back side by side, as the projections'
// backward reads them.
std::vector<at::Tensor> RotaryQueryKey(const at::Tensor& q, const at::Tensor& k, const at::Tensor& cos,
                                       const at::Tensor& signed_sin);

// SwiGLU's product silu(gate) * up, (..., I) each, as one autograd node that
// keeps only gate and up and computes silu(gate) again in its backward
// (Megatron-LM's fused SwiGLU does the same); the two gradients come back
// side by side in one (..., 2 I) tensor.
at::Tensor SwiGluProduct(const at::Tensor& gate, const at::Tensor& up);

// Sum of token cross-entropies of `logits` (B,T,V) against `targets` (B,T),
// skipping targets equal to `ignore_index`. A scalar.
at::Tensor TokenCrossEntropySum(const at::Tensor& logits, const at::Tensor& targets, int64_t ignore_index);
// The same over logits split by vocabulary (a split LM head): `logits`
// (B,T,V/T) are rank tp.rank's share, the tokens [rank V/T, (rank+1) V/T).
// Every rank of the group gets the whole sum, and the gradient of its own
// share, without the logits being gathered: each rank's log-sum-exp and
// target logits are summed over the group (two all-reduces of B T values).
at::Tensor VocabParallelCrossEntropySum(const at::Tensor& logits, const at::Tensor& targets, int64_t ignore_index,
                                        const TensorParallel& tp, const std::shared_ptr<TensorParallelComm>& comm);

}  // namespace pplab
