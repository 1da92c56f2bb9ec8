#include "runtime/train/mfu.h"

#include <algorithm>
#include <cctype>

#include "schedules/error.h"

namespace pplab {
namespace {

struct GpuPeak {
  const char* label;
  // Substrings of the upper-cased CUDA device name: all of `has`, none of `lacks`.
  const char* has[2];
  const char* lacks;
  double fp32, tf32, bf16;  // dense TFLOP/s
};

// NVIDIA datasheets list the tensor-core figures with 2:4 sparsity ("*");
// the dense figures used here are half of those. FP32 is the non-tensor rate.
//   H100 SXM (datasheet, 2023): FP32 67, TF32 989*, BF16 1,979*   -> 67 / 494.5 / 989.5
//   H100 PCIe:                  FP32 51, TF32 756*, BF16 1,513*   -> 51 / 378 / 756.5
//   H100 NVL:                   FP32 60, TF32 835*, BF16 1,671*   -> 60 / 417.5 / 835.5
//   H200 SXM (datasheet, 2024): FP32 67, TF32 989*, BF16 1,979*   (H100 SXM's compute)
//   H200 NVL:                   FP32 60, TF32 835*, BF16 1,671*
//   GH200 (its GPU):            FP32 67, TF32 989*, BF16 1,979*
//   A100 SXM and PCIe (40/80 GB): FP32 19.5, TF32 156 (312*), BF16 312 (624*)
// Order matters: the first row that matches wins (NVL and PCIe before SXM,
// GH200 before H200).
constexpr GpuPeak kGpuPeaks[] = {
    {"H100 PCIe", {"H100", "PCIE"}, nullptr, 51, 378, 756.5},
    {"H100 NVL", {"H100", "NVL"}, nullptr, 60, 417.5, 835.5},
    {"H100 SXM", {"H100", nullptr}, nullptr, 67, 494.5, 989.5},
    {"GH200", {"GH200", nullptr}, nullptr, 67, 494.5, 989.5},
    {"H200 NVL", {"H200", "NVL"}, nullptr, 60, 417.5, 835.5},
    {"H200 SXM", {"H200", nullptr}, "NVL", 67, 494.5, 989.5},
    {"A100", {"A100", nullptr}, nullptr, 19.5, 156, 312},
};

std::string Upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return s;
}

}  // namespace

PeakFlops KnownPeak(const std::string& device_name, const std::string& precision) {
  if (precision != "fp32" && precision != "tf32" && precision != "bf16") {
    throw Error("peak FLOPs: precision '" + precision + "' is not one of fp32, tf32, bf16");
  }
  const std::string name = Upper(device_name);
  for (const GpuPeak& g : kGpuPeaks) {
    bool match = true;
    for (const char* part : g.has) match = match && (part == nullptr || name.find(part) != std::string::npos);
    if (g.lacks != nullptr) match = match && name.find(g.lacks) == std::string::npos;
    if (!match) continue;
    const double tflops = precision == "fp32" ? g.fp32 : precision == "tf32" ? g.tf32 : g.bf16;
    const char* what = precision == "fp32" ? "fp32 (non-tensor)" : precision == "tf32" ? "tf32 tensor" : "bf16 tensor";
    return {tflops, std::string(g.label) + " " + what + ", dense, datasheet"};
  }
  return {0, "no peak known for " + device_name + " (pass --peak-tflops)"};
}

PeakFlops ResolvePeak(const std::string& device_name, const std::string& precision, double given_tflops) {
  if (given_tflops > 0) return {given_tflops, "--peak-tflops"};
  return KnownPeak(device_name, precision);
}

double Mfu(double flops, double seconds, double peak_tflops) {
  if (seconds <= 0 || peak_tflops <= 0) return 0;
  return flops / (seconds * peak_tflops * 1e12);
}

}  // namespace pplab
