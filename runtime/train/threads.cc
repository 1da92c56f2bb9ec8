#include "runtime/train/threads.h"

#include <ATen/Parallel.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

namespace pplab {
namespace {

// OpenBLAS's own entry points, looked up at run time: pplab links LibTorch,
// not OpenBLAS, and LibTorch may use another BLAS.
using SetThreads = void (*)(int);
using GetInt = int (*)();

template <typename F>
F OpenBlas(const char* name) {
  return reinterpret_cast<F>(::dlsym(RTLD_DEFAULT, name));
}

// openblas_get_parallel(): 0 sequential, 1 its own pthreads pool, 2 OpenMP.
bool BlasHasOwnPool() {
  const auto parallel = OpenBlas<GetInt>("openblas_get_parallel");
  return parallel != nullptr && parallel() == 1;
}

}  // namespace

int ShareCores(int processes) {
  int threads = 0;
  if (std::getenv("OMP_NUM_THREADS") != nullptr) {
    threads = at::get_num_threads();                                     // LibTorch took the user's figure
    if (std::getenv("OPENBLAS_NUM_THREADS") != nullptr) return threads;  // both pools are the user's
  } else {
    const int cores = static_cast<int>(std::thread::hardware_concurrency());
    threads = std::max(1, cores / std::max(1, processes));
  }
  const auto set_blas = OpenBlas<SetThreads>("openblas_set_num_threads");
  if (set_blas != nullptr && BlasHasOwnPool()) {
    at::set_num_threads(1);
    set_blas(threads);
  } else {
    at::set_num_threads(threads);
    if (set_blas != nullptr) set_blas(threads);
  }
  return threads;
}

ComputeThreads CurrentComputeThreads() {
  ComputeThreads t;
  t.intra_op = at::get_num_threads();
  if (const auto get = OpenBlas<GetInt>("openblas_get_num_threads")) t.blas = get();
  t.blas_pthreads = BlasHasOwnPool();
  return t;
}

int ThreadsInUse() {
  const ComputeThreads t = CurrentComputeThreads();
  return std::max(t.intra_op, t.blas);
}

}  // namespace pplab
