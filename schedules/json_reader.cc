#include "schedules/json_reader.h"

#include <algorithm>
#include <set>
#include <vector>

#include "schedules/error.h"

namespace pplab {
namespace {

using nlohmann::json;

constexpr size_t kMaxJsonDepth = 200;

// Builds the document from the parser's events, as nlohmann's own DOM
// parser does, and besides: refuses a key given twice in one object, and
// hands each completed value, with its depth and top-level key, to the
// filter, dropping it where the filter says so. (nlohmann 3.11's callback
// parser, which this replaces, scans the enclosing container for discarded
// values whenever an object closes: a trace's array of 389 440 events took
// 68 s to read. Here a value is dropped where it was added, at the end of
// its array or by its key.)
class StrictDom {
 public:
  StrictDom(const std::string& origin, const JsonValueFilter& filter, size_t max_values)
      : origin_(origin), filter_(filter), max_values_(max_values) {}

  json Take() { return std::move(root_); }

  bool null() { return Scalar(json(nullptr)); }
  bool boolean(bool value) { return Scalar(json(value)); }
  bool number_integer(json::number_integer_t value) { return Scalar(json(value)); }
  bool number_unsigned(json::number_unsigned_t value) { return Scalar(json(value)); }
  bool number_float(json::number_float_t value, const json::string_t& /*text*/) { return Scalar(json(value)); }
  bool string(json::string_t& value) { return Scalar(json(std::move(value))); }
  bool binary(json::binary_t& value) { return Scalar(json::binary(std::move(value))); }

  bool start_object(std::size_t /*elements*/) {
    Deeper();
    open_.push_back(Put(json::object()));
    subtree_.push_back(1);
    keys_.emplace_back();
    key_.emplace_back();
    return true;
  }
  bool key(json::string_t& key) {
    if (!keys_.back().insert(key).second) throw Error(origin_ + ": key '" + key + "' is given twice in one object");
    if (open_.size() == 1) top_key_ = key;
    key_.back() = std::move(key);
    return true;
  }
  bool end_object() {
    keys_.pop_back();
    key_.pop_back();
    return Close();
  }
  bool start_array(std::size_t /*elements*/) {
    Deeper();
    open_.push_back(Put(json::array()));
    subtree_.push_back(1);
    return true;
  }
  bool end_array() { return Close(); }

  bool parse_error(std::size_t /*position*/, const std::string& /*last_token*/, const nlohmann::detail::exception& e) {
    // (A number too large for a double, 1e400, comes here too: found by
    // fuzzing the config reader.)
    throw Error(origin_ + ": not valid JSON (" + JsonErrorText(e) + ")");
  }

 private:
  // No input of pplab's nests deeper than a few levels. 100 000 nested
  // arrays in a config field parsed, then overflowed the stack when an
  // error message printed the value (nlohmann's dump recurses).
  void Deeper() const {
    if (open_.size() >= kMaxJsonDepth) {
      throw Error(origin_ + ": nested deeper than " + std::to_string(kMaxJsonDepth) +
                  " arrays and objects, which no pplab input is");
    }
  }
  // Adds `value` to the open container (or as the document) and returns it.
  json* Put(json&& value) {
    // A JSON value takes some 16 to 60 bytes held, many times its text:
    // a 40 MB array of zeros took 842 MB. The values held at once (those a
    // filter drops go) are bounded, so that no file of the 1 GiB allowed
    // exhausts memory.
    if (++held_ > max_values_) {
      throw Error(origin_ + ": holds more than " + std::to_string(max_values_) +
                  " JSON values, far more than any pplab input");
    }
    if (open_.empty()) {
      root_ = std::move(value);
      return &root_;
    }
    json& parent = *open_.back();
    if (parent.is_array()) {
      parent.push_back(std::move(value));
      return &parent.back();
    }
    json& slot = parent[key_.back()];
    slot = std::move(value);
    return &slot;
  }
  // A completed value at depth open_.size(): kept, or dropped where it went.
  // `values`: how many the value is, itself and all within it.
  bool Keep(json& value, size_t values) {
    const int depth = static_cast<int>(open_.size());
    if (!filter_ || filter_(depth, depth == 0 ? "" : top_key_, value)) {
      if (!subtree_.empty()) subtree_.back() += values;
      return true;
    }
    held_ -= values;
    if (open_.empty()) {
      root_ = json(json::value_t::discarded);
    } else if (open_.back()->is_array()) {
      open_.back()->erase(open_.back()->size() - 1);
    } else {
      open_.back()->erase(key_.back());
    }
    return true;
  }
  bool Scalar(json&& value) { return Keep(*Put(std::move(value)), 1); }
  bool Close() {
    json* done = open_.back();
    const size_t values = subtree_.back();
    open_.pop_back();
    subtree_.pop_back();
    return Keep(*done, values);
  }

  const std::string& origin_;
  const JsonValueFilter& filter_;
  json root_;
  std::vector<json*> open_;                  // the containers being filled, outermost first
  std::vector<std::set<std::string>> keys_;  // one per open object: its keys so far
  std::vector<std::string> key_;             // one per open object: the key of the value being read
  std::string top_key_;
  size_t max_values_;
  size_t held_ = 0;              // values in the document so far
  std::vector<size_t> subtree_;  // one per open container: the values it is, itself and all within it so far
};

template <typename Input>
json Parse(Input&& input, const std::string& origin, const JsonValueFilter& filter, size_t max_values) {
  StrictDom dom(origin, filter, max_values);
  json::sax_parse(std::forward<Input>(input), &dom);
  return dom.Take();
}

}  // namespace

std::string JsonErrorText(const std::exception& e) {
  const std::string what = e.what();
  if (what.rfind("[json.exception.", 0) != 0) return what;
  const size_t end = what.find("] ");
  return end == std::string::npos ? what : what.substr(end + 2);
}

json ParseJsonStrict(const std::string& text, const std::string& origin, const JsonValueFilter& filter,
                     size_t max_values) {
  return Parse(text, origin, filter, max_values);
}

json ParseJsonStrict(std::istream& in, const std::string& origin, const JsonValueFilter& filter, size_t max_values) {
  return Parse(in, origin, filter, max_values);
}

std::optional<std::string> FirstUnknownField(const json& obj, const std::vector<std::string>& known) {
  if (!obj.is_object()) return std::nullopt;
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    if (std::find(known.begin(), known.end(), it.key()) == known.end()) return it.key();
  }
  return std::nullopt;
}

}  // namespace pplab
