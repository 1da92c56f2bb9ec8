// How many threads a worker computes with.
#pragma once

namespace pplab {

// Shares this machine's cores among `processes` workers on it, as torchrun's
// OMP_NUM_THREADS=1 does: LibTorch's intra-op threads and OpenBLAS's own
// pool (which at::set_num_threads does not reach, and whose idle threads
// spin) both get cores / processes, at least 1. Does nothing when the user
// set OMP_NUM_THREADS (OpenBLAS reads it too). Returns the threads used.
int ShareCores(int processes);

}  // namespace pplab
