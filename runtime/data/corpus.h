// Corpus: UTF-8 text files read as a list of documents. No LibTorch.
//
// A file whose lines include a lone "%" (the fortune format) is split at
// those lines; any other file is split at blank lines (paragraphs). A
// directory stands for its regular files, sorted by name, except hidden ones
// and fortune indexes (*.dat). Backspace overstrikes ("_\bx") are undone and
// other control characters except newline and tab dropped; documents are
// trimmed and empty ones skipped.
//
// A file named *.jsonl holds one record per line, a JSON object, one of
//  - {"prompt": ..., "completion": ...}: a document whose prompt the loss
//    does not predict (supervised fine-tuning);
//  - {"messages": [{"role": ..., "content": ...}, ...]}: a chat, whose
//    assistant messages the loss learns (chat.h; it needs one at least);
//  - {"text": ...}: a plain document.
// Its text is cleaned as above but not trimmed (a completion's leading
// space belongs to it); blank lines are skipped. Other keys of a record
// (an "id", a source) are ignored, and named in the corpus's notes, so that
// a misspelt "promt" does not pass unseen.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/data/chat.h"

namespace pplab {

struct Corpus {
  std::vector<std::string> files;      // the files read, in order
  std::vector<std::string> documents;  // in file order (a record's completion; a chat's kPlain text)
  std::vector<std::string> prompts;    // by document: its prompt, "" for plain text
  // By document: a chat record's messages, none for any other document;
  // empty when no record is a chat.
  std::vector<std::vector<ChatMessage>> chats;
  uint64_t fingerprint = 0;  // FNV-1a over every file's name and bytes
  size_t bytes = 0;          // total size of the files
  // Lines for the user about what was read but not used: a .jsonl file's
  // record keys that are none of the above ("--data d.jsonl: ignored the
  // key \"promt\" in 3 records (first at line 1); ..."), one line a file.
  std::vector<std::string> notes;
};

// Throws pplab::Error naming the path when a file is missing, unreadable,
// not UTF-8 (with the byte offset), a .jsonl line is not such a record
// (with the line number and the field), or when no document is found at all.
// Its errors start with `flag` and the path ("--data notes.txt: ...").
Corpus ReadCorpus(const std::vector<std::string>& paths, const std::string& flag = "--data");

// Appends the records of `text`, a .jsonl file's content (one record per
// line, as above; `file` names it in errors), to `corpus`'s documents,
// prompts and chats, cleaned. Throws pplab::Error naming file:line and the
// field, after `flag`. ReadCorpus calls it for each *.jsonl file.
void ReadRecords(const std::string& file, const std::string& text, Corpus& corpus, const std::string& flag = "--data");

// The corpus used when --data is absent: the English text of Debian's
// `fortunes` packages (/usr/share/games/fortunes).
std::string DefaultCorpusDir();

}  // namespace pplab
