#include "models/llama.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/autocast_mode.h>
#include <torch/torch.h>
#include <torch/version.h>

#include <cmath>

#include "models/pretrained.h"
#include "runtime/exec/autocast.h"
#include "runtime/exec/weight_grads.h"
#include "schedules/error.h"

// at::scaled_dot_product_attention came in LibTorch 2.0, its enable_gqa
// argument (K/V with fewer heads than Q, not repeated) in 2.5.
#if TORCH_VERSION_MAJOR >= 2
#define PPLAB_HAS_SDPA 1
#endif
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 5)
#define PPLAB_HAS_SDPA_GQA 1
#endif
// at::rms_norm came in LibTorch 2.4; on CUDA, later versions run it as one
// fused kernel forward and one backward (_fused_rms_norm).
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
#define PPLAB_HAS_RMS_NORM 1
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

// `t` in `dtype` through autocast's cache: t itself when it is already in
// it (or undefined).
torch::Tensor CachedCast(const torch::Tensor& t, c10::ScalarType dtype, c10::DeviceType device) {
  return !t.defined() || t.scalar_type() == dtype ? t : at::autocast::cached_cast(dtype, t, device);
}

// Tensor parallelism's two operators (Megatron-LM's f and g): where a split
// region starts, the input passes as it is and its gradient is summed over
// the group (fused with the projections there, ColumnProjections); where it
// ends, the partial outputs are summed and the gradient passes as it is.
// The group, with this rank's place in it, travels through the autograd
// context in a capsule.
struct GroupHolder : torch::CustomClassHolder {
  GroupHolder(std::shared_ptr<TensorParallelComm> c, const TensorParallel& t) : comm(std::move(c)), tp(t) {}
  std::shared_ptr<TensorParallelComm> comm;
  TensorParallel tp;
};
using GroupRef = c10::intrusive_ptr<GroupHolder>;

void KeepGroup(torch::autograd::AutogradContext* ctx, const GroupRef& group) {
  ctx->saved_data["group"] = c10::IValue::make_capsule(group);
}
GroupRef GroupRefOf(torch::autograd::AutogradContext* ctx) {
  return c10::static_intrusive_pointer_cast<GroupHolder>(ctx->saved_data["group"].toCapsule());
}
GroupHolder& GroupOf(torch::autograd::AutogradContext* ctx) { return *GroupRefOf(ctx); }

// A forward's projection weights, into whose gradients its backward
// accumulates, and where it defers their products, if anywhere
// (runtime/exec/weight_grads.h).
struct WeightsHolder : torch::CustomClassHolder {
  WeightsHolder(std::vector<torch::Tensor> w, std::shared_ptr<DeferredWeightGrads> t)
      : weights(std::move(w)), defer_to(std::move(t)) {}
  std::vector<torch::Tensor> weights;
  std::shared_ptr<DeferredWeightGrads> defer_to;
};
WeightsHolder& WeightsOf(torch::autograd::AutogradContext* ctx) {
  return *static_cast<WeightsHolder*>(ctx->saved_data["weights"].toCapsule().get());
}

// `a` and `b`, laid out alike, as one view of their storage where `b`
// continues `a` along `dim` (the same strides, every other size the same,
// b's first element where a's dimension `dim` would go on); undefined
// otherwise.
torch::Tensor ContinuedAlong(const torch::Tensor& a, const torch::Tensor& b, int64_t dim) {
  if (!a.defined() || !b.defined() || a.dim() != b.dim() || a.scalar_type() != b.scalar_type() ||
      a.device() != b.device() || a.storage().unsafeGetStorageImpl() != b.storage().unsafeGetStorageImpl() ||
      a.strides() != b.strides()) {
    return {};
  }
  if (dim < 0) dim += a.dim();
  if (b.storage_offset() != a.storage_offset() + a.size(dim) * a.stride(dim)) return {};
  std::vector<int64_t> sizes = a.sizes().vec();
  for (int64_t d = 0; d < a.dim(); ++d) {
    if (d != dim && b.size(d) != sizes[d]) return {};
  }
  sizes[dim] += b.size(dim);
  return a.as_strided(sizes, a.strides());
}

