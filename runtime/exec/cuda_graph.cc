// The CUDA-graph backend of graphed stages (compiled only in CUDA builds).
// Work is warmed up and captured on one side stream of the backend's, which
// waits for the current stream, which then waits for it; replays run on the
// current stream. Warm-up and capture share that stream so that what
// LibTorch sets up lazily per stream (cuBLAS's workspace) is set up by the
// warm-up, outside any graph's pool, and not inside the first capture.
// Captures are thread-local: other threads (the NCCL watchdog, pplab's host
// watch and clock) may query events while one runs.
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>

#include "runtime/comm/cuda_event.h"
#include "runtime/exec/graphed_stage.h"
#include "schedules/error.h"

namespace pplab {
namespace {

class CudaCapture final : public GraphCapture {
 public:
  void Replay() override { graph.replay(); }
  std::optional<Bytes> PoolBytes() const override { return pool_bytes; }
  at::cuda::CUDAGraph graph;
  c10::MempoolId_t pool{0, 0};  // the graph's memory pool, once captured
  Bytes pool_bytes = 0;
};

// The caching allocator's reserved bytes on `device`: a capture's pool takes
// its segments afresh, so their growth over a capture is what the pool took.
Bytes ReservedBytes(c10::DeviceIndex device) {
  return static_cast<Bytes>(c10::cuda::CUDACachingAllocator::getDeviceStats(device).reserved_bytes[0].current);
}

class CudaGraphBackend final : public GraphBackend {
 public:
  explicit CudaGraphBackend(int device)
      : device_(static_cast<c10::DeviceIndex>(device)),
        side_(c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device_)) {}

  void WarmUp(const std::function<void()>& work) override {
    OnSideStream([&](const c10::cuda::CUDAStream&) { work(); });
  }

  std::unique_ptr<GraphCapture> Capture(const std::function<void()>& work, const GraphCapture* share_pool) override {
    auto capture = std::make_unique<CudaCapture>();
    const c10::MempoolId_t pool =
        share_pool != nullptr ? static_cast<const CudaCapture*>(share_pool)->pool : c10::MempoolId_t{0, 0};
    const Bytes reserved = ReservedBytes(device_);
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
    capture->pool_bytes = std::max<Bytes>(0, ReservedBytes(device_) - reserved);
    return capture;
  }

 private:
  void OnSideStream(const std::function<void(const c10::cuda::CUDAStream&)>& run) {
    c10::cuda::CUDAGuard device(device_);
    const c10::cuda::CUDAStream current = c10::cuda::getCurrentCUDAStream(device_);
    CudaEvent ready;
    ready.record(current);
    ready.block(side_);
    {
      c10::cuda::CUDAStreamGuard on_side(side_);
      run(side_);
    }
    CudaEvent done;
    done.record(side_);
    done.block(current);
  }

  c10::DeviceIndex device_;
  c10::cuda::CUDAStream side_;
};

}  // namespace

bool CudaGraphsBuilt() { return true; }

std::unique_ptr<GraphBackend> MakeCudaGraphBackend(int device_index) {
  if (device_index < 0) throw Error("CUDA graphs: no CUDA device index given");
  return std::make_unique<CudaGraphBackend>(device_index);
}

}  // namespace pplab
