// Unicode facts the byte-level BPE tokenizers need: UTF-8 to code points
// and back, letter/number/white-space classes, and NFC. No LibTorch.
//
// Text need not be valid UTF-8: a byte that does not start a well-formed
// sequence decodes to the code point kRawByteBase + byte, which is no
// letter, number or space, and encodes back to that same byte. Decode then
// Encode therefore gives back any byte string unchanged.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace pplab {

using CodePoint = uint32_t;

// Above the Unicode range: where undecodable bytes go (see above).
constexpr CodePoint kRawByteBase = 0x110000;

std::vector<CodePoint> DecodeUtf8(std::string_view text);
// The code point at text[at] (at < text.size()); `length` gets the bytes it
// takes (1 for a raw byte).
CodePoint DecodeUtf8At(std::string_view text, size_t at, size_t& length);
void AppendUtf8(CodePoint cp, std::string& out);
// Byte offset of the first invalid UTF-8 sequence, or npos. Well-formed as
// Unicode defines it (DecodeUtf8At): no overlong form, no surrogate, nothing
// above U+10FFFF.
size_t InvalidUtf8At(std::string_view text);
std::string EncodeUtf8(const std::vector<CodePoint>& cps);

// General category L* / N*, and the White_Space property (regex `\s`).
bool IsLetter(CodePoint cp);
bool IsNumber(CodePoint cp);
bool IsSpace(CodePoint cp);

// Canonical composition (Unicode normalization form C) of `text`. Raw
// bytes (see above) pass through and block composition across them.
std::string NormalizeNfc(std::string_view text);
std::vector<CodePoint> NormalizeNfc(const std::vector<CodePoint>& cps);

// The Unicode version of the tables.
const char* UnicodeVersion();

}  // namespace pplab
