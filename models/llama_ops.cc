#include "models/llama_ops.h"

#include <torch/torch.h>
#include <torch/version.h>

#include "models/projections.h"
#include "schedules/error.h"

// at::rms_norm came in LibTorch 2.4; on CUDA, later versions run it as one
// fused kernel forward and one backward (_fused_rms_norm).
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
#define PPLAB_HAS_RMS_NORM 1
#endif

namespace pplab {
namespace {

// The two halves of the last dimension swapped: (..., [a, b]) -> (..., [b,
// a]), one copy. Its own inverse and its own transpose.
torch::Tensor SwapHalves(const torch::Tensor& x) {
  const int64_t half = x.size(-1) / 2;
  return torch::cat({x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
}

// Rotary position encoding in the rotate-half form, x cos + rotate_half(x)
// sin with rotate_half(x) = [-x_2, x_1], as one autograd node. rotate_half(x)
// sin is SwapHalves(x) times signed_sin = [-sin_1, sin_2] (the table's
// halves), so the forward is one swap, one product and one multiply-add;
// the backward the same, transposed: g cos + SwapHalves(g signed_sin). Three
// kernels each way, where autograd's graph of neg, cat, two products and a
// sum takes five forward and about ten backward. cos, signed_sin: (T,
// head_dim), fp32; x (..., T, head_dim) in any float dtype, the result in
// the promoted one (fp32 for bf16 x, as x cos gives).
torch::Tensor RotaryForward(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& signed_sin) {
  return torch::addcmul(x * cos, SwapHalves(x), signed_sin);
}
torch::Tensor RotaryBackward(const torch::Tensor& g, const torch::Tensor& cos, const torch::Tensor& signed_sin) {
  return torch::addcmul(SwapHalves(g * signed_sin), g, cos);
}
struct Rotary : torch::autograd::Function<Rotary> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& cos,
                               const torch::Tensor& signed_sin) {
    ctx->save_for_backward({cos, signed_sin});
    return RotaryForward(x, cos, signed_sin);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const torch::autograd::variable_list saved = ctx->get_saved_variables();
    return {RotaryBackward(grads[0], saved[0], saved[1]), torch::Tensor(), torch::Tensor()};
  }
};

// The rotary encoding of q (B,T,H,hd) and k (B,T,KV,hd) as their
// projections give them, in one node. Where k continues q (the stacked
// q/k/v output, ColumnProjections) the two are one (B,T,H+KV,hd) tensor:
// Rotary's three kernels once for both, and backward one copy that puts
// their gradients side by side, three kernels, and the gradients handed on
// side by side, as the projections' backward reads them. Elsewhere (apart,
// or qk_norm's fp32 outputs) each its own. cos, signed_sin: (T, hd).
struct RotaryPair : torch::autograd::Function<RotaryPair> {
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& q,
                                                const torch::Tensor& k, const torch::Tensor& cos,
                                                const torch::Tensor& signed_sin) {
    const torch::Tensor c = cos.unsqueeze(1), s = signed_sin.unsqueeze(1);  // (T,1,hd): every head
    ctx->save_for_backward({c, s});
    const torch::Tensor both = ContinuedAlong(q, k, 2);
    ctx->saved_data["joint"] = both.defined();
    if (!both.defined()) return {RotaryForward(q, c, s), RotaryForward(k, c, s)};
    const torch::Tensor out = RotaryForward(both, c, s);
    return {out.narrow(2, 0, q.size(2)), out.narrow(2, q.size(2), k.size(2))};
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const torch::autograd::variable_list saved = ctx->get_saved_variables();
    const torch::Tensor &c = saved[0], &s = saved[1];
    if (!ctx->saved_data["joint"].toBool()) {
      return {RotaryBackward(grads[0], c, s), RotaryBackward(grads[1], c, s), torch::Tensor(), torch::Tensor()};
    }
    const int64_t heads = grads[0].size(2);
    const torch::Tensor d = RotaryBackward(torch::cat({grads[0], grads[1]}, 2), c, s);
    return {d.narrow(2, 0, heads), d.narrow(2, heads, grads[1].size(2)), torch::Tensor(), torch::Tensor()};
  }
};

// SwiGLU's product silu(gate) * up as one autograd node that keeps only
// gate and up, the projections' outputs, and computes silu(gate) again in
// the backward (as Megatron-LM's fused SwiGLU does): autograd's silu and
// product would also keep silu(gate), a third (B, T, I) tensor, for the
// whole time the microbatch is in flight. One more kernel backward (the
// silu again), the same values: the backward runs the kernels autograd's
// graph would, on the same operands.
struct SwiGlu : torch::autograd::Function<SwiGlu> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& gate,
                               const torch::Tensor& up) {
    ctx->save_for_backward({gate, up});
    return torch::silu(gate) * up;
  }
  // The two gradients are written side by side into one (..., 2 I) tensor,
  // as gate and up came out of their projections: ColumnProjections then
  // takes them as one matrix without copying them together.
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const torch::autograd::variable_list saved = ctx->get_saved_variables();
    const torch::Tensor& gate = saved[0];
    const torch::Tensor& up = saved[1];
    const torch::Tensor& g = grads[0];
    const int64_t inner = gate.size(-1);
    std::vector<int64_t> sizes = gate.sizes().vec();
    sizes.back() = 2 * inner;
    const torch::Tensor both = torch::empty(sizes, gate.options());
    torch::Tensor d_gate = both.narrow(-1, 0, inner), d_up = both.narrow(-1, inner, inner);
    at::silu_backward_out(d_gate, g * up, gate);
    at::mul_out(d_up, g, torch::silu(gate));
    return {d_gate, d_up};
  }
};

