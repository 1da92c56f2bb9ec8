// The modules of one Llama decoder layer (models/llama.cc builds stages of
// them): RMSNorm, grouped-query attention with the rotary encoding, the
// SwiGLU MLP, and the layer that chains them with their residuals. Under
// tensor parallelism each holds its rank's share (models/tensor_parallel.h)
// and sums over the group through models/projections.h. Included by
// models/llama.cc alone.
#pragma once

#include <torch/torch.h>
#include <torch/version.h>

#include <cmath>

#include "models/llama.h"
#include "models/llama_ops.h"
#include "models/projections.h"
#include "schedules/error.h"

// at::scaled_dot_product_attention came in LibTorch 2.0, its enable_gqa
// argument (K/V with fewer heads than Q, not repeated) in 2.5.
#if TORCH_VERSION_MAJOR >= 2
#define PPLAB_HAS_SDPA 1
#endif
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 5)
#define PPLAB_HAS_SDPA_GQA 1
#endif

namespace pplab::llama_layers {

struct RMSNormImpl : torch::nn::Module {
  RMSNormImpl(int64_t dim, double eps) : eps(eps) { weight = register_parameter("weight", torch::ones({dim})); }
  // x (..., C) -> (..., C)
  torch::Tensor forward(const torch::Tensor& x) { return RmsNorm(x, weight, eps, /*fused=*/true); }
  double eps;
  torch::Tensor weight;
};
TORCH_MODULE(RMSNorm);

inline torch::nn::Linear Linear(int64_t in, int64_t out, bool bias = false) {
  return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(bias));
}

// A split region's sizes on one rank of `tp`.
inline int64_t Share(int64_t whole, const TensorParallel& tp) { return whole / tp.size; }

inline torch::Tensor RepeatKv(const torch::Tensor& x, int64_t groups) {
  return groups == 1 ? x : x.repeat_interleave(groups, 1);
}

// One layer's keys and values of the tokens decoded so far: (B,KV,T,hd),
// after the rotary encoding.
struct KvSlot {
  torch::Tensor k, v;
};

