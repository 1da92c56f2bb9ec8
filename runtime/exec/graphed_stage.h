// Graphed stages: a stage's forward and backward captured once and replayed
// for every microbatch (CUDA graphs, `pplab train --cuda-graphs`), so that
// the host launches one graph where eager execution launches each kernel.
//
// A replay writes into the memory its capture used. A stage's activations
// live from its F to its B, and a pipeline holds several microbatches
// between the two (one per stage at K=1 under 1F1B, M under GPipe), so each
// microbatch in flight needs its own capture: a "slot", the forward's and
// the backward's graphs over one memory pool with the static tensors they
// read and write. An F takes a free slot (capturing a new one when none is
// free), copies its inputs into the slot's, replays the forward, and hands
// the slot's outputs on; its B copies the output gradients in, replays the
// backward, and frees the slot. The parameters' gradients go through
// autograd to their .grad as an eager backward's would; the inputs'
// gradients are copied out, because the next forward replayed in the slot
// may write over the memory the backward left them in before a send has
// read them. Slots are kept per shape of the inputs.
//
// What runs eagerly instead: a forward without autograd (evaluation, or a
// stage recomputed in its B), and a forward whose weight products are
// deferred to a W (zero-bubble's I and W split the backward, which a
// captured backward cannot). `pplab train` refuses those plans with
// --cuda-graphs rather than run them half graphed.
//
// The parameters' gradients: a stage may sum some of them into .grad
// inside its backward (the Llama stages' projections do), which a replay
// then writes where .grad was at the capture. So every trained parameter
// has its .grad from the first capture on, and it must stay there, zeroed
// in place (flat buffers, AdamW::ZeroGrad); a backward whose parameter's
// .grad has moved throws rather than write elsewhere.
//
// The stage's forward must issue the same device work for every microbatch
// of a shape, with no host read and no host-to-device copy (a capture
// fails on those). Under bf16 each capture casts its own weights: the
// warm-up and the captures run with every cache of casts off
// (AutocastCacheOff), and a training run's executor does not share casts
// across microbatches (ExecutorOptions::share_weight_casts).
#pragma once

#include <functional>
#include <memory>
#include <optional>

#include "runtime/exec/stage.h"
#include "schedules/units.h"

namespace pplab {

// One captured piece of device work.
class GraphCapture {
 public:
  virtual ~GraphCapture() = default;
  // Runs the captured work again on the current stream.
  virtual void Replay() = 0;
  // The device memory the capture's pool took while the work was captured
  // (CUDA graphs: the growth of the caching allocator's reserved bytes),
  // which the graph keeps for its lifetime: the tensors the work left and
  // its temporaries. Unset where a capture has no pool (the stand-in): the
  // graphed stage then counts the tensors the work left.
  virtual std::optional<Bytes> PoolBytes() const { return std::nullopt; }
};

// How work is captured: CUDA graphs on a GPU (MakeCudaGraphBackend), or a
// stand-in whose replay runs the work again (MakeRerunGraphBackend).
class GraphBackend {
 public:
  virtual ~GraphBackend() = default;
  // Runs `work` once without capturing it (lazy initialisation, kernel
  // choices), as a capture's work will run.
  virtual void WarmUp(const std::function<void()>& work) = 0;
  // Captures the device work `work` issues. With `share_pool`, the capture
  // allocates from that capture's memory pool (a slot's backward shares its
  // forward's), else from a pool of its own.
  virtual std::unique_ptr<GraphCapture> Capture(const std::function<void()>& work, const GraphCapture* share_pool) = 0;
};

// CUDA graphs on `device` (a CUDA device), captured on a side stream in
// thread-local mode (the NCCL watchdog and pplab's own threads query events
// meanwhile). Throws pplab::Error where this pplab was built without CUDA.
std::unique_ptr<GraphBackend> MakeCudaGraphBackend(int device_index);
// Whether MakeCudaGraphBackend can work in this build.
bool CudaGraphsBuilt();

// The stand-in: WarmUp runs the work, Capture runs it and returns a capture
// whose Replay runs it again. Since the work writes its results into the
// slot's static tensors, a graphed stage over it computes what it computes
// over CUDA graphs; the tests use it on the CPU.
std::unique_ptr<GraphBackend> MakeRerunGraphBackend();

// Whether PPLAB_TEST_GRAPHS=rerun is set: then `train --cuda-graphs` runs
// its graphed stages over the stand-in on any device (a test aid, so that
// the CPU suite runs the flag end to end).
bool GraphStandInRequested();

// The backend of `pplab train --cuda-graphs` and `pplab profile
// --cuda-graphs`: the stand-in where GraphStandInRequested(), else CUDA
// graphs on `device` (index 0 where it names none).
std::unique_ptr<GraphBackend> MakeGraphBackend(const c10::Device& device);

// What a graphed stage has done, for the tests and the report.
struct GraphStats {
  int slots = 0;  // slots captured (two graphs each)
  // The memory the slots hold for the stage's lifetime, summed: each
  // slot's copies of the inputs and of the output gradients, and its
  // graphs' pool (PoolBytes; over the stand-in, the outputs and gradients
  // the capture left), storages counted once.
  Bytes slot_bytes = 0;
  long forward_replays = 0;  // forwards run from a graph
  long backward_replays = 0;
  long eager_forwards = 0;  // forwards run eagerly (no autograd, or deferred weights)
};

class GraphedStage : public Stage {
 public:
  virtual GraphStats Stats() const = 0;
};

// `inner` with its forward and backward captured through `backend`.
std::unique_ptr<GraphedStage> MakeGraphedStage(std::unique_ptr<Stage> inner, std::shared_ptr<GraphBackend> backend);

}  // namespace pplab