// Cross-entropy over a vocabulary split between the group's ranks
// (Megatron-LM's vocabulary-parallel cross-entropy): logits (N, V/T) of
// this rank's tokens, targets (N) of the whole vocabulary. The log-sum-exp
// over the vocabulary is that of every rank's own, so no logit leaves its
// rank; a rank's gradient is softmax minus the one-hot target within its
// share.
struct VocabParallelCrossEntropy : torch::autograd::Function<VocabParallelCrossEntropy> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& logits,
                               const torch::Tensor& targets, int64_t ignore_index, int64_t rank, int64_t ranks,
                               const GroupRef& group) {
    TensorParallelComm& comm = *group->comm;
    const torch::Tensor x = logits.to(torch::kFloat32);  // (N, Vs)
    const int64_t n = x.size(0), vs = x.size(1);
    // Every rank's log-sum-exp of its share (ranks, N), then the whole one (N).
    torch::Tensor shares = torch::zeros({ranks, n}, x.options());
    shares[rank].copy_(torch::logsumexp(x, 1));
    comm.AllReduceSum(shares);
    const torch::Tensor lse = torch::logsumexp(shares, 0);
    // Each target's logit, from the rank whose share holds it.
    const torch::Tensor local = targets - rank * vs;
    const torch::Tensor valid = targets != ignore_index;
    const torch::Tensor mine = (local >= 0) & (local < vs) & valid;
    const torch::Tensor index = local.clamp(0, vs - 1);
    torch::Tensor target_logit = (x.gather(1, index.unsqueeze(1)).squeeze(1) * mine).contiguous();
    comm.AllReduceSum(target_logit);
    ctx->save_for_backward({x, lse, index, mine, valid});
    ctx->saved_data["dtype"] = static_cast<int64_t>(logits.scalar_type());
    return ((lse - target_logit) * valid).sum();
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &x = saved[0], &lse = saved[1], &index = saved[2], &mine = saved[3], &valid = saved[4];
    torch::Tensor g = torch::exp(x - lse.unsqueeze(1)) * valid.unsqueeze(1);  // softmax, 0 on ignored rows
    g.scatter_add_(1, index.unsqueeze(1), -mine.to(g.scalar_type()).unsqueeze(1));
    g = (g * grads[0]).to(static_cast<c10::ScalarType>(ctx->saved_data["dtype"].toInt()));
    return {g, torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

bool FusedRmsNormAvailable() {
#ifdef PPLAB_HAS_RMS_NORM
  return true;
#else
  return false;
#endif
}

at::Tensor RmsNorm(const at::Tensor& x, const at::Tensor& weight, double eps, bool fused) {
#ifdef PPLAB_HAS_RMS_NORM
  if (fused) return at::rms_norm(x, {weight.size(0)}, weight, eps);
#else
  (void)fused;
#endif
  return x * torch::rsqrt(x.pow(2).mean(-1, /*keepdim=*/true) + eps) * weight;
}

at::Tensor RotaryEncoding(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, bool fused) {
  if (fused) return Rotary::apply(x, cos, SignedSin(sin));
  const int64_t half = x.size(-1) / 2;
  return x * cos + torch::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1) * sin;
}

at::Tensor SignedSin(const at::Tensor& sin) {
  const int64_t half = sin.size(-1) / 2;
  return torch::cat({-sin.narrow(-1, 0, half), sin.narrow(-1, half, half)}, -1);
}

std::vector<at::Tensor> RotaryQueryKey(const at::Tensor& q, const at::Tensor& k, const at::Tensor& cos,
                                       const at::Tensor& signed_sin) {
  return RotaryPair::apply(q, k, cos, signed_sin);
}

at::Tensor SwiGluProduct(const at::Tensor& gate, const at::Tensor& up) { return SwiGlu::apply(gate, up); }

at::Tensor VocabParallelCrossEntropySum(const at::Tensor& logits, const at::Tensor& targets, int64_t ignore_index,
                                        const TensorParallel& tp, const std::shared_ptr<TensorParallelComm>& comm) {
  // logits (B,T,V/T), targets (B,T) -> scalar sum over non-ignored tokens
  if (comm == nullptr) throw Error("llama: a vocabulary-parallel loss needs its group");
  return VocabParallelCrossEntropy::apply(logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}), ignore_index,
                                          static_cast<int64_t>(tp.rank), static_cast<int64_t>(tp.size),
                                          c10::make_intrusive<GroupHolder>(comm, tp));
}

at::Tensor TokenCrossEntropySum(const at::Tensor& logits, const at::Tensor& targets, int64_t ignore_index) {
  // logits (B,T,V), targets (B,T) -> scalar sum over non-ignored tokens
  return torch::nn::functional::cross_entropy(
      logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}),
      torch::nn::functional::CrossEntropyFuncOptions().ignore_index(ignore_index).reduction(torch::kSum));
}

}  // namespace pplab
