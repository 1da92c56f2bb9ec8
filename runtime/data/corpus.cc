#include "runtime/data/corpus.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "runtime/data/fnv.h"
#include "runtime/data/unicode.h"
#include "schedules/error.h"
#include "schedules/file_io.h"
#include "schedules/json_reader.h"

namespace fs = std::filesystem;

namespace pplab {
namespace {

// Undoes overstrikes, reads a lone \r (old Mac OS line ends) as \n, and
// drops the other control characters but \n and \t (a \r before \n).
std::string Clean(const std::string& raw) {
  std::string out;
  out.reserve(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) {
    const char ch = raw[i];
    if (ch == '\r' && (i + 1 == raw.size() || raw[i + 1] != '\n')) {
      out.push_back('\n');
    } else if (ch == '\b') {
      if (!out.empty()) {
        // Remove the whole UTF-8 character before the backspace.
        while (!out.empty() && (static_cast<unsigned char>(out.back()) >> 6) == 0x2) out.pop_back();
        if (!out.empty()) out.pop_back();
      }
    } else if (ch == '\r' || (static_cast<unsigned char>(ch) < 0x20 && ch != '\n' && ch != '\t') || ch == 0x7f) {
      continue;
    } else {
      out.push_back(ch);
    }
  }
  return out;
}

std::string Trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\n");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\n") - b + 1);
}

void SplitDocuments(const std::string& text, std::vector<std::string>& into) {
  std::vector<std::string> lines;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    lines.push_back(text.substr(pos, end - pos));
    pos = end + 1;
  }
  const bool fortune = std::find(lines.begin(), lines.end(), "%") != lines.end();
  std::string doc;
  auto flush = [&] {
    std::string t = Trim(doc);
    if (!t.empty()) into.push_back(std::move(t));
    doc.clear();
  };
  for (const std::string& line : lines) {
    const bool separator = fortune ? line == "%" : Trim(line).empty();
    if (separator) {
      flush();
    } else {
      doc += line;
      doc += '\n';
    }
  }
  flush();
}

// A chat record's "messages": objects of a string "role" and "content";
// an assistant among them, or the record would teach nothing.
template <typename TextOf>
std::vector<ChatMessage> ReadMessages(const nlohmann::json& list, const std::string& where, const TextOf& text_of) {
  if (!list.is_array() || list.empty()) throw Error(where + "\"messages\" is not a list of messages");
  std::vector<ChatMessage> messages;
  bool assistant = false;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string name = "\"messages\"[" + std::to_string(i) + "]";
    const nlohmann::json& m = list[i];
    if (!m.is_object() || !m.contains("role") || !m.contains("content")) {
      throw Error(where + name + " is not {\"role\": ..., \"content\": ...}");
    }
    ChatMessage message{text_of(m["role"], name + ".role"), text_of(m["content"], name + ".content")};
    if (message.role.empty()) throw Error(where + name + ".role is empty");
    assistant = assistant || message.role == "assistant";
    messages.push_back(std::move(message));
  }
  if (!assistant) throw Error(where + "\"messages\" has no \"assistant\" message, so nothing to learn");
  return messages;
}

}  // namespace

void ReadRecords(const std::string& file, const std::string& text, Corpus& corpus, const std::string& flag) {
  // The keys no record kind reads: how many records had each, and the first line.
  std::map<std::string, std::pair<int, int>> ignored;
  size_t pos = 0;
  for (int line_number = 1; pos < text.size(); ++line_number) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    if (Trim(line).empty()) continue;
    const std::string where = flag + " " + file + ":" + std::to_string(line_number) + ": ";
    // Strict: a key given twice is refused, not resolved to its last value.
    const nlohmann::json record = ParseJsonStrict(line, where.substr(0, where.size() - 2));
    const auto text_of = [&](const nlohmann::json& value, const std::string& name) -> std::string {
      if (!value.is_string()) throw Error(where + name + " is not a string");
      return Clean(value.get<std::string>());
    };
    const auto field = [&](const char* key) -> std::string {
      return record.contains(key) ? text_of(record[key], std::string("\"") + key + "\"") : "";
    };
    const int kinds = record.is_object() ? static_cast<int>(record.contains("text")) +
                                               static_cast<int>(record.contains("completion")) +
                                               static_cast<int>(record.contains("messages"))
                                         : 0;
    if (kinds != 1) {
      throw Error(where +
                  "a record is {\"prompt\": ..., \"completion\": ...}, {\"messages\": [...]} or {\"text\": ...}");
    }
    if (record.contains("prompt") && !record.contains("completion")) {
      throw Error(where + "\"" + (record.contains("text") ? "text" : "messages") + "\" takes no \"prompt\"");
    }
    for (const auto& item : record.items()) {
      if (item.key() == "prompt" || item.key() == "completion" || item.key() == "text" || item.key() == "messages") {
        continue;
      }
      ++ignored.emplace(item.key(), std::make_pair(0, line_number)).first->second.first;
    }
    if (record.contains("messages")) {
      corpus.chats.resize(corpus.documents.size());
      corpus.chats.push_back(ReadMessages(record["messages"], where, text_of));
      std::string plain;
      for (const ChatSpan& s : RenderChat(corpus.chats.back(), ChatLayout::kPlain)) plain += s.eos ? "\n" : s.text;
      corpus.prompts.emplace_back();
      corpus.documents.push_back(plain);
      continue;
    }
    const std::string prompt = field("prompt"),
                      completion = record.contains("text") ? field("text") : field("completion");
    if (prompt.empty() && completion.empty()) continue;
    corpus.prompts.push_back(prompt);
    corpus.documents.push_back(completion);
  }
  if (!corpus.chats.empty()) corpus.chats.resize(corpus.documents.size());
  if (!ignored.empty()) {
    std::string note = flag + " " + file + ": ignored";
    size_t listed = 0;
    for (const auto& [key, seen] : ignored) {
      if (listed++ == 8) {
        note += ", and " + std::to_string(ignored.size() - 8) + " more keys";
        break;
      }
      note += std::string(listed > 1 ? "," : "") + " the key " + nlohmann::json(key).dump() + " in " +
              std::to_string(seen.first) + (seen.first == 1 ? " record" : " records") + " (first at line " +
              std::to_string(seen.second) + ")";
    }
    corpus.notes.push_back(note + "; a record reads \"prompt\" and \"completion\", \"messages\" or \"text\"");
  }
}