// `parts`, each continuing the one before along `dim` (ContinuedAlong), as
// one view of their storage: a flat buffer's weights or gradients of one
// module's projections along their rows (runtime/train/flat_params.h),
// SwiGlu's gradients along their last dimension; undefined otherwise, and
// for fewer than two.
torch::Tensor EndToEnd(const std::vector<torch::Tensor>& parts, int64_t dim) {
  if (parts.size() < 2) return {};
  torch::Tensor joined = parts[0];
  for (size_t i = 1; i < parts.size() && joined.defined(); ++i) joined = ContinuedAlong(joined, parts[i], dim);
  return joined;
}

// grad += g^T x (g: (N, out), x: (N, in)). Where all three share its dtype
// (fp32), the product is summed into it by the matrix product itself (beta
// = 1, as Megatron-LM's gradient accumulation fusion does): no product
// tensor, no separate sum. Otherwise (bf16 operands) the product is added,
// which promotes it exactly, as a cast first would.
void AccumulateInto(torch::Tensor& grad, const torch::Tensor& g, const torch::Tensor& x) {
  if (g.scalar_type() == grad.scalar_type() && x.scalar_type() == grad.scalar_type()) {
    grad.addmm_(g.t(), x);
  } else {
    grad.add_(g.t().mm(x));
  }
}

// The weights' gradients of projections of one input x (N, in), from their
// output gradients side by side in g (N, sum of the outputs), weight i's
// at columns [columns[i], columns[i] + rows of weight i): accumulated by
// the projections themselves rather than by autograd. Where the gradients
// lie end to end (a flat buffer's), one product sums into all of them;
// otherwise each its own.
void AccumulateWeightGrads(const std::vector<torch::Tensor>& weights, const std::vector<int64_t>& columns,
                           const torch::Tensor& g, const torch::Tensor& x) {
  std::vector<torch::Tensor> grads;
  bool whole = columns.size() == weights.size();
  for (size_t i = 0; i < weights.size() && whole; ++i) {
    whole = columns[i] == (i == 0 ? 0 : columns[i - 1] + weights[i - 1].size(0));
    grads.push_back(weights[i].grad());
  }
  torch::Tensor stacked = whole && columns.size() > 1 && columns.back() + weights.back().size(0) == g.size(1)
                              ? EndToEnd(grads, 0)
                              : torch::Tensor();
  if (stacked.defined()) {
    AccumulateInto(stacked, g, x);
    return;
  }
  for (size_t i = 0; i < weights.size(); ++i) {
    const torch::Tensor gi = g.narrow(1, columns[i], weights[i].size(0));
    torch::Tensor& grad = weights[i].mutable_grad();
    if (grad.defined()) {
      AccumulateInto(grad, gi, x);
    } else {
      grad = gi.t().mm(x).to(weights[i].scalar_type());
    }
  }
}

// Summed over the group, in a new contiguous tensor.
torch::Tensor SummedCopy(const torch::Tensor& x, TensorParallelComm& comm) {
  torch::Tensor sum = x.clone(at::MemoryFormat::Contiguous);
  comm.AllReduceSum(sum);
  return sum;
}

struct LeaveSplitRegion : torch::autograd::Function<LeaveSplitRegion> {
  static torch::Tensor forward(torch::autograd::AutogradContext* /*ctx*/, const torch::Tensor& partial,
                               const GroupRef& group) {
    return SummedCopy(partial, *group->comm);
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* /*ctx*/,
                                               torch::autograd::tensor_list grads) {
    return {grads[0], torch::Tensor()};
  }
};

// Sequence parallelism's operators, on (B, S, C) tensors of which each rank
// holds positions [t S/T, (t+1) S/T) outside the split regions.
constexpr int64_t kPositions = 1;

// A split region's exit: the partial outputs summed, each rank keeping its
// positions (a reduce-scatter); their gradient is gathered.
struct ReduceScatterPositions : torch::autograd::Function<ReduceScatterPositions> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& partial,
                               const GroupRef& group) {
    KeepGroup(ctx, group);
    return group->comm->ReduceScatter(partial, kPositions);
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    return {GroupOf(ctx).comm->AllGather(grads[0], kPositions), torch::Tensor()};
  }
};

