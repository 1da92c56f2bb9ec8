#include "models/llama.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "models/llama_layers.h"
#include "models/llama_ops.h"
#include "models/pretrained.h"
#include "models/projections.h"
#include "runtime/exec/autocast.h"
#include "schedules/error.h"

namespace pplab {
namespace {

using llama_layers::DecoderLayer;
using llama_layers::KvSlot;
using llama_layers::Linear;
using llama_layers::RMSNorm;

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

// Positions the rotary tables cover when a stage is built; a longer
// sequence grows them (LlamaStageImpl::EnsureRotary).
constexpr int64_t kFirstRotaryPositions = 4096;

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
    // Rotary tables (positions, hd) for the first positions; they grow as
    // longer sequences come (EnsureRotary).
    const auto [cos, signed_sin] = RotaryTables(std::min<int64_t>(c.max_position_embeddings, kFirstRotaryPositions));
    cos_ = register_buffer("rope_cos", cos);
    signed_sin_ = register_buffer("rope_signed_sin", signed_sin);
  }

  // The cosine and the sine with its first half negated (as RotaryQueryKey
  // takes it) of positions [0, n), fp32: (n, hd).
  std::pair<torch::Tensor, torch::Tensor> RotaryTables(int64_t n) const {
    const std::vector<double> frequencies = RotaryFrequencies(config_);  // rope_theta's, scaled as the config says
    auto inv_freq = torch::tensor(at::ArrayRef<double>(frequencies), torch::dtype(torch::kFloat64));
    auto freqs = torch::outer(torch::arange(n, torch::kFloat64), inv_freq);
    auto emb = torch::cat({freqs, freqs}, -1);
    return {emb.cos().to(torch::kFloat32), SignedSin(emb.sin()).to(torch::kFloat32)};
  }

  // Makes the rotary tables cover at least `positions` (at most
  // max_position_embeddings, checked by the callers), doubling, on their
  // device. They are not built for every position the model accepts: a
  // config's 2^30 asked for 512 GiB before the first step. In place (set_),
  // so the registered buffers, which Module::to moves, are these.
  void EnsureRotary(int64_t positions) {
    if (cos_.size(0) >= positions) return;
    int64_t n = std::max<int64_t>(cos_.size(0), 1);
    while (n < positions) n *= 2;
    n = std::min<int64_t>(n, config_.max_position_embeddings);
    torch::NoGradGuard no_grad;
    const auto [cos, signed_sin] = RotaryTables(n);
    cos_.set_(cos.to(cos_.device()));
    signed_sin_.set_(signed_sin.to(signed_sin_.device()));
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
    EnsureRotary(T);
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
    EnsureRotary(past + T);
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