std::string DefaultCorpusDir() { return "/usr/share/games/fortunes"; }

Corpus ReadCorpus(const std::vector<std::string>& paths, const std::string& flag) {
  Corpus corpus;
  corpus.fingerprint = kPplabFingerprintBasis;
  // Each file by its device and inode: read once, whatever names it.
  std::map<std::pair<dev_t, ino_t>, std::string> seen;
  auto identity = [](const std::string& file) {
    struct stat info {};
    return stat(file.c_str(), &info) == 0 ? std::make_pair(info.st_dev, info.st_ino) : std::make_pair(dev_t{}, ino_t{});
  };
  auto add = [&](const std::string& file, const std::string& given) {
    const auto [it, fresh] = seen.emplace(identity(file), file);
    if (!fresh) {
      throw Error(flag + " " + given + ": " + file + " is " + it->second +
                  ", read already (a file given twice, or inside a folder also given): give each file once");
    }
    corpus.files.push_back(file);
  };
  for (const std::string& path : paths) {
    std::error_code ec;
    if (fs::is_directory(path, ec)) {
      std::vector<std::string> files;
      std::vector<std::string> names;
      try {
        names = ListDirectory(path);
      } catch (const Error& e) {
        throw Error(flag + " " + path + ": " + e.what());
      }
      std::set<std::pair<dev_t, ino_t>> listed;
      std::vector<std::string> not_read;       // subfolders, broken links, FIFOs
      for (const std::string& name : names) {  // sorted: a file before its aliases (Debian's art.u8 -> art)
        const fs::path file = fs::path(path) / name;
        if (name[0] == '.' || file.extension() == ".dat") continue;
        if (!fs::is_regular_file(file, ec)) {
          not_read.push_back(name);
          continue;
        }
        // A second name of a file listed already (a link) is that file.
        if (listed.insert(identity(file.string())).second) files.push_back(file.string());
      }
      if (files.empty()) throw Error(flag + " " + path + ": the directory holds no text files");
      // (The default corpus leaves Debian's off/, the offensive fortunes, unread.)
      if (!not_read.empty() && path != DefaultCorpusDir()) {
        corpus.notes.push_back(flag + " " + path + ": " + std::to_string(not_read.size()) +
                               (not_read.size() == 1 ? " entry" : " entries") + " not read (" + not_read.front() +
                               (not_read.size() > 1 ? ", ..." : "") +
                               "): a folder's files are read, not its subfolders, links to nothing or other "
                               "entries; give a subfolder as " +
                               flag + " too");
      }
      for (const std::string& file : files) add(file, path);
    } else if (fs::exists(path, ec)) {
      add(path, path);
    } else {
      // A loop of links is not missing; the system's word for it.
      throw Error(flag + " " + path + ": " + (ec ? ec.message() : std::string("no such file or directory")));
    }
  }
  std::vector<std::string> empty_files;
  for (const std::string& file : corpus.files) {
    const std::string raw = ReadTextFile(file);
    const size_t bad = InvalidUtf8At(raw);
    if (bad != std::string::npos) {
      throw Error(flag + " " + file + ": not UTF-8 text (invalid byte at offset " + std::to_string(bad) + ")");
    }
    corpus.fingerprint = PplabFingerprint(file, corpus.fingerprint);
    corpus.fingerprint = PplabFingerprint(raw, corpus.fingerprint);
    corpus.bytes += raw.size();
    std::string extension = fs::path(file).extension().string();
    std::transform(extension.begin(), extension.end(), extension.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    const size_t before = corpus.documents.size();
    if (extension == ".jsonl") {  // records.JSONL too
      ReadRecords(file, raw, corpus, flag);
    } else {
      SplitDocuments(Clean(raw), corpus.documents);
      corpus.prompts.resize(corpus.documents.size());
    }
    if (corpus.documents.size() == before) empty_files.push_back(file);
  }
  // Alone, such a file is an error (below); beside others, it is said.
  if (!empty_files.empty() && empty_files.size() < corpus.files.size()) {
    corpus.notes.push_back(flag + " " + empty_files.front() +
                           (empty_files.size() > 1 ? " and " + std::to_string(empty_files.size() - 1) + " more" : "") +
                           ": no text in it (blank, or records with nothing to read); it adds no document");
  }
  if (!corpus.chats.empty()) corpus.chats.resize(corpus.documents.size());
  if (corpus.documents.empty()) {
    std::string given;
    for (const std::string& path : paths) given += (given.empty() ? "" : ", ") + path;
    throw Error(flag + ": no text in " + given);
  }
  return corpus;
}

}  // namespace pplab
