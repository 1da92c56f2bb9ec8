#include "runtime/train/model_copies.h"

#include <torch/torch.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "schedules/error.h"

namespace pplab {
namespace {

// Executor tags stay below 2 S M (see MessageTag); the gradients of stage
// `from` sent to its copy `to` use one above.
int64_t CopyTag(const Schedule& schedule, StageId from, StageId to) {
  const int64_t S = schedule.stages;
  return 2 * S * schedule.microbatches + from * S + to;
}

// One stage's gradients as one flat tensor (zeros for a parameter no
// microbatch reached), in parameter order.
at::Tensor FlatGradients(Stage& stage) {
  std::vector<at::Tensor> parts;
  for (auto& [name, p] : stage.NamedParameters()) {
    parts.push_back(p.grad().defined() ? p.grad().reshape({-1}) : torch::zeros({p.numel()}, p.options()));
  }
  return parts.empty() ? at::Tensor() : torch::cat(parts);
}

// The same bytes as an integer tensor of the element's width, so that no
// transport converts them (a bf16 run's wire casts float32 messages; these
// sums must stay exact and bit-identical on both ranks).
c10::ScalarType SameWidthInteger(c10::ScalarType t) {
  switch (c10::elementSize(t)) {
    case 2:
      return c10::ScalarType::Short;
    case 4:
      return c10::ScalarType::Int;
    case 8:
      return c10::ScalarType::Long;
    default:
      throw Error("model copies: gradients of dtype " + std::string(c10::toString(t)) + " cannot be sent");
  }
}

// Tags of the tied halves' gradients: above every CopyTag (< 2 S M + S^2).
int64_t TiedTag(const Schedule& schedule, StageId from, StageId to) {
  const int64_t S = schedule.stages;
  return 2 * S * schedule.microbatches + S * S + from * S + to;
}

// The gradient of stage `stage`'s parameter `name` (zeros where no
// microbatch reached it, set as its gradient).
at::Tensor GradientOf(Stage& stage, const std::string& name, StageId id) {
  for (auto& [n, p] : stage.NamedParameters()) {
    if (n != name) continue;
    if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
    return p.grad();
  }
  throw Error("tied embeddings: stage " + std::to_string(id) + " has no parameter " + name);
}

}  // namespace

std::vector<RankId> TiedPeers(const Schedule& schedule, RankId rank) {
  std::vector<RankId> peers;
  for (const auto& [first, last] : schedule.PipelineEnds()) {
    const RankId a = schedule.placement[first], b = schedule.placement[last];
    if (a == rank && b != rank) peers.push_back(b);
    if (b == rank && a != rank) peers.push_back(a);
  }
  return peers;
}

void SumTiedGradients(const Schedule& schedule, RankId rank, const std::map<StageId, Stage*>& stages,
                      Transport& transport, std::chrono::milliseconds timeout, const std::string& first_name,
                      const std::string& last_name) {
  torch::NoGradGuard no_grad;
  struct Half {
    StageId own, other;
    at::Tensor grad;  // this rank's half's gradient
  };
  std::vector<Half> remote;                              // pairs split over two ranks, in pipeline order
  std::vector<std::pair<at::Tensor, at::Tensor>> local;  // (first's, last's) where both are here
  for (const auto& [first, last] : schedule.PipelineEnds()) {
    const bool has_first = stages.count(first) > 0, has_last = stages.count(last) > 0;
    if (has_first && has_last) {
      local.emplace_back(GradientOf(*stages.at(first), first_name, first),
                         GradientOf(*stages.at(last), last_name, last));
    } else if (has_first) {
      remote.push_back({first, last, GradientOf(*stages.at(first), first_name, first)});
    } else if (has_last) {
      remote.push_back({last, first, GradientOf(*stages.at(last), last_name, last)});
    }
  }
  // Receives posted and sends issued in pipeline order on both sides, the
  // order NCCL pairs a channel's messages in.
  for (const Half& h : remote) {
    const MessageSpec spec = {{SameWidthInteger(h.grad.scalar_type()), h.grad.sizes().vec()}};
    transport.PostRecv(schedule.placement[h.other], TiedTag(schedule, h.other, h.own), spec);
  }
  for (const Half& h : remote) {
    transport.Send(schedule.placement[h.other], TiedTag(schedule, h.own, h.other),
                   {h.grad.view(SameWidthInteger(h.grad.scalar_type()))});
  }
  // The other halves, added only once every send has left (a send may still
  // read the gradient it was given). Addition commutes exactly, so adding
  // in place gives both ranks first's + last's, bit for bit.
  std::vector<at::Tensor> others;
  for (const Half& h : remote) {
    try {
      others.push_back(transport.WaitRecv(schedule.placement[h.other], TiedTag(schedule, h.other, h.own), timeout)
                           .at(0)
                           .to(h.grad.device())
                           .view(h.grad.scalar_type()));
    } catch (const Error& e) {
      throw Error("rank " + std::to_string(rank) + " waiting for the tied embedding's gradient of stage " +
                  std::to_string(h.other) + " from rank " + std::to_string(schedule.placement[h.other]) + ": " +
                  e.what());
    }
  }
  transport.WaitSends(timeout);
  for (size_t i = 0; i < remote.size(); ++i) remote[i].grad.add_(others[i]);
  for (auto& [first, last] : local) {
    first.add_(last);
    last.copy_(first);
  }
}

std::string WhyNotOneModel(const Schedule& schedule) {
  if (schedule.NumPipelines() == 1) return "";
  if (schedule.ModelStages() == 0) {
    return "'" + schedule.name + "' has pipelines of different lengths, so they are not copies of one model";
  }
  for (StageId s = 0; s < schedule.stages; ++s) {
    for (StageId t : schedule.CopiesOf(s)) {
      if (t > s && schedule.placement[t] == schedule.placement[s]) {
        return "'" + schedule.name + "' puts stages " + std::to_string(s) + " and " + std::to_string(t) +
               ", two copies of model part " + std::to_string(schedule.ModelStage(s)) + ", both on rank " +
               std::to_string(schedule.placement[s]);
      }
    }
  }
  return "";
}

void SumCopyGradients(const Schedule& schedule, RankId rank, const std::map<StageId, Stage*>& stages,
                      Transport& transport, std::chrono::milliseconds timeout) {
  if (schedule.NumPipelines() == 1) return;
  torch::NoGradGuard no_grad;
  // Every local stage's gradients, taken before any is changed.
  std::map<StageId, at::Tensor> flat;
  for (const auto& [s, stage] : stages) flat[s] = FlatGradients(*stage);
  // NCCL pairs a channel's messages in the order they were issued, whatever
  // their tags: each rank sends in the order of (its stage, the copy's
  // stage), so it posts its receives in the order of (the sender's stage,
  // its own stage).
  std::vector<std::pair<StageId, StageId>> incoming;  // (sender's stage t, own stage s)
  for (const auto& [s, stage] : stages) {
    if (!flat[s].defined()) continue;
    for (StageId t : schedule.CopiesOf(s)) {
      if (schedule.placement[t] != rank) incoming.emplace_back(t, s);
    }
  }
  std::sort(incoming.begin(), incoming.end());
  for (const auto& [t, s] : incoming) {
    const MessageSpec spec = {{SameWidthInteger(flat[s].scalar_type()), {flat[s].numel()}}};
    transport.PostRecv(schedule.placement[t], CopyTag(schedule, t, s), spec);
  }
  for (const auto& [s, stage] : stages) {
    if (!flat[s].defined()) continue;
    for (StageId t : schedule.CopiesOf(s)) {
      if (schedule.placement[t] != rank) {
        transport.Send(schedule.placement[t], CopyTag(schedule, s, t),
                       {flat[s].view(SameWidthInteger(flat[s].scalar_type()))});
      }
    }
  }
  for (const auto& [s, stage] : stages) {
    if (!flat[s].defined()) continue;
    at::Tensor sum;
    for (StageId t : schedule.CopiesOf(s)) {
      at::Tensor part;
      if (schedule.placement[t] == rank) {
        part = flat.at(t);
      } else {
        try {
          part = transport.WaitRecv(schedule.placement[t], CopyTag(schedule, t, s), timeout)
                     .at(0)
                     .to(flat[s].device())
                     .view(flat[s].scalar_type());
        } catch (const Error& e) {
          throw Error("rank " + std::to_string(rank) + " waiting for the gradients of stage " + std::to_string(t) +
                      " (a copy of its stage " + std::to_string(s) + ") from rank " +
                      std::to_string(schedule.placement[t]) + ": " + e.what());
        }
      }
      sum = sum.defined() ? sum + part : part.clone();
    }
    int64_t offset = 0;
    for (auto& [name, p] : stage->NamedParameters()) {
      const at::Tensor g = sum.narrow(0, offset, p.numel()).view_as(p);
      if (p.grad().defined()) {
        p.mutable_grad().copy_(g);
      } else {
        p.mutable_grad() = g.clone();
      }
      offset += p.numel();
    }
  }
  transport.WaitSends(timeout);
}

}  // namespace pplab
