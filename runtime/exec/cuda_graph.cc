// The CUDA-graph backend of graphed stages (compiled only in CUDA builds).
// Work is warmed up and captured on a side stream that waits for the
// current one, which then waits for it; replays run on the current stream.
// Captures are thread-local: other threads (the NCCL watchdog, pplab's host
// watch and clock) may query events while one runs.
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <memory>
#include <string>

#include "runtime/comm/cuda_event.h"
#include "runtime/exec/graphed_stage.h"
#include "schedules/error.h"

namespace pplab {
namespace {

class CudaCapture final : public GraphCapture {
 public:
  void Replay() override { graph.replay(); }
  at::cuda::CUDAGraph graph;
  c10::MempoolId_t pool{0, 0};  // the graph's memory pool, once captured
};

class CudaGraphBackend final : public GraphBackend {
 public:
  explicit CudaGraphBackend(int device) : device_(static_cast<c10::DeviceIndex>(device)) {}

  void WarmUp(const std::function<void()>& work) override {
    OnSideStream([&](const c10::cuda::CUDAStream&) { work(); });
  }

  std::unique_ptr<GraphCapture> Capture(const std::function<void()>& work, const GraphCapture* share_pool) override {
    auto capture = std::make_unique<CudaCapture>();
    const c10::MempoolId_t pool =
        share_pool != nullptr ? static_cast<const CudaCapture*>(share_pool)->pool : c10::MempoolId_t{0, 0};
    OnSideStream([&](const c10::cuda::CUDAStream&) {
      capture->graph.capture_begin(pool, cudaStreamCaptureModeThreadLocal);
      try {
        work();
      } catch (...) {
        try {
          capture->graph.capture_end();
        } catch (...) {
        }
        throw;
      }
      capture->graph.capture_end();
    });
    capture->pool = capture->graph.pool();
    return capture;
  }

 private:
  void OnSideStream(const std::function<void(const c10::cuda::CUDAStream&)>& run) {
    c10::cuda::CUDAGuard device(device_);
    const c10::cuda::CUDAStream current = c10::cuda::getCurrentCUDAStream(device_);
    const c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device_);
    CudaEvent ready;
    ready.record(current);
    ready.block(side);
    {
      c10::cuda::CUDAStreamGuard on_side(side);
      run(side);
    }
    CudaEvent done;
    done.record(side);
    done.block(current);
  }

  c10::DeviceIndex device_;
};

}  // namespace

bool CudaGraphsBuilt() { return true; }

std::unique_ptr<GraphBackend> MakeCudaGraphBackend(int device_index) {
  if (device_index < 0) throw Error("CUDA graphs: no CUDA device index given");
  return std::make_unique<CudaGraphBackend>(device_index);
}

}  // namespace pplab
