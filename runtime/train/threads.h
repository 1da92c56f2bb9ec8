// How many threads a worker computes with.
#pragma once

namespace pplab {

// Shares this machine's cores among `processes` workers on it, as torchrun's
// OMP_NUM_THREADS=1 does: each worker computes with cores / processes
// threads, at least 1. Returns that number.
//
// LibTorch's intra-op pool (OpenMP) and the pthreads OpenBLAS that Debian's
// LibTorch calls for its matrix products are two pools, and each one's idle
// threads spin while the other computes. Given a thread per core each, they
// fight for the cores (measured on 2 cores, one worker, small preset: 1300 ms
// a step against 400-470 ms; 5-40x the system time). So with a pthreads
// OpenBLAS the matrix products get the threads and the intra-op pool one; with
// another BLAS (an OpenMP OpenBLAS, MKL) the intra-op pool gets them and
// OpenBLAS, if any, the same. OMP_NUM_THREADS, when set, is the number of
// threads instead of cores / processes, shared out the same way; with
// OPENBLAS_NUM_THREADS set too, both pools are left as the user set them.
int ShareCores(int processes);

// The threads of each pool as ShareCores left them: LibTorch's intra-op
// threads and OpenBLAS's (0 when no OpenBLAS is loaded), and whether that
// OpenBLAS runs its own pthreads pool.
struct ComputeThreads {
  int intra_op = 1;
  int blas = 0;
  bool blas_pthreads = false;
};
ComputeThreads CurrentComputeThreads();
// The threads a worker computes with: the larger of the two pools.
int ThreadsInUse();

}  // namespace pplab
