// Fuzzes the reader of --data *.jsonl records (prompt/completion, chats,
// text): the bytes as a file's content; when they are accepted, every chat
// is rendered in the three layouts.
#include <cstddef>
#include <cstdint>
#include <string>

#include "runtime/data/chat.h"
#include "runtime/data/corpus.h"
#include "schedules/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    pplab::Corpus corpus;
    pplab::ReadRecords("fuzz.jsonl", std::string(reinterpret_cast<const char*>(data), size), corpus);
    if (corpus.prompts.size() != corpus.documents.size()) __builtin_trap();
    if (!corpus.chats.empty() && corpus.chats.size() != corpus.documents.size()) __builtin_trap();
    for (const auto& chat : corpus.chats) {
      for (const pplab::ChatLayout layout :
           {pplab::ChatLayout::kPlain, pplab::ChatLayout::kLlama3, pplab::ChatLayout::kChatMl}) {
        (void)pplab::RenderChat(chat, layout);
        (void)pplab::RenderChatPrompt(chat, layout);
      }
    }
  } catch (const pplab::Error&) {
  }
  return 0;
}
