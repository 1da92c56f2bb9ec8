// What a device is, for reports: its name and how fp32 matmuls run on it
// (which of the peaks in runtime/train/mfu.h applies).
#pragma once

#include <c10/core/Device.h>

#include <string>

namespace pplab {

// A CUDA device's name as the driver gives it (e.g. "NVIDIA H100 80GB
// HBM3"); "cpu" for the CPU; the device's text otherwise.
std::string DeviceName(const c10::Device& device);

// The precision fp32 matmuls run in on `device`, as runtime/train/mfu.h names
// it: "tf32" on a CUDA device where LibTorch lets cuBLAS use TF32 tensor cores
// (off by default), else "fp32".
std::string Fp32MatmulPrecision(const c10::Device& device);

}  // namespace pplab
