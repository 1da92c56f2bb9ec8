// Model FLOPs utilisation and the peak table (runtime/train/mfu.h).
#include "runtime/train/mfu.h"

#include <catch2/catch.hpp>

#include "schedules/error.h"

namespace pplab::mfu_test {
namespace {

TEST_CASE("MFU is model FLOPs over step time times the peak", "[mfu]") {
  // 1e12 FLOPs in 0.5 s on a 4 TFLOP/s device: 2 TFLOP/s achieved, half the peak.
  CHECK(Mfu(1e12, 0.5, 4) == Approx(0.5));
  // 318.9 GFLOPs (default preset, stage 0 of 2, 8 sequences of 128) in 10 ms at 989.5 TFLOP/s.
  CHECK(Mfu(318929633280.0, 0.010, 989.5) == Approx(318929633280.0 / (0.010 * 989.5e12)));
  CHECK(Mfu(1e12, 0, 4) == 0);
  CHECK(Mfu(1e12, 1, 0) == 0);
}

TEST_CASE("peak FLOP/s of known GPUs by their CUDA names, dense, per precision", "[mfu]") {
  CHECK(KnownPeak("NVIDIA H100 80GB HBM3", "bf16").tflops == 989.5);
  CHECK(KnownPeak("NVIDIA H100 80GB HBM3", "tf32").tflops == 494.5);
  CHECK(KnownPeak("NVIDIA H100 80GB HBM3", "fp32").tflops == 67);
  CHECK_THAT(KnownPeak("NVIDIA H100 80GB HBM3", "bf16").source, Catch::Contains("H100 SXM"));
  CHECK(KnownPeak("NVIDIA H100 PCIe", "bf16").tflops == 756.5);
  CHECK(KnownPeak("NVIDIA H100 NVL", "fp32").tflops == 60);
  CHECK(KnownPeak("NVIDIA H200", "bf16").tflops == 989.5);  // the H100 SXM's compute
  CHECK(KnownPeak("NVIDIA H200 NVL", "bf16").tflops == 835.5);
  CHECK_THAT(KnownPeak("NVIDIA GH200 480GB", "bf16").source, Catch::StartsWith("GH200"));
  CHECK(KnownPeak("NVIDIA A100-SXM4-80GB", "bf16").tflops == 312);
  CHECK(KnownPeak("NVIDIA A100 80GB PCIe", "fp32").tflops == 19.5);
  // No CPU peak is invented; an unknown GPU has none either.
  CHECK(KnownPeak("cpu", "fp32").tflops == 0);
  CHECK_THAT(KnownPeak("cpu", "fp32").source, Catch::Contains("--peak-tflops"));
  CHECK(KnownPeak("NVIDIA GeForce RTX 4090", "bf16").tflops == 0);
  CHECK_THROWS_AS(KnownPeak("NVIDIA H100 80GB HBM3", "fp16"), Error);
}

TEST_CASE("a peak given by --peak-tflops overrides the table, on any device", "[mfu]") {
  CHECK(ResolvePeak("cpu", "fp32", 2.5).tflops == 2.5);
  CHECK(ResolvePeak("cpu", "fp32", 2.5).source == "--peak-tflops");
  CHECK(ResolvePeak("NVIDIA H100 80GB HBM3", "bf16", 100).tflops == 100);
  CHECK(ResolvePeak("NVIDIA H100 80GB HBM3", "bf16", 0).tflops == 989.5);
}

}  // namespace
}  // namespace pplab::mfu_test
