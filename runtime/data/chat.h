// Chat records: a conversation laid out as a chat model reads it, and the
// parts of it the loss learns. No LibTorch.
//
// A record {"messages": [{"role": ..., "content": ...}, ...]} (corpus.h) is
// rendered in the layout of the tokenizer's model family, told from its
// special tokens (ChatLayoutFor):
//
//   kLlama3  <|start_header_id|>ROLE<|end_header_id|>\n\nCONTENT<|eot_id|>
//   kChatMl  <|im_start|>ROLE\nCONTENT<|im_end|>\n       (Qwen 2, 2.5, 3)
//   kPlain   Role: CONTENT\n, an assistant's CONTENT EOS (any other tokenizer)
//
// per message, in order. The loss learns each assistant message's content
// and the token that ends its turn (<|eot_id|>, <|im_end|>, or for kPlain
// the tokenizer's EOS, as Llama 2's chat format ends an answer with </s>;
// a chat's last message takes the document's own EOS), so the model learns
// to answer and to stop; everything else (system and user messages, every
// header) is read but not learned. The
// default system prompts that some published templates insert when a chat
// has none (Llama 3.1's date lines, Qwen 2.5's "You are Qwen...") are not
// added: a chat that wants one carries it as its first message.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace pplab {

class Tokenizer;

struct ChatMessage {
  std::string role;  // "system", "user", "assistant", or another role (read, never learned)
  std::string content;
};

enum class ChatLayout { kPlain, kLlama3, kChatMl };

// "plain", "llama3" or "chatml".
const char* ChatLayoutName(ChatLayout layout);

// kLlama3 when the tokenizer has <|start_header_id|>, <|end_header_id|> and
// <|eot_id|> as special tokens, kChatMl when it has <|im_start|> and
// <|im_end|>, else kPlain (every SentencePiece model among them).
ChatLayout ChatLayoutFor(const Tokenizer& tokenizer);

// One stretch of a rendered chat: its text, or the tokenizer's EOS, and
// whether the loss learns it. Each span is encoded on its own, so a special
// token's text (as "<|eot_id|>") becomes its one id, and no BPE merge
// crosses from a learned span into a read one.
struct ChatSpan {
  std::string text;
  bool learn = false;
  bool eos = false;  // the EOS token (text empty)
};

// The chat in `layout` as spans; adjacent text spans of one kind are
// joined, and none is empty.
std::vector<ChatSpan> RenderChat(const std::vector<ChatMessage>& messages, ChatLayout layout);

// What a chat model is given to answer `messages`: their rendering, then
// the header of an assistant message (all read).
std::vector<ChatSpan> RenderChatPrompt(const std::vector<ChatMessage>& messages, ChatLayout layout);

// The id that ends an assistant's turn in `layout` under `tokenizer`
// (<|eot_id|>, <|im_end|>, or EOS).
int32_t ChatTurnEnd(ChatLayout layout, const Tokenizer& tokenizer);

// Appends the ids of `spans` to `out`, each span encoded on its own; the
// ids of spans not learned are or-ed with `read_bit` (kNoLossBit, or 0).
void EncodeChat(const std::vector<ChatSpan>& spans, const Tokenizer& tokenizer, int32_t read_bit,
                std::vector<int32_t>& out);

}  // namespace pplab
