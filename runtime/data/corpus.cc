#include "runtime/data/corpus.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "runtime/data/fnv.h"
#include "schedules/error.h"
#include "schedules/file_io.h"

namespace fs = std::filesystem;

namespace pplab {
namespace {

// Byte offset of the first invalid UTF-8 sequence, or npos.
size_t InvalidUtf8At(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = s[i];
    int extra = c < 0x80 ? 0 : (c >> 5) == 0x6 ? 1 : (c >> 4) == 0xE ? 2 : (c >> 3) == 0x1E ? 3 : -1;
    if (extra < 0 || (extra > 0 && i + extra >= s.size())) return i;
    for (int k = 1; k <= extra; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) >> 6) != 0x2) return i;
    }
    i += extra + 1;
  }
  return std::string::npos;
}

// Undoes overstrikes and drops control characters other than \n and \t.
std::string Clean(const std::string& raw) {
  std::string out;
  out.reserve(raw.size());
  for (char ch : raw) {
    if (ch == '\b') {
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
  size_t pos = 0;
  for (int line_number = 1; pos < text.size(); ++line_number) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    if (Trim(line).empty()) continue;
    const std::string where = flag + " " + file + ":" + std::to_string(line_number) + ": ";
    nlohmann::json record;
    try {
      record = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      throw Error(where + "not a JSON object (" + e.what() + ")");
    }
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
}

std::string DefaultCorpusDir() { return "/usr/share/games/fortunes"; }

Corpus ReadCorpus(const std::vector<std::string>& paths, const std::string& flag) {
  Corpus corpus;
  corpus.fingerprint = kPplabFingerprintBasis;
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
      for (const std::string& name : names) {
        const fs::path file = fs::path(path) / name;
        if (name[0] == '.' || file.extension() == ".dat") continue;
        if (file.extension() == ".u8") continue;  // Debian's UTF-8 aliases of the same files
        if (fs::is_regular_file(file, ec)) files.push_back(file.string());
      }
      std::sort(files.begin(), files.end());
      if (files.empty()) throw Error(flag + " " + path + ": the directory holds no text files");
      corpus.files.insert(corpus.files.end(), files.begin(), files.end());
    } else if (fs::exists(path, ec)) {
      corpus.files.push_back(path);
    } else {
      throw Error(flag + " " + path + ": no such file or directory");
    }
  }
  for (const std::string& file : corpus.files) {
    const std::string raw = ReadTextFile(file);
    const size_t bad = InvalidUtf8At(raw);
    if (bad != std::string::npos) {
      throw Error(flag + " " + file + ": not UTF-8 text (invalid byte at offset " + std::to_string(bad) + ")");
    }
    corpus.fingerprint = PplabFingerprint(file, corpus.fingerprint);
    corpus.fingerprint = PplabFingerprint(raw, corpus.fingerprint);
    corpus.bytes += raw.size();
    if (fs::path(file).extension() == ".jsonl") {
      ReadRecords(file, raw, corpus, flag);
    } else {
      SplitDocuments(Clean(raw), corpus.documents);
      corpus.prompts.resize(corpus.documents.size());
    }
  }
  if (!corpus.chats.empty()) corpus.chats.resize(corpus.documents.size());
  if (corpus.documents.empty()) {
    throw Error("--data: no text in " + (corpus.files.size() == 1 ? corpus.files[0] : "the given files"));
  }
  return corpus;
}

}  // namespace pplab