// A split region's entry fused with the column-parallel projections that
// read it: x times each weight (plus its bias, when `biases` is not empty);
// without a group (no tensor parallelism), just those projections.
// Without sequence parallelism x passes as it is and its gradient is summed
// over the group (Megatron-LM's f); with it, x is this rank's positions,
// gathered to every position, and its gradient is reduce-scattered. Only x
// is kept for the backward, once, in the dtype the matmuls ran in (bf16
// under autocast), not the gathered tensor T times its size: the backward
// gathers it again for the weights' gradients. Each gradient is computed
// only when the backward pass asks for it. When the forward ran for a split
// backward (a DeferWeightGradsScope), the weights' products are left to its
// W pass, which gathers x again under sequence parallelism; the biases'
// sums are cheap and are made at once.
//
// The backward overlaps its collectives with its matmuls, as Megatron-LM
// does: the gather for the weights' gradients starts first and runs while
// the input's gradient is computed; the input's gradient's sum starts next
// and runs while the weights' gradients are (on NCCL on the communicator's
// stream, on Gloo in its threads). It waits only where a result is needed.
//
// Weights that lie end to end, as a flat buffer holds one module's
// projections (q, k, v; gate, up), are one matrix: the forward is one
// product where they need no cast, and the backward's products are one
// each for the input's gradient and the weights' (into their gradients,
// end to end too): fewer, larger kernels. Elsewhere each weight is its own
// product.
struct ColumnProjections : torch::autograd::Function<ColumnProjections> {
  // The weights and biases come as TensorLists, which autograd takes apart
  // (one gradient edge each); a std::vector argument would be opaque to it.
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                                                at::TensorList weights, at::TensorList biases, const GroupRef& group) {
    if (group) KeepGroup(ctx, group);
    ctx->saved_data["split"] = static_cast<bool>(group);
    ctx->saved_data["weights"] =
        c10::IValue::make_capsule(c10::make_intrusive<WeightsHolder>(weights.vec(), DeferWeightGradsScope::Current()));
    const c10::DeviceType device = x.device().type();
    const c10::ScalarType dtype = AutocastComputeDtype(device, x.scalar_type());
    // Weights in the matmuls' dtype through autocast's cache (why: Project):
    // once a step inside an AutocastCacheScope, not once a microbatch. The
    // backward uses the same casts. Weights end to end are cast as one
    // matrix, once a scope too (CachedStackedCast).
    torch::Tensor stacked = biases.empty() ? EndToEnd(weights.vec(), 0) : torch::Tensor();
    if (stacked.defined() && stacked.scalar_type() != dtype) stacked = CachedStackedCast(stacked, dtype);
    const torch::Tensor mine = x.to(dtype).contiguous();
    const torch::Tensor all = group && group->tp.Sequence() ? group->comm->AllGather(mine, kPositions) : mine;
    torch::autograd::variable_list out, saved = {mine};
    if (stacked.defined()) {
      saved.push_back(stacked);
      const torch::Tensor y = torch::nn::functional::linear(all, stacked);
      int64_t column = 0;
      for (const torch::Tensor& w : weights) {
        out.push_back(y.narrow(-1, column, w.size(0)));
        column += w.size(0);
      }
    } else {
      for (size_t i = 0; i < weights.size(); ++i) {
        saved.push_back(CachedCast(weights[i], dtype, device));
        out.push_back(torch::nn::functional::linear(
            all, saved.back(), biases.empty() ? torch::Tensor() : CachedCast(biases[i], dtype, device)));
      }
    }
    ctx->save_for_backward(saved);
    ctx->saved_data["stacked"] = stacked.defined();
    ctx->saved_data["input_dtype"] = x.scalar_type();
    ctx->saved_data["biases"] = static_cast<int64_t>(biases.size());
    return out;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    GroupHolder* group = ctx->saved_data["split"].toBool() ? &GroupOf(ctx) : nullptr;
    const bool sequence = group != nullptr && group->tp.Sequence();
    const bool stacked = ctx->saved_data["stacked"].toBool();
    const torch::autograd::variable_list saved = ctx->get_saved_variables();
    const torch::Tensor& mine = saved[0];
    const WeightsHolder& held = WeightsOf(ctx);
    const size_t n = held.weights.size();
    const size_t biases = static_cast<size_t>(ctx->saved_data["biases"].toInt());
    const c10::ScalarType dtype = mine.scalar_type();
    const c10::ScalarType input_dtype = ctx->saved_data["input_dtype"].toScalarType();
    const c10::ScalarType weight_dtype = held.weights[0].scalar_type();
    bool weight_grads = false;
    for (size_t i = 0; i < n; ++i) weight_grads = weight_grads || ctx->needs_input_grad(1 + i);
    const bool defer = weight_grads && held.defer_to != nullptr;
    std::unique_ptr<StartedCollective> gathered;  // every position, for the weights' gradients
    if (sequence && weight_grads && !defer) gathered = group->comm->StartAllGather(mine, kPositions);
    // The output gradients side by side, (N, sum of the outputs), in the
    // matmuls' dtype, and where each weight's start.
    std::vector<torch::Tensor> rows;
    std::vector<int64_t> columns;
    int64_t width = 0;
    for (size_t i = 0; i < n; ++i) {
      rows.push_back(grads[i].to(dtype).reshape({-1, grads[i].size(-1)}));
      columns.push_back(width);
      width += grads[i].size(-1);
    }
    const torch::Tensor side_by_side = EndToEnd(grads, -1);
    const torch::Tensor g_all = n == 1                   ? rows[0]
                                : side_by_side.defined() ? side_by_side.to(dtype).reshape({-1, width})
                                                         : torch::cat(rows, 1);
    // x, weights, biases, the group; the weights' gradients are accumulated
    // here (AccumulateWeightGrads), so their entries stay undefined.
    torch::autograd::variable_list out(1 + n + biases + 1);
    std::unique_ptr<StartedCollective> summed;
    if (ctx->needs_input_grad(0)) {
      // The input's gradient, summed over the projections and the group in
      // the input's dtype (fp32), as autograd sums the plain layers'.
      torch::Tensor g;
      if (stacked) {
        std::vector<int64_t> shape = grads[0].sizes().vec();
        shape.back() = saved[1].size(1);
        g = g_all.mm(saved[1]).view(shape).to(input_dtype);
      } else {
        for (size_t i = 0; i < n; ++i) {
          const torch::Tensor gi = torch::matmul(grads[i].to(dtype), saved[1 + i]).to(input_dtype);
          g = g.defined() ? g + gi : gi;
        }
      }
      if (group == nullptr) {
        out[0] = g;
      } else {
        summed = sequence ? group->comm->StartReduceScatter(g, kPositions) : group->comm->StartAllReduceSum(g);
      }
    }
    std::vector<torch::Tensor> weight_of;  // the weights whose products to make, and their columns in g_all
    std::vector<int64_t> column_of;
    for (size_t i = 0; i < n; ++i) {
      if (ctx->needs_input_grad(1 + i)) {
        weight_of.push_back(held.weights[i]);
        column_of.push_back(columns[i]);
      }
      if (i < biases && ctx->needs_input_grad(1 + n + i)) out[1 + n + i] = rows[i].sum(0).to(weight_dtype);
    }
    if (defer) {
      const GroupRef gather = sequence ? GroupRefOf(ctx) : GroupRef();
      // Under sequence parallelism the input's gather starts ahead, while the
      // previous piece's products run (DeferredWeightGrads::Run).
      held.defer_to->Add(DeferredWeightGrads::Piece([weights = std::move(weight_of), columns = std::move(column_of),
                                                     g_all, mine, gather]() -> std::function<void()> {
        std::shared_ptr<StartedCollective> gathering;
        if (gather) gathering = gather->comm->StartAllGather(mine, kPositions);
        return [weights, columns, g_all, mine, gathering] {
          torch::NoGradGuard no_graph;
          const torch::Tensor x = gathering ? gathering->Wait() : mine;
          AccumulateWeightGrads(weights, columns, g_all, x.reshape({-1, x.size(-1)}));
        };
      }));
    } else if (!weight_of.empty()) {
      torch::NoGradGuard no_graph;
      const torch::Tensor all = gathered ? gathered->Wait() : mine;
      AccumulateWeightGrads(weight_of, column_of, g_all, all.reshape({-1, all.size(-1)}));
    }
    if (summed) out[0] = summed->Wait();
    return out;
  }
};

