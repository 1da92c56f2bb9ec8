#include "runtime/train/threads.h"

#include <ATen/Parallel.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

namespace pplab {

int ShareCores(int processes) {
  if (std::getenv("OMP_NUM_THREADS") != nullptr) return at::get_num_threads();
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  const int threads = std::max(1, cores / std::max(1, processes));
  at::set_num_threads(threads);
  // OpenBLAS sizes its pool from the cores when it loads; with two workers
  // on two cores that is four busy threads (measured: 3393 against 4375
  // tokens/s, and 5x the system time, for the small preset at K=2).
  using SetThreads = void (*)(int);
  if (auto set = reinterpret_cast<SetThreads>(::dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) set(threads);
  return threads;
}

}  // namespace pplab
