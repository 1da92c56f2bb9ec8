#include "models/projections.h"

#include <ATen/autocast_mode.h>

#include <string>

#include "runtime/exec/autocast.h"
#include "runtime/exec/weight_grads.h"
#include "schedules/error.h"

namespace pplab {

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

torch::Tensor EndToEnd(const std::vector<torch::Tensor>& parts, int64_t dim) {
  if (parts.size() < 2) return {};
  torch::Tensor joined = parts[0];
  for (size_t i = 1; i < parts.size() && joined.defined(); ++i) joined = ContinuedAlong(joined, parts[i], dim);
  return joined;
}

namespace {

// `t` in `dtype` through autocast's cache: t itself when it is already in
// it (or undefined).
torch::Tensor CachedCast(const torch::Tensor& t, c10::ScalarType dtype, c10::DeviceType device) {
  return !t.defined() || t.scalar_type() == dtype ? t : at::autocast::cached_cast(dtype, t, device);
}

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

// A split region's exit (Megatron-LM's g): the partial outputs summed over
// the group; their gradient passes as it is.
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

}  // namespace

// The one projection of a ColumnProjections without a group, so that its
// weight's gradient can wait for a split backward's W. Under autocast the
// weight is cast there, through autocast's cache, and not by autocast
// inside linear: LibTorch's linear hands autocast the transposed weight, a
// view, which it never caches (so on the CPU with 1.13 and 2.6, and on CUDA
// with 2.11, as measured on an H100 on 2026-11-27, every microbatch cast
// every weight again). Cast there, the casts of a step's microbatches are
// one inside an AutocastCacheScope. The values and the gradients are the
// same: casting and transposing commute.
torch::Tensor Project(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias) {
  const std::vector<torch::Tensor> biases =
      bias.defined() ? std::vector<torch::Tensor>{bias} : std::vector<torch::Tensor>{};
  return ColumnProjections::apply(x, at::TensorList(weight), at::TensorList(biases), GroupRef())[0];
}
torch::Tensor Project(const torch::nn::Linear& layer, const torch::Tensor& x) {
  return Project(x, layer->weight, layer->bias);
}

// Without a group this is ColumnProjections with no collective: under bf16
// autocast the input is cast and kept once, not once a projection as
// separate linear layers would.
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

torch::Tensor RowParallel(torch::nn::Linear proj, const torch::Tensor& x, const GroupRef& group) {
  if (!group) return Project(proj, x);
  const torch::Tensor y = ExitSplitRegion(Project(x, proj->weight), group);
  return proj->bias.defined() ? y + proj->bias : y;
}

torch::Tensor ExitSplitRegion(const torch::Tensor& partial, const GroupRef& group) {
  return group->tp.Sequence() ? ReduceScatterPositions::apply(partial, group) : LeaveSplitRegion::apply(partial, group);
}

}  // namespace pplab
