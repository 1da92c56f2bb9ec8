#include "runtime/data/chat.h"

#include <cctype>

#include "runtime/data/tokenizer.h"

namespace pplab {
namespace {

// The pieces of one message in a layout: before the content (read), the
// end of its turn (learned for an assistant) and after that (read).
struct Frame {
  std::string head, end, tail;
  bool eos_end = false;  // the turn ends with the EOS token instead of `end`
};

Frame FrameOf(const std::string& role, ChatLayout layout) {
  switch (layout) {
    case ChatLayout::kLlama3:
      return {"<|start_header_id|>" + role + "<|end_header_id|>\n\n", "<|eot_id|>", ""};
    case ChatLayout::kChatMl:
      return {"<|im_start|>" + role + "\n", "<|im_end|>", "\n"};
    case ChatLayout::kPlain:
      break;
  }
  std::string name = role;
  if (!name.empty()) name[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(name[0])));
  if (role == "assistant") return {name + ": ", "", "", true};
  return {name + ": ", "\n", ""};
}

void Add(std::vector<ChatSpan>& spans, const std::string& text, bool learn) {
  if (text.empty()) return;
  if (!spans.empty() && spans.back().learn == learn && !spans.back().eos) {
    spans.back().text += text;
  } else {
    spans.push_back({text, learn, false});
  }
}

}  // namespace

const char* ChatLayoutName(ChatLayout layout) {
  switch (layout) {
    case ChatLayout::kLlama3:
      return "llama3";
    case ChatLayout::kChatMl:
      return "chatml";
    case ChatLayout::kPlain:
      break;
  }
  return "plain";
}

ChatLayout ChatLayoutFor(const Tokenizer& tokenizer) {
  const auto has = [&tokenizer](const char* text) { return tokenizer.SpecialToken(text).has_value(); };
  if (has("<|start_header_id|>") && has("<|end_header_id|>") && has("<|eot_id|>")) return ChatLayout::kLlama3;
  if (has("<|im_start|>") && has("<|im_end|>")) return ChatLayout::kChatMl;
  return ChatLayout::kPlain;
}

std::vector<ChatSpan> RenderChat(const std::vector<ChatMessage>& messages, ChatLayout layout) {
  std::vector<ChatSpan> spans;
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    const Frame f = FrameOf(m.role, layout);
    const bool learn = m.role == "assistant";
    Add(spans, f.head, false);
    Add(spans, m.content, learn);
    Add(spans, f.end, learn);
    // The last message's EOS is the one every document ends with.
    if (f.eos_end && i + 1 < messages.size()) spans.push_back({"", learn, true});
    Add(spans, f.tail, false);
  }
  return spans;
}

std::vector<ChatSpan> RenderChatPrompt(const std::vector<ChatMessage>& messages, ChatLayout layout) {
  std::vector<ChatSpan> spans = RenderChat(messages, layout);
  if (layout == ChatLayout::kPlain && !messages.empty() && messages.back().role == "assistant") {
    spans.push_back({"", false, true});
  }
  for (ChatSpan& s : spans) s.learn = false;
  Add(spans, FrameOf("assistant", layout).head, false);
  return spans;
}

int32_t ChatTurnEnd(ChatLayout layout, const Tokenizer& tokenizer) {
  const std::string end = FrameOf("assistant", layout).end;
  if (end.empty()) return tokenizer.Eos();
  return tokenizer.SpecialToken(end).value_or(tokenizer.Eos());
}

void EncodeChat(const std::vector<ChatSpan>& spans, const Tokenizer& tokenizer, int32_t read_bit,
                std::vector<int32_t>& out) {
  for (const ChatSpan& s : spans) {
    const int32_t bit = s.learn ? 0 : read_bit;
    if (s.eos) {
      out.push_back(tokenizer.Eos() | bit);
      continue;
    }
    for (int32_t id : tokenizer.Encode(s.text)) out.push_back(id | bit);
  }
}

}  // namespace pplab