struct AttentionImpl : torch::nn::Module {
  // With a group, this rank's heads and key/value heads of `tp`
  // (models/tensor_parallel.h).
  AttentionImpl(const LlamaConfig& c, bool sdpa, const TensorParallel& tp = {}, GroupRef group = {})
      : heads(Share(c.num_attention_heads, tp)),
        kv_heads(Share(c.num_key_value_heads, tp)),
        head_dim(c.HeadDim()),
        sdpa(sdpa),
        group(std::move(group)) {
    q_proj = register_module("q_proj", Linear(c.hidden_size, heads * head_dim, c.QkvBias()));
    k_proj = register_module("k_proj", Linear(c.hidden_size, kv_heads * head_dim, c.QkvBias()));
    v_proj = register_module("v_proj", Linear(c.hidden_size, kv_heads * head_dim, c.QkvBias()));
    o_proj = register_module("o_proj", Linear(heads * head_dim, c.hidden_size, c.attention_bias));
    if (c.qk_norm) {
      q_norm = register_module("q_norm", RMSNorm(head_dim, c.rms_norm_eps));
      k_norm = register_module("k_norm", RMSNorm(head_dim, c.rms_norm_eps));
    }
  }
  // x (B,T,C), cos/signed_sin (T,hd) (RotaryQueryKey's tables), bias (B,1,T,T)
  // additive mask, or undefined for causal only (SDPA path) -> (B,T,C).
  // With `cache`, the keys and values of the tokens before these are in it
  // (bias is then (B,1,T,past+T)), and these tokens' are appended. Under
  // sequence parallelism x and the result are this rank's T / size
  // positions, and the tables and bias are every position's.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& signed_sin,
                        const torch::Tensor& bias, KvSlot* cache = nullptr) {
    const auto qkv = ColumnParallel(x, {q_proj, k_proj, v_proj}, group);
    const int64_t B = qkv[0].size(0), T = qkv[0].size(1);
    auto q = qkv[0].view({B, T, heads, head_dim});     // (B,T,H,hd): H this rank's heads
    auto k = qkv[1].view({B, T, kv_heads, head_dim});  // (B,T,KV,hd)
    if (q_norm) {
      // Each head normalised on its own, in fp32 as the norm's weight is:
      // under bf16 autocast the projections come out in bf16, and the norm
      // then runs in fp32 as the other norms do on the fp32 residual stream
      // (and as Qwen3's reference code does), whatever a LibTorch's fused
      // at::rms_norm makes of mixed dtypes.
      q = q_norm(q.to(torch::kFloat32));
      k = k_norm(k.to(torch::kFloat32));
    }
    const auto rotated = RotaryQueryKey(q, k, cos, signed_sin);
    q = rotated[0].transpose(1, 2);                                    // (B,H,T,hd)
    k = rotated[1].transpose(1, 2);                                    // (B,KV,T,hd)
    auto v = qkv[2].view({B, T, kv_heads, head_dim}).transpose(1, 2);  // (B,KV,T,hd)
    if (cache != nullptr) {
      if (cache->k.defined()) {
        k = torch::cat({cache->k, k}, 2);
        v = torch::cat({cache->v, v}, 2);
      }
      cache->k = k;
      cache->v = v;
    }
    auto out = sdpa ? Sdpa(q, k, v, bias) : Explicit(q, k, v, bias);                           // (B,H,T,hd)
    return RowParallel(o_proj, out.transpose(1, 2).reshape({B, T, heads * head_dim}), group);  // (B,T,C)
  }

  // q (B,H,T,hd), k/v (B,KV,T,hd), bias (B,1,T,T) -> (B,H,T,hd). The softmax
  // runs in fp32 whatever the inputs' dtype (bf16 under autocast).
  torch::Tensor Explicit(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                         const torch::Tensor& bias) {
    // K and V repeated to (B,H,T,hd).
    const auto kr = RepeatKv(k, heads / kv_heads), vr = RepeatKv(v, heads / kv_heads);
    auto scores = torch::matmul(q, kr.transpose(-2, -1)) / std::sqrt(static_cast<double>(head_dim));  // (B,H,T,T)
    auto probs = torch::softmax(scores + bias, -1, torch::kFloat32);
    return torch::matmul(probs.to(vr.scalar_type()), vr);
  }

  // The same through at::scaled_dot_product_attention. bias undefined: causal
  // only (is_causal, no mask tensor), which the flash kernel takes; with a
  // bias, the memory-efficient kernel or the math fallback. The fused kernels
  // accumulate the softmax in fp32.
  torch::Tensor Sdpa(torch::Tensor q, torch::Tensor k, const torch::Tensor& v, const torch::Tensor& bias) {
#ifdef PPLAB_HAS_SDPA
    // Rotary encoding promotes q and k to the tables' fp32; v is what the
    // projection gave (bf16 under autocast). One dtype for all, as autocast
    // would cast them, so that the kernel choice below sees what SDPA gets.
    q = q.to(v.scalar_type());
    k = k.to(v.scalar_type());
    const bool causal = !bias.defined();
    c10::optional<at::Tensor> mask;
    if (!causal) mask = bias.to(v.scalar_type());
    // SDPA keeps the q, k and v it gets for its backward. With q/k/v
    // stacked (ColumnProjections) v is a view of their one output, which
    // would keep the pre-rotary q and k alive with it: q + 2 kv values a
    // token instead of kv. And q and k leave the rotary encoding as views of
    // one tensor (RotaryQueryKey): where k is repeated (a copy), q would keep the
    // rotated k alive. So v where it goes in as it is, and q where k does
    // not, go in as copies of their own, laid out as unstacked ones are.
    const auto own = [](const torch::Tensor& t) {
      const bool part = t.storage().nbytes() > static_cast<size_t>(t.numel()) * t.element_size();
      return part ? t.transpose(1, 2).contiguous().transpose(1, 2) : t;
    };
#ifdef PPLAB_HAS_SDPA_GQA
    if (kv_heads != heads) {
      // Hand SDPA the KV heads unrepeated where the kernel it would pick
      // takes grouped-query attention (flash); the math fallback would only
      // repeat them itself, and with them repeated here the memory-efficient
      // kernel (which takes a mask and fp32, not GQA) may run instead.
      constexpr int64_t kMathBackend = 0;  // at::SDPBackend::math
      if (at::_fused_sdp_choice(q, k, v, mask, 0.0, causal, c10::nullopt, /*enable_gqa=*/true) != kMathBackend) {
        return at::scaled_dot_product_attention(q, k, own(v), mask, 0.0, causal, c10::nullopt, /*enable_gqa=*/true);
      }
    }
#endif
    const int64_t groups = heads / kv_heads;
    if (groups == 1) return at::scaled_dot_product_attention(q, k, own(v), mask, 0.0, causal);
    return at::scaled_dot_product_attention(own(q), RepeatKv(k, groups), RepeatKv(v, groups), mask, 0.0, causal);
#else
    (void)q, (void)k, (void)v, (void)bias;
    throw Error("attention sdpa: not in this LibTorch");  // ResolveAttention refuses it first
#endif
  }

  int64_t heads, kv_heads, head_dim;
  bool sdpa;
  GroupRef group;  // null without tensor parallelism
  torch::nn::Linear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, o_proj{nullptr};
  RMSNorm q_norm{nullptr}, k_norm{nullptr};  // qk_norm only
};
TORCH_MODULE(Attention);

