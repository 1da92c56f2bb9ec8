#include "schedules/units.h"

#include <cmath>

namespace pplab {

TimeNs MsToNs(double ms) { return static_cast<TimeNs>(std::llround(ms * 1e6)); }

double NsToMs(TimeNs ns) { return static_cast<double>(ns) / 1e6; }

}  // namespace pplab
