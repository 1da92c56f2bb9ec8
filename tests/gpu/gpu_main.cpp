// Main of the GPU tests (ctest label `gpu`). Without a CUDA device it prints
// why and exits 77, which ctest reports as skipped (SKIP_RETURN_CODE): a GPU
// test never passes on a machine that could not run it.
#include <torch/cuda.h>

#include <cstdio>
#include <string>

#include "tests/catch_main.h"

int main(int argc, char** argv) {
  bool listing = false;
  for (int i = 1; i < argc; ++i) listing = listing || std::string(argv[i]).rfind("--list", 0) == 0;
  if (!listing && !torch::cuda::is_available()) {
    std::printf("skipped: no CUDA device (this LibTorch %s CUDA; torch::cuda::is_available() is false)\n",
                torch::cuda::is_available() ? "has" : "has no usable");
    return 77;
  }
  return pplab::RunCatchTests(argc, argv);
}
