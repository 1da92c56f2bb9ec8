#include "schedules/json_reader.h"

#include <algorithm>
#include <set>
#include <vector>

#include "schedules/error.h"

namespace pplab {
namespace {

using nlohmann::json;

// The parser callback: tracks the keys of each open object (to refuse
// duplicates) and the top-level key, and hands completed values to the filter.
class StrictCallback {
 public:
  StrictCallback(const std::string& origin, const JsonValueFilter& filter) : origin_(origin), filter_(filter) {}

  bool operator()(int depth, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
        keys_.emplace_back();
        return true;
      case json::parse_event_t::key: {
        const std::string& key = parsed.get_ref<const std::string&>();
        if (!keys_.empty() && !keys_.back().insert(key).second) {
          throw Error(origin_ + ": key '" + key + "' is given twice in one object");
        }
        if (depth == 1) top_key_ = key;
        return true;
      }
      case json::parse_event_t::object_end:
        if (!keys_.empty()) keys_.pop_back();
        return Filter(depth, parsed);
      case json::parse_event_t::array_end:
      case json::parse_event_t::value:
        return Filter(depth, parsed);
      case json::parse_event_t::array_start:
        return true;
    }
    return true;
  }

 private:
  bool Filter(int depth, json& value) { return !filter_ || filter_(depth, depth == 0 ? "" : top_key_, value); }

  const std::string& origin_;
  const JsonValueFilter& filter_;
  std::vector<std::set<std::string>> keys_;  // one per open object
  std::string top_key_;
};

template <typename Input>
json Parse(Input&& input, const std::string& origin, const JsonValueFilter& filter) {
  StrictCallback callback(origin, filter);
  try {
    return json::parse(std::forward<Input>(input), std::ref(callback));
  } catch (const json::parse_error& e) {
    throw Error(origin + ": not valid JSON (" + std::string(e.what()) + ")");
  } catch (const json::out_of_range& e) {
    // A number too large for a double (1e400): found by fuzzing the config reader.
    throw Error(origin + ": not valid JSON (" + std::string(e.what()) + ")");
  }
}

}  // namespace

json ParseJsonStrict(const std::string& text, const std::string& origin, const JsonValueFilter& filter) {
  return Parse(text, origin, filter);
}

json ParseJsonStrict(std::istream& in, const std::string& origin, const JsonValueFilter& filter) {
  return Parse(in, origin, filter);
}

std::optional<std::string> FirstUnknownField(const json& obj, const std::vector<std::string>& known) {
  if (!obj.is_object()) return std::nullopt;
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    if (std::find(known.begin(), known.end(), it.key()) == known.end()) return it.key();
  }
  return std::nullopt;
}

}  // namespace pplab
