#include "sim/precision.h"

#include <cctype>

#include "schedules/error.h"

namespace pplab {

Precision ParsePrecision(const std::string& text, const std::string& flag) {
  if (text == "fp32") return Precision::kFp32;
  if (text == "bf16") return Precision::kBf16;
  std::string shown;  // one printable line, whatever was given
  for (unsigned char c : text.substr(0, 40)) shown += std::isprint(c) != 0 ? static_cast<char>(c) : '?';
  throw Error(flag + " '" + shown + (text.size() > 40 ? "...'" : "'") + ": expected fp32 or bf16");
}

const char* PrecisionName(Precision precision) { return precision == Precision::kBf16 ? "bf16" : "fp32"; }

int ActivationElementBytes(Precision precision) { return precision == Precision::kBf16 ? 2 : 4; }

}  // namespace pplab
