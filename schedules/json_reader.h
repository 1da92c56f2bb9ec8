// Reading JSON input files strictly: one parser for schedules, cost models
// and model configs, so every JSON input refuses the same things.
#pragma once

#include <functional>
#include <istream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace pplab {

// Sees every value as the parser completes it, with its depth (the top-level
// value is at depth 0, its members at 1, ...) and the top-level key it lies
// under ("" at depth 0). Returning false drops the value from the document,
// so a caller can convert a large array's elements as they arrive and never
// hold them as JSON.
using JsonValueFilter = std::function<bool(int depth, const std::string& top_key, nlohmann::json& value)>;

// Parses JSON like nlohmann::json::parse, but throws pplab::Error naming
// `origin` on a syntax error ("ORIGIN: not valid JSON (...)") and on a key
// given twice in one object ("ORIGIN: key 'stages' is given twice in one
// object"), which nlohmann would silently resolve to the last value, and on
// arrays and objects nested more than 200 deep (printing such a value in a
// message overflowed the stack), and on a document that holds more than
// `max_values` values at once (values a filter drops do not count): the
// parsed values take many times their text.
// 2^27: a trace of 1 GiB, the largest file read, holds some 95 M (a
// simulated trace takes 11.3 bytes a value); an array of 2^27 numbers
// takes some 4.5 GB, where the 1 GiB of them allowed took an estimated 24.
constexpr size_t kMaxJsonValues = size_t{1} << 27;
nlohmann::json ParseJsonStrict(const std::string& text, const std::string& origin, const JsonValueFilter& filter = {},
                               size_t max_values = kMaxJsonValues);
// The same, reading from a stream, so the text need not be in memory.
nlohmann::json ParseJsonStrict(std::istream& in, const std::string& origin, const JsonValueFilter& filter = {},
                               size_t max_values = kMaxJsonValues);

// An nlohmann exception's message without its "[json.exception.kind.N] "
// prefix (a code for the library's maintainers, not for a user).
std::string JsonErrorText(const std::exception& e);

// The first key of the object `obj` that is not in `known`, in the order
// the object keeps its keys (sorted: nlohmann::json's objects are maps);
// std::nullopt when every key is known, or when `obj` is not an object (the
// caller checks the type). Each reader words its own error ("ORIGIN:
// unknown field 'k'"), so that it names where it was.
std::optional<std::string> FirstUnknownField(const nlohmann::json& obj, const std::vector<std::string>& known);

}  // namespace pplab