// `weight` (and `bias`) of a linear layer as x (..., in) -> (..., out): the
// one projection of a ColumnProjections without a group, so that its
// weight's gradient can wait for a split backward's W. Under autocast the
// weight is cast there, through autocast's cache, and not by autocast
// inside linear: LibTorch's linear hands autocast the transposed weight, a
// view, which it never caches (so on the CPU with 1.13 and 2.6, and on CUDA
// with 2.11, as measured on an H100 on 2026-11-27, every microbatch cast
// every weight again). Cast there, the casts of a step's microbatches are
// one inside an AutocastCacheScope. The values and the gradients are the
// same: casting and transposing commute.
torch::Tensor Project(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias = {}) {
  const std::vector<torch::Tensor> biases =
      bias.defined() ? std::vector<torch::Tensor>{bias} : std::vector<torch::Tensor>{};
  return ColumnProjections::apply(x, at::TensorList(weight), at::TensorList(biases), GroupRef())[0];
}
torch::Tensor Project(const torch::nn::Linear& layer, const torch::Tensor& x) {
  return Project(x, layer->weight, layer->bias);
}

// A projection whose output the group sums (row-parallel): x (..., in / T)
// -> (..., out), with its bias, held whole, added once after the sum; under
// sequence parallelism the sum is reduce-scattered over the positions.
// Without a group, the plain linear layer.
torch::Tensor RowParallel(torch::nn::Linear proj, const torch::Tensor& x, const GroupRef& group) {
  if (!group) return Project(proj, x);
  const torch::Tensor partial = Project(x, proj->weight);
  const torch::Tensor y =
      group->tp.Sequence() ? ReduceScatterPositions::apply(partial, group) : LeaveSplitRegion::apply(partial, group);
  return proj->bias.defined() ? y + proj->bias : y;
}
// Column-parallel projections of x, the start of a split region: with
// sequence parallelism x is this rank's positions and the outputs have
// every position. Without a group, the same linear layers of one input
// (ColumnProjections with no collective: under bf16 autocast the input is
// cast and kept once, not once a projection as separate linear layers
// would).
torch::autograd::variable_list ColumnParallel(const torch::Tensor& x, std::vector<torch::nn::Linear> projections,
                                              const GroupRef& group) {
  torch::autograd::variable_list weights, biases;
  for (const auto& p : projections) {
    weights.push_back(p->weight);
    if (p->bias.defined()) biases.push_back(p->bias);
  }
  if (!biases.empty() && biases.size() != weights.size()) throw Error("llama: projections with and without bias");
  return ColumnProjections::apply(x, at::TensorList(weights), at::TensorList(biases), group);
}