struct MlpImpl : torch::nn::Module {
  // With a group, this rank's intermediate columns of `tp`.
  explicit MlpImpl(const LlamaConfig& c, const TensorParallel& tp = {}, GroupRef group = {}) : group(std::move(group)) {
    const int64_t inner = Share(c.intermediate_size, tp);
    gate_proj = register_module("gate_proj", Linear(c.hidden_size, inner, c.mlp_bias));
    up_proj = register_module("up_proj", Linear(c.hidden_size, inner, c.mlp_bias));
    down_proj = register_module("down_proj", Linear(inner, c.hidden_size, c.mlp_bias));
  }
  // SwiGLU: x (B,T,C) -> (B,T,I) (I: this rank's columns) -> (B,T,C);
  // under sequence parallelism x and the result are this rank's positions.
  torch::Tensor forward(const torch::Tensor& x) {
    const auto gate_up = ColumnParallel(x, {gate_proj, up_proj}, group);
    return RowParallel(down_proj, SwiGluProduct(gate_up[0], gate_up[1]), group);
  }
  GroupRef group;
  torch::nn::Linear gate_proj{nullptr}, up_proj{nullptr}, down_proj{nullptr};
};
TORCH_MODULE(Mlp);

struct DecoderLayerImpl : torch::nn::Module {
  DecoderLayerImpl(const LlamaConfig& c, bool sdpa, const TensorParallel& tp, const GroupRef& group) {
    input_layernorm = register_module("input_layernorm", RMSNorm(c.hidden_size, c.rms_norm_eps));
    self_attn = register_module("self_attn", Attention(c, sdpa, tp, group));
    post_attention_layernorm = register_module("post_attention_layernorm", RMSNorm(c.hidden_size, c.rms_norm_eps));
    mlp = register_module("mlp", Mlp(c, tp, group));
  }
  // x (B,T,C) -> (B,T,C); `cache` as in AttentionImpl::forward.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& signed_sin,
                        const torch::Tensor& bias, KvSlot* cache = nullptr) {
    auto h = x + self_attn(input_layernorm(x), cos, signed_sin, bias, cache);
    return h + mlp(post_attention_layernorm(h));
  }
  RMSNorm input_layernorm{nullptr}, post_attention_layernorm{nullptr};
  Attention self_attn{nullptr};
  Mlp mlp{nullptr};
};
TORCH_MODULE(DecoderLayer);

}  // namespace pplab::llama_layers
