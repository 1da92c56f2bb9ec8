#include "runtime/train/lr_schedule.h"

#include <cmath>

namespace pplab {

double LrSchedule::At(int step) const {
  if (step < warmup_steps) return base_lr * (step + 1) / warmup_steps;
  const int decay_steps = total_steps - warmup_steps;
  if (decay_steps <= 0) return base_lr;
  const double progress = static_cast<double>(step - warmup_steps) / decay_steps;
  return base_lr * 0.5 * (1.0 + std::cos(M_PI * progress));
}

}  // namespace pplab
