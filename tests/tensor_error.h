// How far a tensor is from a reference, for parity tests (LibTorch).
#pragma once

#include <ATen/ATen.h>

namespace pplab {

// max |a - b| / max |b|: the error relative to the reference's scale (the
// absolute error where b is all zeros).
inline double RelativeError(const at::Tensor& a, const at::Tensor& b) {
  const double scale = b.abs().max().item<double>();
  return (a - b).abs().max().item<double>() / (scale > 0 ? scale : 1);
}

}  // namespace pplab
