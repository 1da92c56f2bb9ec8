#include "schedules/schedule_io.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string_view>

#include "schedules/action_kinds.h"
#include "schedules/error.h"
#include "schedules/file_io.h"
#include "schedules/json_reader.h"

namespace pplab {
namespace {

using nlohmann::json;

const json& Field(const json& obj, const char* key, const std::string& origin) {
  const auto it = obj.find(key);
  if (it == obj.end()) throw Error(origin + ": missing field '" + key + "'");
  return *it;
}

int IntField(const json& obj, const char* key, const std::string& origin) {
  const json& v = Field(obj, key, origin);
  if (!v.is_number_integer()) throw Error(origin + ": field '" + key + "' must be an integer");
  // An unsigned value above 2^63 - 1 is no long long: test it as what it is.
  const bool in_range = v.is_number_unsigned()
                            ? v.get<unsigned long long>() >= 1 && v.get<unsigned long long>() <= 1000000000
                            : v.get<long long>() >= 1 && v.get<long long>() <= 1000000000;
  if (!in_range) {
    throw Error(origin + ": field '" + key + "' must be in [1, 1e9], got " + v.dump());
  }
  return static_cast<int>(v.get<long long>());
}

std::string Basename(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  const size_t dot = base.find_last_of('.');
  return dot == std::string::npos || dot == 0 ? base : base.substr(0, dot);
}

bool HasControlCharacter(const std::string& text) {
  for (unsigned char c : text) {
    if (c < 0x20 || c == 0x7f) return true;
  }
  return false;
}

// A schedule needs at least two actions per (stage, microbatch), so S x M
// (or K) far beyond the number of actions is a file that claims what it
// does not hold; refusing it keeps memory proportional to the file.
void CheckDeclaredSize(const Schedule& s, const std::string& origin) {
  const int64_t pairs = static_cast<int64_t>(s.stages) * s.microbatches;
  const int64_t actions = static_cast<int64_t>(s.NumActions());
  if (pairs > actions + 4096) {
    throw Error(origin + ": " + std::to_string(s.stages) + " stages x " + std::to_string(s.microbatches) +
                " microbatches = " + std::to_string(pairs) + " (stage, microbatch) pairs, but only " +
                std::to_string(actions) + " actions: a complete schedule has at least two per pair");
  }
  // So do ranks far beyond the actions (a file of 2 million idle rows took
  // 6.6 GB and 35 s to simulate).
  if (static_cast<int64_t>(s.ranks) > actions + 4096) {
    throw Error(origin + ": " + std::to_string(s.ranks) + " ranks, but only " + std::to_string(actions) +
                " actions: a rank of a pipeline holds a stage and computes; at most 4096 more ranks than actions "
                "are read");
  }
}

}  // namespace

std::string ScheduleToJson(const Schedule& schedule, const std::string& planned) {
  json programs = json::array();
  for (const Program& p : schedule.programs) {
    json row = json::array();
    for (const Action& a : p) row.push_back(FormatAction(a));
    programs.push_back(std::move(row));
  }
  json doc = {
      {"format", "pplab.schedule"},      {"version", kScheduleFormatVersion}, {"name", schedule.name},
      {"ranks", schedule.ranks},         {"stages", schedule.stages},         {"microbatches", schedule.microbatches},
      {"placement", schedule.placement}, {"programs", std::move(programs)},
  };
  // One program per line keeps files diffable without blowing up their size.
  std::string out = "{\n";
  const char* keys[] = {"format", "version", "name", "ranks", "stages", "microbatches", "placement"};
  for (const char* k : keys) out += "  \"" + std::string(k) + "\": " + doc[k].dump() + ",\n";
  if (!planned.empty()) out += "  \"planned\": " + json::parse(planned).dump() + ",\n";
  // Only schedules of several pipelines (dualpipe) carry the two optional fields.
  if (!schedule.pipeline_starts.empty()) {
    out += "  \"pipeline_starts\": " + json(schedule.pipeline_starts).dump() + ",\n";
    out += "  \"microbatch_pipeline\": " + json(schedule.microbatch_pipeline).dump() + ",\n";
  }
  out += "  \"programs\": [\n";
  for (size_t r = 0; r < doc["programs"].size(); ++r) {
    out += "    " + doc["programs"][r].dump() + (r + 1 < doc["programs"].size() ? ",\n" : "\n");
  }
  out += "  ]\n}\n";
  return out;
}

namespace {

std::string TooManyActions() {
  return "more than " + std::to_string(kMaxFileActions) +
         " actions (2^24), the most a schedule file may hold (memory grows with them)";
}

// Reads the JSON format from `input` (text or a stream) without holding the
// programs as JSON: each action string is parsed as soon as the parser has
// it and dropped from the document, so memory stays near the size of the
// schedule itself (a JSON value per action would cost ~40x its text).
template <typename Input>
Schedule ScheduleFromJsonInput(Input& input, const std::string& origin) {
  std::vector<Program> rows;
  Program row;
  int64_t actions = 0;
  const JsonValueFilter keep_programs_out = [&](int depth, const std::string& top_key, json& value) {
    if (top_key != "programs" || depth < 2) return true;
    const std::string at = origin + ": programs[" + std::to_string(rows.size()) + "]";
    if (depth == 2) {
      if (!value.is_array()) throw Error(at + " must be an array");
      rows.push_back(std::move(row));
      row = Program();
      return false;
    }
    if (depth > 3) return true;  // inside a cell that is not a string: refused when the cell ends
    const std::string cell_at = at + "[" + std::to_string(row.size()) + "]";
    if (!value.is_string()) throw Error(cell_at + " must be an action string such as \"0F1\"");
    if (++actions > kMaxFileActions) throw Error(cell_at + ": " + TooManyActions());
    try {
      row.push_back(ParseAction(value.get_ref<const std::string&>()));
    } catch (const Error& e) {
      throw Error(cell_at + ": " + e.what());
    }
    return false;
  };
  const json doc = ParseJsonStrict(input, origin, keep_programs_out);
  if (!doc.is_object()) throw Error(origin + ": expected a JSON object at the top level");
  const json& format = Field(doc, "format", origin);
  if (format != "pplab.schedule") throw Error(origin + ": field 'format' must be \"pplab.schedule\"");
  const json& version = Field(doc, "version", origin);
  if (!version.is_number_integer() || version.get<long long>() != kScheduleFormatVersion) {
    throw Error(origin + ": unsupported 'version' " + version.dump() + " (this pplab reads version " +
                std::to_string(kScheduleFormatVersion) + ")");
  }
  if (const auto unknown =
          FirstUnknownField(doc, {"format", "version", "name", "ranks", "stages", "microbatches", "placement",
                                  "programs", "pipeline_starts", "microbatch_pipeline", "planned"})) {
    throw Error(origin + ": unknown field '" + *unknown + "'");
  }
  // The train flags a plan was costed with: read by train (train_options.cc).
  if (doc.contains("planned") && !doc["planned"].is_object()) {
    throw Error(origin + ": field 'planned' must be an object of train flags");
  }
  Schedule s;
  const json& name = Field(doc, "name", origin);
  if (!name.is_string()) throw Error(origin + ": field 'name' must be a string");
  s.name = name.get<std::string>();
  if (HasControlCharacter(s.name)) throw Error(origin + ": field 'name' must not hold control characters");
  s.ranks = IntField(doc, "ranks", origin);
  s.stages = IntField(doc, "stages", origin);
  s.microbatches = IntField(doc, "microbatches", origin);
  const json& placement = Field(doc, "placement", origin);
  if (!placement.is_array()) throw Error(origin + ": field 'placement' must be an array of ranks");
  for (size_t i = 0; i < placement.size(); ++i) {
    if (!placement[i].is_number_integer() || placement[i].get<long long>() < 0 ||
        placement[i].get<long long>() >= s.ranks) {
      throw Error(origin + ": placement[" + std::to_string(i) + "] must be a rank in [0, " + std::to_string(s.ranks) +
                  "), got " + placement[i].dump());
    }
    s.placement.push_back(static_cast<RankId>(placement[i].get<long long>()));
  }
  // Optional: several pipelines (docs/schedule-format.md).
  for (const char* key : {"pipeline_starts", "microbatch_pipeline"}) {
    if (!doc.contains(key)) continue;
    const json& list = doc[key];
    if (!list.is_array()) throw Error(origin + ": field '" + key + "' must be an array of integers");
    std::vector<int>& into = std::string(key) == "pipeline_starts" ? s.pipeline_starts : s.microbatch_pipeline;
    for (size_t i = 0; i < list.size(); ++i) {
      if (!list[i].is_number_integer() || list[i].get<long long>() < 0 || list[i].get<long long>() > (1LL << 30)) {
        throw Error(origin + ": " + key + "[" + std::to_string(i) + "] must be an integer from 0 to 2^30, got " +
                    list[i].dump());
      }
      into.push_back(static_cast<int>(list[i].get<long long>()));
    }
  }
  // Its rows were taken out as they were parsed (what is left is empty).
  if (!Field(doc, "programs", origin).is_array()) {
    throw Error(origin + ": field 'programs' must be an array (one per rank)");
  }
  s.programs = std::move(rows);
  try {
    CheckHeader(s);  // action-level problems are validation's to report
  } catch (const Error& e) {
    throw Error(origin + ": " + JsonErrorText(e));
  }
  CheckDeclaredSize(s, origin);
  return s;
}

template <typename Input>
Schedule ScheduleFromJsonChecked(Input& input, const std::string& origin) {
  try {
    return ScheduleFromJsonInput(input, origin);
  } catch (const json::exception& e) {
    throw Error(origin + ": " + JsonErrorText(e));
  }
}

}  // namespace

Schedule ScheduleFromJson(const std::string& text, const std::string& origin) {
  return ScheduleFromJsonChecked(text, origin);
}

namespace {

// Where each action of a CSV came from, for error messages.
struct CellAt {
  int row;     // 1-based line
  int column;  // 1-based cell
};

std::string At(const std::string& origin, const CellAt& c) {
  return origin + ":" + std::to_string(c.row) + ": column " + std::to_string(c.column);
}

// Stage -> rank of a CSV schedule. The compute actions decide (a stage's F,
// B, I and W run where the stage lives); composites, then messages and
// per-stage actions, only place stages no plain compute action names. Then
// every action must be on its stage's rank: an error names the cell.
std::vector<RankId> CsvPlacement(const Schedule& s, const std::vector<std::vector<CellAt>>& cells,
                                 const std::string& origin) {
  std::vector<RankId> placement(s.stages, -1);
  std::vector<CellAt> placed_by(s.stages, CellAt{0, 0});
  // Pass 0: F/B/I/W; pass 1: composites' parts; pass 2: everything else.
  for (int pass = 0; pass < 3; ++pass) {
    for (RankId r = 0; r < s.ranks; ++r) {
      for (size_t i = 0; i < s.programs[r].size(); ++i) {
        const Action& a = s.programs[r][i];
        const KindRole role = InfoOf(a.kind).role;
        const int a_pass = role == KindRole::kCompute ? 0 : role == KindRole::kComposite ? 1 : 2;
        if (a_pass != pass) continue;
        ComputeParts parts = PartsOf(a);
        if (parts.count == 0) parts.part[parts.count++] = a;
        for (const Action& part : parts) {
          if (placement[part.stage] == -1) {
            placement[part.stage] = r;
            placed_by[part.stage] = cells[r][i];
          } else if (pass == 0 && placement[part.stage] != r) {
            throw Error(At(origin, cells[r][i]) + ": " + FormatAction(a) + ": stage " + std::to_string(part.stage) +
                        " also computes on rank " + std::to_string(placement[part.stage]) + " (row " +
                        std::to_string(placed_by[part.stage].row) + "); a stage must live on one rank");
          }
        }
      }
    }
  }
  for (RankId r = 0; r < s.ranks; ++r) {
    for (size_t i = 0; i < s.programs[r].size(); ++i) {
      const Action& a = s.programs[r][i];
      const KindRole role = InfoOf(a.kind).role;
      if (role == KindRole::kComposite) {
        for (const Action& part : PartsOf(a)) {
          if (placement[part.stage] == r) continue;
          throw Error(At(origin, cells[r][i]) + ": " + FormatAction(a) + " runs stage " + std::to_string(part.stage) +
                      ", which lives on rank " + std::to_string(placement[part.stage]) + " (row " +
                      std::to_string(placed_by[part.stage].row) + "), on rank " + std::to_string(r) +
                      ": both parts of an overlapped action must be on one rank");
        }
      } else if (role != KindRole::kCompute && placement[a.stage] != r) {
        throw Error(At(origin, cells[r][i]) + ": " + FormatAction(a) + " on rank " + std::to_string(r) +
                    ", which does not own stage " + std::to_string(a.stage) + " (it lives on rank " +
                    std::to_string(placement[a.stage]) + ", row " + std::to_string(placed_by[a.stage].row) + ")");
      }
    }
  }
  for (StageId st = 0; st < s.stages; ++st) {
    if (placement[st] == -1) throw Error(origin + ": stage " + std::to_string(st) + " has no actions on any rank");
  }
  return placement;
}

}  // namespace

Schedule ScheduleFromPytorchCsv(const std::string& text, const std::string& origin, const std::string& name) {
  Schedule s;
  s.name = name;
  int line_no = 0;
  size_t pos = 0;
  // Trailing blank lines are not ranks; any other line is one (possibly idle).
  const size_t last = text.find_last_not_of(" \t\r\n");
  const std::string_view body(text.data(), last == std::string::npos ? 0 : last + 1);
  int max_stage = -1, max_mb = -1;
  int64_t actions = 0;
  std::vector<std::vector<CellAt>> cells;  // per rank, per action
  while (pos < body.size()) {
    // Lines end in \n, \r\n or a lone \r (as Python's csv module reads them).
    size_t end = body.find_first_of("\r\n", pos);
    if (end == std::string::npos) end = body.size();
    std::string line(body.substr(pos, end - pos));
    pos = end + (end + 1 < body.size() && body[end] == '\r' && body[end + 1] == '\n' ? 2 : 1);
    ++line_no;
    // A blank line between rows is more likely a slip than a rank that
    // computes nothing; an idle rank is a row of empty cells (",,").
    if (line.find_first_not_of(" \t") == std::string::npos) {
      throw Error(origin + ":" + std::to_string(line_no) +
                  ": a blank line between ranks' rows (an idle rank is a row of empty "
                  "cells, such as ',')");
    }
    Program p;
    std::vector<CellAt> at;
    size_t cpos = 0;
    int column = 0;
    while (true) {
      size_t comma = line.find(',', cpos);
      std::string cell = line.substr(cpos, comma == std::string::npos ? std::string::npos : comma - cpos);
      ++column;
      if (cell.find_first_not_of(" \t\"") != std::string::npos) {
        cell.erase(std::remove(cell.begin(), cell.end(), '"'), cell.end());
        if (++actions > kMaxFileActions) throw Error(At(origin, {line_no, column}) + ": " + TooManyActions());
        try {
          p.push_back(ParseAction(cell));
        } catch (const Error& e) {
          throw Error(At(origin, {line_no, column}) + ": " + e.what());
        }
        at.push_back({line_no, column});
        ComputeParts parts = PartsOf(p.back());
        if (parts.count == 0) parts.part[parts.count++] = p.back();
        for (const Action& part : parts) {
          max_stage = std::max(max_stage, part.stage);
          if (InfoOf(part.kind).has_microbatch) max_mb = std::max(max_mb, part.microbatch);
        }
      }
      if (comma == std::string::npos) break;
      cpos = comma + 1;
    }
    s.programs.push_back(std::move(p));
    cells.push_back(std::move(at));
  }
  if (s.programs.empty()) throw Error(origin + ": no rows (expected one row of actions per rank)");
  if (max_stage < 0) throw Error(origin + ": no actions in any row");
  if (max_mb < 0) throw Error(origin + ": no action names a microbatch (a schedule needs F and B actions)");
  s.ranks = static_cast<int>(s.programs.size());
  s.stages = max_stage + 1;
  s.microbatches = max_mb + 1;
  if (static_cast<size_t>(s.stages) > s.NumActions()) {
    throw Error(origin + ": stage " + std::to_string(max_stage) + " implies " + std::to_string(s.stages) +
                " stages but the file holds " + std::to_string(s.NumActions()) + " actions (each stage needs some)");
  }
  CheckDeclaredSize(s, origin);
  s.placement = CsvPlacement(s, cells, origin);
  return s;
}

std::string ScheduleToPytorchCsv(const Schedule& schedule) {
  if (schedule.NumPipelines() > 1) {
    throw Error("schedule '" + schedule.name + "' runs " + std::to_string(schedule.NumPipelines()) +
                " pipelines over its ranks, which PyTorch's CSV cannot express (use the pplab JSON format)");
  }
  std::string out;
  for (const Program& p : schedule.programs) {
    for (size_t i = 0; i < p.size(); ++i) out += (i ? "," : "") + FormatAction(p[i]);
    // An idle rank is a row of two empty cells: a blank line would be read
    // as a slip between rows, or at the end, as no rank at all.
    out += p.empty() ? ",\n" : "\n";
  }
  return out;
}

std::string ScheduleToPytorchComputeCsv(const Schedule& schedule) {
  Schedule compute = schedule;
  for (Program& p : compute.programs) {
    Program kept;
    kept.reserve(p.size());
    // PyTorch's compute-only files hold REDUCE_GRAD too (its GPipe and
    // 1F1B add it to their compute order); UNSHARD and RESHARD its loader
    // adds itself, with the messages.
    for (const Action& a : p) {
      if (IsCompute(a.kind) || a.kind == ActionKind::kReduceGrad) kept.push_back(a);
    }
    p = std::move(kept);
  }
  return ScheduleToPytorchCsv(compute);
}

Schedule LoadScheduleFile(const std::string& path) {
  // JSON streams from the file; the CSV reader takes the text (a CSV cell
  // is as small as the action it becomes).
  std::ifstream in = OpenInputFile(path);
  const int first = SkipSpace(in);
  if (first == EOF) throw Error(path + ": file is empty");
  const bool json_like = EndsWith(path, ".json") || (!EndsWith(path, ".csv") && first == '{');
  if (json_like) {
    // A PyTorch CSV saved under a .json name starts with an action's digit.
    if (first != '{' && std::isdigit(first)) {
      throw Error(path + ": not JSON: it starts like a PyTorch CSV schedule (an action such as 0F0); name it .csv");
    }
    return ScheduleFromJsonChecked(in, path);
  }
  // And a pplab JSON plan saved under a .csv name starts with a brace (it
  // read as "bad action '{'").
  if (first == '{') throw Error(path + ": not CSV: it starts like a JSON schedule ('{'); name it .json");
  in.close();
  const std::string text = ReadTextFile(path);
  std::string name = Basename(path);
  for (char& c : name) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  }
  // The name goes into JSON (plans, traces), which holds UTF-8 only: a file
  // name that is not keeps its ASCII.
  try {
    (void)json(name).dump();
  } catch (const json::type_error&) {
    for (char& c : name) {
      if (static_cast<unsigned char>(c) >= 0x80) c = '?';
    }
  }
  return ScheduleFromPytorchCsv(text, path, name);
}

}  // namespace pplab
