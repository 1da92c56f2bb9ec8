// What train_cli_test.cpp and the train_*_test.cpp split from it
// (train_parity_test.cpp, train_checkpoint_test.cpp, train_trace_test.cpp)
// share: `pplab train` with small test settings.
#pragma once

#include <string>

#include "tests/run_pplab.h"

namespace pplab {

// `pplab train` with small test settings in front of `args` (a flag given
// twice takes the last value): synthetic tokens, the tiny model, no output
// files unless asked, no progress line.
inline PplabRun Train(const std::string& args) {
  return Pplab(
      "train --synthetic --out '' -q --model tiny --batch-size 8 --seq-len 32 --steps 10 -m 4 --warmup-steps 0 "
      "--clip-norm 0 --eval-every 0 " +
      args);
}

}  // namespace pplab
