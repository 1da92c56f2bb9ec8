// Model FLOPs utilisation (MFU): the model's FLOPs of a step (models/flops.h)
// over the step's time and the device's peak FLOP rate for the precision the
// matmuls run in. No LibTorch here.
#pragma once

#include <string>

namespace pplab {

struct PeakFlops {
  double tflops = 0;   // dense (no 2:4 sparsity) TFLOP/s; 0: not known, so no MFU
  std::string source;  // where it comes from, for people: the table row, or the flag
};

// The datasheet peak of a GPU from its CUDA name (e.g. "NVIDIA H100 80GB
// HBM3") for `precision`: "fp32" (non-tensor FP32 cores: LibTorch's default,
// TF32 off), "tf32" (TF32 tensor cores) or "bf16" (BF16 tensor cores).
// tflops 0 for a device not in the table (any CPU among them). Throws
// pplab::Error for another precision.
PeakFlops KnownPeak(const std::string& device_name, const std::string& precision);

// `given_tflops` > 0 (the user's --peak-tflops) wins over the table.
PeakFlops ResolvePeak(const std::string& device_name, const std::string& precision, double given_tflops);

// flops / (seconds x peak): 0.5 is 50 %. 0 when seconds or the peak is not
// positive.
double Mfu(double flops, double seconds, double peak_tflops);

}  // namespace pplab
