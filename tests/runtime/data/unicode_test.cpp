// UTF-8, character classes and NFC (runtime/data/unicode.cc), against
// Python's unicodedata (tests/data/unicode/nfc_cases.txt) and hand-picked
// code points.
#include "runtime/data/unicode.h"

#include <catch2/catch.hpp>
#include <fstream>
#include <random>
#include <sstream>

namespace pplab::unicode_test {
namespace {

std::vector<CodePoint> Hex(const std::string& field) {
  std::istringstream in(field);
  std::vector<CodePoint> out;
  std::string h;
  while (in >> h) out.push_back(static_cast<CodePoint>(std::stoul(h, nullptr, 16)));
  return out;
}

}  // namespace

TEST_CASE("valid UTF-8 decodes to its code points and encodes back", "[data][unicode]") {
  const std::string text = "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80";  // a é € 😀
  CHECK(DecodeUtf8(text) == std::vector<CodePoint>{0x61, 0xE9, 0x20AC, 0x1F600});
  CHECK(EncodeUtf8(DecodeUtf8(text)) == text);
}

TEST_CASE("ill-formed UTF-8 decodes byte by byte to raw bytes, which encode back unchanged", "[data][unicode]") {
  // Overlong, a surrogate, past U+10FFFF, a lone continuation, a truncated
  // sequence at the end.
  for (const std::string bad : {"\xC0\x80", "\xED\xA0\x80", "\xF4\x90\x80\x80", "\x80", "x\xE2\x82"}) {
    const std::vector<CodePoint> cps = DecodeUtf8(bad);
    INFO("bytes " << bad.size());
    CHECK(EncodeUtf8(cps) == bad);
    for (CodePoint c : cps) {
      if (c >= kRawByteBase) {
        CHECK_FALSE(IsLetter(c));
        CHECK_FALSE(IsNumber(c));
        CHECK_FALSE(IsSpace(c));
      }
    }
  }
  CHECK(DecodeUtf8("\xC0\x80") == std::vector<CodePoint>{kRawByteBase + 0xC0, kRawByteBase + 0x80});
  std::mt19937 rng(3);
  for (int trial = 0; trial < 200; ++trial) {
    std::string bytes(rng() % 40, '\0');
    for (char& b : bytes) b = static_cast<char>(rng() % 256);
    REQUIRE(EncodeUtf8(DecodeUtf8(bytes)) == bytes);
  }
}

TEST_CASE("letters, numbers and white space are Unicode's L*, N* and White_Space", "[data][unicode]") {
  for (CodePoint c : {0x41u, 0x7Au, 0xE9u, 0x3B1u, 0x4E00u, 0xAC00u, 0x2C6u, 0x1D400u}) {
    INFO(std::hex << c);
    CHECK(IsLetter(c));
    CHECK_FALSE(IsNumber(c));
  }
  // Nd, Nl (Roman numeral five), No (superscript two, circled one).
  for (CodePoint c : {0x30u, 0x39u, 0x661u, 0x2164u, 0xB2u, 0x2460u}) {
    INFO(std::hex << c);
    CHECK(IsNumber(c));
    CHECK_FALSE(IsLetter(c));
  }
  for (CodePoint c : {0x20u, 0x9u, 0xAu, 0xDu, 0x85u, 0xA0u, 0x2003u, 0x3000u}) CHECK(IsSpace(c));
  // Zero-width space and the BOM are not White_Space; marks and
  // punctuation are none of the three.
  for (CodePoint c : {0x200Bu, 0xFEFFu, 0x301u, 0x21u, 0x1F600u}) {
    INFO(std::hex << c);
    CHECK_FALSE(IsSpace(c));
    CHECK_FALSE(IsLetter(c));
    CHECK_FALSE(IsNumber(c));
  }
}

TEST_CASE("NFC equals Python's unicodedata on every listed case, and is idempotent", "[data][unicode]") {
  std::ifstream in(std::string(PPLAB_TEST_DATA_DIR) + "/unicode/nfc_cases.txt");
  REQUIRE(in);
  std::string line;
  int cases = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t semi = line.find(';');
    REQUIRE(semi != std::string::npos);
    const std::vector<CodePoint> input = Hex(line.substr(0, semi)), want = Hex(line.substr(semi + 1));
    const std::vector<CodePoint> got = NormalizeNfc(input);
    if (got != want) FAIL("NFC of " << line.substr(0, semi) << " is wrong; want " << line.substr(semi + 1));
    if (NormalizeNfc(want) != want) FAIL("NFC changes its own output " << line.substr(semi + 1));
    CHECK(NormalizeNfc(EncodeUtf8(input)) == EncodeUtf8(want));
    ++cases;
  }
  CHECK(cases > 3000);
}

TEST_CASE("NFC leaves text below U+0300 and raw bytes alone", "[data][unicode]") {
  std::vector<CodePoint> all;
  for (CodePoint c = 0x20; c < 0x300; ++c) all.push_back(c);
  CHECK(NormalizeNfc(all) == all);
  // A raw byte between a letter and a combining mark blocks composition.
  const std::vector<CodePoint> blocked = {'e', kRawByteBase + 0xFF, 0x301};
  CHECK(NormalizeNfc(blocked) == blocked);
  CHECK(NormalizeNfc(std::vector<CodePoint>{'e', 0x301}) == std::vector<CodePoint>{0xE9});
}

}  // namespace pplab::unicode_test