// A split region's sizes on one rank of `tp`.
int64_t Share(int64_t whole, const TensorParallel& tp) { return whole / tp.size; }

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

// K/V heads repeated for grouped-query attention: (B,KV,T,hd) -> (B,H,T,hd),
// each KV head serving `groups` = H/KV consecutive query heads.
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
  // x (B,T,C), cos/signed_sin (T,hd) (Rotary's tables), bias (B,1,T,T)
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
    const auto rotated = RotaryPair::apply(q, k, cos, signed_sin);
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
    // one tensor (RotaryPair): where k is repeated (a copy), q would keep the
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
    return RowParallel(down_proj, SwiGlu::apply(gate_up[0], gate_up[1]), group);
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
    // The sine with its first half negated, as Rotary takes it.
    const int64_t half = emb.size(-1) / 2;
    signed_sin_ = register_buffer(
        "rope_signed_sin",
        torch::cat({-emb.narrow(-1, 0, half).sin(), emb.narrow(-1, half, half).sin()}, -1).to(torch::kFloat32));
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
    torch::Tensor bias;  // undefined: causal only (SDPA, no padding)
    if (sdpa_ && !padding_) {
      if (mask.device().is_cpu() && !mask.all().item<bool>()) {
        throw Error("llama stage: attention_mask has padding, but the stage was built for batches without padding");
      }
    } else {
      // Additive bias (B,1,T,T): causal, and padding keys hidden. A large finite
      // negative instead of -inf keeps fully masked rows (leading padding) finite
      // on every path (SDPA's kernels give NaN or 0 for rows masked with -inf).
      auto causal = torch::ones({T, T}, torch::TensorOptions().dtype(torch::kBool).device(x.device())).tril();
      auto allowed = causal.unsqueeze(0) & mask.to(torch::kBool).unsqueeze(1);  // (B,T,T)
      bias = torch::zeros(allowed.sizes(), x.options()).masked_fill(allowed.logical_not(), -1e9).unsqueeze(1);
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
    return tp_.Sequence() ? ReduceScatterPositions::apply(partial, group_) : LeaveSplitRegion::apply(partial, group_);
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
  torch::Tensor cos_, signed_sin_;  // the rotary tables (Rotary)
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
  const int64_t half = x.size(-1) / 2;
  if (fused) return Rotary::apply(x, cos, torch::cat({-sin.narrow(-1, 0, half), sin.narrow(-1, half, half)}, -1));
  return x * cos + torch::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1) * sin;
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

namespace {

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
