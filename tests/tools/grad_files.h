// Gradient files written by `pplab train --dump-grads DIR` (one torch::save
// per parameter, named by its global name), compared with a reference run's.
#pragma once

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>

#include "schedules/file_io.h"

namespace pplab {

// How far each gradient file of a run is from the one of the same name in
// a reference run.
struct GradError {
  int compared = 0;
  double max_abs = 0;  // largest difference
  double max_rel = 0;  // largest difference relative to that tensor's largest reference value
  std::string worst;   // the parameter where max_rel is
  double l2_rel = 0;   // |all differences| / |all reference gradients|, over every tensor
};

// Every gradient file of `ref` against the one of the same name in `dir`.
inline GradError CompareGrads(const std::string& ref, const std::string& dir) {
  GradError e;
  double reference = 0;
  for (const std::string& name : ListDirectory(ref)) {
    at::Tensor want, got;
    torch::load(want, ref + "/" + name);
    torch::load(got, dir + "/" + name);
    const double abs = (got - want).abs().max().item<double>();
    const double rel = abs / std::max(want.abs().max().item<double>(), 1e-30);
    e.max_abs = std::max(e.max_abs, abs);
    if (rel > e.max_rel) e.max_rel = rel, e.worst = std::filesystem::path(name).stem().string();
    e.l2_rel += (got - want).to(torch::kFloat64).pow(2).sum().item<double>();
    reference += want.to(torch::kFloat64).pow(2).sum().item<double>();
    ++e.compared;
  }
  e.l2_rel = reference > 0 ? std::sqrt(e.l2_rel / reference) : 0;
  return e;
}

}  // namespace pplab
