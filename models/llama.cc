#include "models/llama.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>
#include <torch/version.h>

#include <cmath>

#include "models/llama_ops.h"
#include "models/pretrained.h"
#include "models/projections.h"
#include "runtime/exec/autocast.h"
#include "schedules/error.h"

// at::scaled_dot_product_attention came in LibTorch 2.0, its enable_gqa
// argument (K/V with fewer heads than Q, not repeated) in 2.5.
#if TORCH_VERSION_MAJOR >= 2
#define PPLAB_HAS_SDPA 1
#endif
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 5)
#define PPLAB_HAS_SDPA_GQA 1
#endif

namespace pplab {
namespace {

// 64-bit FNV-1a of the name, mixed with the seed (splitmix64 finaliser), so
// each parameter's initial values depend on (seed, global name) only.
uint64_t ParamSeed(uint64_t seed, const std::string& name) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ULL;
  uint64_t z = h ^ (seed + 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

struct RMSNormImpl : torch::nn::Module {
  RMSNormImpl(int64_t dim, double eps) : eps(eps) { weight = register_parameter("weight", torch::ones({dim})); }
  // x (..., C) -> (..., C)
  torch::Tensor forward(const torch::Tensor& x) { return RmsNorm(x, weight, eps, /*fused=*/true); }
  double eps;
  torch::Tensor weight;
};
TORCH_MODULE(RMSNorm);

torch::nn::Linear Linear(int64_t in, int64_t out, bool bias = false) {
  return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(bias));
}

// A split region's sizes on one rank of `tp`.
int64_t Share(int64_t whole, const TensorParallel& tp) { return whole / tp.size; }

torch::Tensor RepeatKv(const torch::Tensor& x, int64_t groups) {
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

class LlamaStageImpl : public torch::nn::Module {
 public:
  LlamaStageImpl(const LlamaConfig& c, const Partition& p, int stage, const LlamaOptions& options)
      : config_(c),
        first_(stage == 0),
        last_(stage == p.NumStages() - 1),
        sdpa_(ResolveAttention(options.attention) == AttentionKind::kSdpa),
        padding_(options.padding),
        tp_(options.tensor_parallel) {
    GroupRef group;
    if (tp_.size > 1) {
      if (options.tp_comm == nullptr)
        throw Error("llama: tensor parallelism over " + std::to_string(tp_.size) + " ranks needs their group");
      if (const std::string why = WhyNoTensorParallel(c, tp_.size); !why.empty()) {
        throw Error("llama: cannot split the layers over " + std::to_string(tp_.size) +
                    " tensor-parallel ranks: " + why);
      }
      group = c10::make_intrusive<GroupHolder>(options.tp_comm, tp_);
      group_ = group;
    }
    if (first_) {
      // Split by vocabulary under tensor parallelism, as the head is.
      embed_tokens_ = register_module(
          "embed_tokens", torch::nn::Embedding(group_ ? c.vocab_size / tp_.size : c.vocab_size, c.hidden_size));
    }
    // Global layer indices as child names: "layers.7....".
    auto holder = register_module("layers", std::make_shared<torch::nn::Module>());
    for (int l = p.Begin(stage); l < p.End(stage); ++l) {
      layers_.push_back(holder->register_module(std::to_string(l), DecoderLayer(c, sdpa_, tp_, group)));
    }
    if (last_) {
      norm_ = register_module("norm", RMSNorm(c.hidden_size, c.rms_norm_eps));
      // Split by vocabulary under tensor parallelism (its logits are this
      // rank's share), tied or not.
      lm_head_ = register_module("lm_head", Linear(c.hidden_size, group_ ? c.vocab_size / tp_.size : c.vocab_size));
    }
    // Rotary tables for every position the model accepts: (max_pos, hd).
    const std::vector<double> frequencies = RotaryFrequencies(c);  // rope_theta's, scaled as the config says
    auto inv_freq = torch::tensor(at::ArrayRef<double>(frequencies), torch::dtype(torch::kFloat64));
    auto freqs = torch::outer(torch::arange(c.max_position_embeddings, torch::kFloat64), inv_freq);
    auto emb = torch::cat({freqs, freqs}, -1);
    cos_ = register_buffer("rope_cos", emb.cos().to(torch::kFloat32));
    // The sine with its first half negated, as RotaryQueryKey takes it.
    signed_sin_ = register_buffer("rope_signed_sin", SignedSin(emb.sin()).to(torch::kFloat32));
  }

  void Initialise(uint64_t seed) {
    torch::NoGradGuard no_grad;
    for (auto& item : named_parameters()) {
      const std::string& name = item.key();
      if (name.find("norm") != std::string::npos) continue;  // RMSNorm weights start at 1
      if (name.size() > 5 && name.compare(name.size() - 5, 5, ".bias") == 0) {
        item.value().zero_();  // biases start at 0
        continue;
      }
      // A tied head starts as the embedding (its shape too: vocab x hidden).
      const bool tied_head = config_.tie_word_embeddings && name == kLmHeadWeight;
      auto gen = at::detail::createCPUGenerator(ParamSeed(seed, tied_head ? kEmbeddingWeight : name));
      // The whole model's values, drawn whole, of which this rank keeps its share.
      at::Tensor whole = torch::empty(WholeShape(name, item.value()), item.value().options());
      whole.normal_(0.0, 0.02, gen);
      item.value().copy_(ShareOf(name, whole));
    }
  }

  // The shape parameter `name` (this rank's `local`) has in the whole model.
  std::vector<int64_t> WholeShape(const std::string& name, const at::Tensor& local) const {
    std::vector<int64_t> shape = local.sizes().vec();
    const int dim = TensorParallelDim(TensorParallelSplit(name, config_));
    if (tp_.size > 1 && dim >= 0) shape[dim] *= tp_.size;
    return shape;
  }
  // This rank's share of `whole`, the whole model's parameter `name`.
  at::Tensor ShareOf(const std::string& name, const at::Tensor& whole) const {
    const int dim = TensorParallelDim(TensorParallelSplit(name, config_));
    if (tp_.size == 1 || dim < 0) return whole;
    const int64_t n = whole.size(dim) / tp_.size;
    return whole.narrow(dim, tp_.rank * n, n);
  }

  // Each parameter from the published model's tensor of the same name
  // (widened to fp32), in place of the seed's values.
  void LoadWeights(const WeightFiles& files) {
    torch::NoGradGuard no_grad;
    for (auto& item : named_parameters()) {
      at::Tensor& p = item.value();
      const SafetensorsTensor& t = PretrainedTensor(files, config_, item.key());
      const std::vector<int64_t> shape = WholeShape(item.key(), p);
      if (t.shape != shape || p.scalar_type() != at::kFloat || !p.is_contiguous() || !p.device().is_cpu()) {
        throw Error(t.file + ": tensor '" + HuggingFaceName(item.key()) + "' does not fit parameter " + item.key());
      }
      if (shape == p.sizes().vec()) {
        ReadAsFloat32(HuggingFaceName(item.key()), t, p.data_ptr<float>());
        continue;
      }
      at::Tensor whole = torch::empty(shape, p.options());  // then this rank's share of it
      ReadAsFloat32(HuggingFaceName(item.key()), t, whole.data_ptr<float>());
      p.copy_(ShareOf(item.key(), whole));
    }
  }

  TensorList Forward(const TensorList& inputs) {
    if (inputs.size() != 2) throw Error("llama stage: expected 2 inputs (activations, attention_mask)");
    const torch::Tensor& mask = inputs[1];  // (B,T) int64, 1 = token
    const int64_t T = mask.size(1);
    // (B,T,C), or under sequence parallelism this rank's (B,T/size,C).
    const torch::Tensor x = first_ ? Embed(inputs[0]) : inputs[0];
    if (x.size(1) != (tp_.Sequence() ? T / tp_.size : T) || T % tp_.size != 0) {
      throw Error("llama stage: hidden state of " + std::to_string(x.size(1)) + " positions for a mask of " +
                  std::to_string(T) +
                  (tp_.Sequence() ? " split over " + std::to_string(tp_.size) + " sequence-parallel ranks" : ""));
    }
    if (T > config_.max_position_embeddings) {
      throw Error("llama stage: sequence length " + std::to_string(T) + " exceeds max_position_embeddings " +
                  std::to_string(config_.max_position_embeddings));
    }
    torch::Tensor bias;  // undefined: causal only (SDPA, padding at most ending a row)
    if (sdpa_ && !padding_) {
      if (mask.device().is_cpu() && T > 1 && mask.narrow(1, 1, T - 1).gt(mask.narrow(1, 0, T - 1)).any().item<bool>()) {
        throw Error(
            "llama stage: attention_mask has padding before a token, but the stage was built for batches whose "
            "padding only ends a row");
      }
    } else {
      // Additive bias (B,1,T,T): causal, and padding keys hidden. A large finite
      // negative instead of -inf keeps fully masked rows (leading padding) finite
      // on every path (SDPA's kernels give NaN or 0 for rows masked with -inf).
      auto causal = torch::ones({T, T}, torch::TensorOptions().dtype(torch::kBool).device(x.device())).tril();
      auto allowed = causal.unsqueeze(0) & mask.to(torch::kBool).unsqueeze(1);  // (B,T,T)
      bias = torch::zeros(allowed.sizes(), x.options()).masked_fill(allowed.logical_not(), -1e9).unsqueeze(1);
      // SDPA takes the mask in q, k and v's dtype (bf16 under autocast): one
      // cast for the stage's layers, not one each (each layer's kernel keeps
      // the mask it gets for its backward).
      if (sdpa_) bias = bias.to(AutocastComputeDtype(x.device().type(), x.scalar_type()));
    }
    auto cos = cos_.narrow(0, 0, T), signed_sin = signed_sin_.narrow(0, 0, T);
    torch::Tensor h = x;
    for (auto& layer : layers_) h = layer(h, cos, signed_sin, bias);
    if (last_) return {Head(norm_(h))};
    return {h, mask};
  }

  // The logits (B,T,V) of `tokens` (B,T) that follow the ones whose keys and
  // values `cache` holds (one slot per layer), which it then holds too. The
  // whole model must be this stage.
  torch::Tensor Decode(const torch::Tensor& tokens, std::vector<KvSlot>& cache) {
    if (!first_ || !last_) throw Error("llama: decoding needs the whole model in one stage");
    cache.resize(layers_.size());
    const int64_t past = cache.empty() || !cache[0].k.defined() ? 0 : cache[0].k.size(2);
    const int64_t T = tokens.size(1);
    if (past + T > config_.max_position_embeddings) {
      throw Error("llama: decoding past max_position_embeddings " + std::to_string(config_.max_position_embeddings));
    }
    torch::Tensor x = embed_tokens_(tokens);
    // New token i sits at position past + i and sees keys 0..past + i.
    const auto options = torch::TensorOptions().dtype(torch::kLong).device(x.device());
    const auto query = torch::arange(past, past + T, options).unsqueeze(1), key = torch::arange(past + T, options);
    const torch::Tensor bias =
        torch::zeros({T, past + T}, x.options()).masked_fill(key.unsqueeze(0) > query, -1e9).view({1, 1, T, past + T});
    auto cos = cos_.narrow(0, past, T), signed_sin = signed_sin_.narrow(0, past, T);
    for (size_t l = 0; l < layers_.size(); ++l) x = layers_[l](x, cos, signed_sin, bias, &cache[l]);
    return Project(lm_head_, norm_(x));
  }

  // The embedding (B,T,C) of tokens (B,T), or under sequence parallelism
  // this rank's positions of it. Split by vocabulary (tensor parallelism),
  // each rank looks up the tokens of its share, zeros for the others, and
  // the group sums the rows (reduce-scattered under sequence parallelism).
  torch::Tensor Embed(const torch::Tensor& tokens) {
    if (!group_) return embed_tokens_(tokens);
    const int64_t share = config_.vocab_size / tp_.size;
    const torch::Tensor local = tokens - tp_.rank * share;
    const torch::Tensor others = (local < 0) | (local >= share);
    const torch::Tensor partial = embed_tokens_(local.clamp(0, share - 1)).masked_fill(others.unsqueeze(-1), 0.0);
    return ExitSplitRegion(partial, group_);
  }

  // The logits (B,T,V) of the normed hidden state x, or this rank's share
  // (B,T,V/size) under tensor parallelism. Under sequence parallelism x is
  // this rank's positions, and the logits are every position's.
  torch::Tensor Head(const torch::Tensor& x) {
    return group_ ? ColumnParallel(x, {lm_head_}, group_)[0] : Project(lm_head_, x);
  }

  // Forward: {hidden (B,T,C) in the parameters' dtype, attention_mask (B,T)
  // int64} from the previous stage; backward: the gradient of hidden (B,T,C).
  // Under sequence parallelism the hidden state is this rank's T / size
  // positions (the mask stays whole).
  MessageSpec ReceivedSpec(bool forward, int64_t rows, int64_t seq_len) const {
    if (forward ? first_ : last_) return {};  // the first stage reads data; the last one starts from the loss
    const c10::ScalarType dtype = cos_.scalar_type();
    const int64_t positions = tp_.Sequence() ? seq_len / tp_.size : seq_len;
    MessageSpec spec = {{dtype, {rows, positions, config_.hidden_size}}};
    if (forward) spec.push_back({c10::ScalarType::Long, {rows, seq_len}});
    return spec;
  }

  std::vector<std::pair<std::string, at::Tensor>> NamedParameters() {
    std::vector<std::pair<std::string, at::Tensor>> out;
    for (auto& item : named_parameters()) out.emplace_back(item.key(), item.value());
    return out;
  }

 private:
  LlamaConfig config_;
  bool first_, last_;
  bool sdpa_, padding_;
  TensorParallel tp_;
  GroupRef group_;  // the group under tensor parallelism, else null
  torch::nn::Embedding embed_tokens_{nullptr};
  std::vector<DecoderLayer> layers_;
  RMSNorm norm_{nullptr};
  torch::nn::Linear lm_head_{nullptr};
  torch::Tensor cos_, signed_sin_;  // the rotary tables (RotaryQueryKey)
};

// The executor's view of a Llama stage.
class LlamaStage : public Stage {
 public:
  explicit LlamaStage(std::shared_ptr<LlamaStageImpl> module) : module_(std::move(module)) {}
  const std::shared_ptr<LlamaStageImpl>& Module() const { return module_; }
  TensorList Forward(const TensorList& inputs) override { return module_->Forward(inputs); }
  std::vector<std::pair<std::string, at::Tensor>> NamedParameters() override { return module_->NamedParameters(); }
  MessageSpec ReceivedSpec(bool forward, int64_t rows, int64_t seq_len) const override {
    return module_->ReceivedSpec(forward, rows, seq_len);
  }

 private:
  std::shared_ptr<LlamaStageImpl> module_;
};

// Decoding with one KvSlot per layer (LlamaDecoder).
class CachedDecoder : public LlamaDecoder {
 public:
  explicit CachedDecoder(std::shared_ptr<LlamaStageImpl> module) : module_(std::move(module)) {}
  at::Tensor Next(const at::Tensor& tokens) override { return module_->Decode(tokens, cache_); }
  int64_t Length() const override { return cache_.empty() || !cache_[0].k.defined() ? 0 : cache_[0].k.size(2); }
  void Reset() override { cache_.clear(); }

 private:
  std::shared_ptr<LlamaStageImpl> module_;
  std::vector<KvSlot> cache_;
};

}  // namespace

std::unique_ptr<LlamaDecoder> MakeLlamaDecoder(Stage& stage) {
  auto* llama = dynamic_cast<LlamaStage*>(&stage);
  if (llama == nullptr) throw Error("llama: decoding needs a stage built by BuildLlamaStage");
  return std::make_unique<CachedDecoder>(llama->Module());
}

bool SdpaAvailable() {
#ifdef PPLAB_HAS_SDPA
  return true;
#else
  return false;
#endif
}

AttentionKind ResolveAttention(AttentionKind kind) {
  if (kind == AttentionKind::kAuto) return SdpaAvailable() ? AttentionKind::kSdpa : AttentionKind::kExplicit;
  if (kind == AttentionKind::kSdpa && !SdpaAvailable()) {
    throw Error(std::string("--attention sdpa needs at::scaled_dot_product_attention (LibTorch 2.0 or later); this "
                            "LibTorch is ") +
                TORCH_VERSION + ": use --attention auto or explicit");
  }
  return kind;
}

std::unique_ptr<Stage> BuildLlamaStage(const LlamaConfig& config, const Partition& partition, int stage, uint64_t seed,
                                       const c10::Device& device, const LlamaOptions& options) {
  config.Check("model config");
  if (stage < 0 || stage >= partition.NumStages()) {
    throw Error("llama: no stage " + std::to_string(stage) + " in a " + std::to_string(partition.NumStages()) +
                "-stage partition");
  }
  auto module = std::make_shared<LlamaStageImpl>(config, partition, stage, options);
  // Every parameter comes from the files where they are given (drawing the
  // seed's values first would cost a large model's start-up for nothing).
  if (options.weights != nullptr) {
    module->LoadWeights(*options.weights);
  } else {
    module->Initialise(seed);
  }
  module->to(device);
  return std::make_unique<LlamaStage>(std::move(module));
}

}  // namespace pplab
