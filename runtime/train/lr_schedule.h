// Learning-rate schedule: linear warm-up, then cosine decay to 0 (the seed
// tutorials' SequentialLR of a LinearLR and a CosineAnnealingLR).
#pragma once

namespace pplab {

struct LrSchedule {
  double base_lr = 1e-3;
  int warmup_steps = 0;  // steps of linear warm-up
  int total_steps = 1;   // warm-up + decay

  // The learning rate of step `step` (0-based):
  //   step < warmup:  base * (step + 1) / warmup
  //   otherwise:      base * (1 + cos(pi * (step - warmup) / (total - warmup))) / 2
  // so the first decay step uses base and the rate reaches 0 after the last.
  double At(int step) const;
};

}  // namespace pplab
