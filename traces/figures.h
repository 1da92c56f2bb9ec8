// Numbers as the pictures (render_svg.h, render_text.h) print them, the
// same bytes in any locale.
#pragma once

#include <string>

#include "schedules/units.h"

namespace pplab {

// `value` with `decimals` digits after the point (std::to_chars, which
// ignores LC_NUMERIC, as printf does not).
std::string Fixed(double value, int decimals);

// Bytes in the decimal unit that reads them best: "100 B", "4.10 kB",
// "2.000 MB" (`decimals` digits past B), "1.50 GB", up to TB. A picture of
// a few hundred bytes read "0.000 MB".
std::string ByteCount(Bytes bytes, int decimals);

}  // namespace pplab
