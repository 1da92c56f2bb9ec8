// Chat records (runtime/data/chat.cc): the three layouts written out by
// hand, the layout a tokenizer implies, the records' checks in ReadCorpus,
// and the token cache's ids and no-loss bits for a chat.
#include "runtime/data/chat.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "runtime/data/corpus.h"
#include "runtime/data/token_cache.h"
#include "runtime/data/tokenizer.h"
#include "schedules/error.h"
#include "schedules/file_io.h"
#include "tests/byte_level_json.h"

namespace pplab::chat_test {
namespace {

std::string Tmp(const std::string& name) {
  const std::string dir = std::string(PPLAB_TEST_TMP_DIR) + "/chat_" + name;
  RemoveTree(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

const std::vector<ChatMessage> kChat = {
    {"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello."}, {"user", "2+2?"}, {"assistant", "4"}};

// The spans as (text, learn) pairs, EOS as "EOS", for a readable mismatch.
std::vector<std::pair<std::string, bool>> Pairs(const std::vector<ChatSpan>& spans) {
  std::vector<std::pair<std::string, bool>> out;
  for (const ChatSpan& s : spans) {
    CHECK(s.text.empty() == s.eos);
    out.emplace_back(s.eos ? "EOS" : s.text, s.learn);
  }
  return out;
}

TEST_CASE("a chat renders in each layout, learning the assistant's words and the end of its turn", "[data][chat]") {
  using P = std::vector<std::pair<std::string, bool>>;
  CHECK(Pairs(RenderChat(kChat, ChatLayout::kLlama3)) ==
        P{{"<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
           "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
           "<|start_header_id|>assistant<|end_header_id|>\n\n",
           false},
          {"Hello.<|eot_id|>", true},
          {"<|start_header_id|>user<|end_header_id|>\n\n2+2?<|eot_id|>"
           "<|start_header_id|>assistant<|end_header_id|>\n\n",
           false},
          {"4<|eot_id|>", true}});
  CHECK(Pairs(RenderChat(kChat, ChatLayout::kChatMl)) ==
        P{{"<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", false},
          {"Hello.<|im_end|>", true},
          {"\n<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n", false},
          {"4<|im_end|>", true},
          {"\n", false}});
  // Plain: an answer ends with EOS, the last one with the document's own.
  CHECK(Pairs(RenderChat(kChat, ChatLayout::kPlain)) == P{{"System: Be brief.\nUser: Hi\nAssistant: ", false},
                                                          {"Hello.", true},
                                                          {"EOS", true},
                                                          {"User: 2+2?\nAssistant: ", false},
                                                          {"4", true}});
  // Another role is read like a user's; an empty answer still learns the
  // end of its turn.
  CHECK(Pairs(RenderChat({{"tool", "42"}, {"assistant", ""}, {"user", "?"}}, ChatLayout::kPlain)) ==
        P{{"Tool: 42\nAssistant: ", false}, {"EOS", true}, {"User: ?\n", false}});
  // What generate gives a chat model: the chat, then an assistant's header.
  const std::vector<ChatMessage> asked = {{"system", "Be brief."}, {"user", "Hi"}};
  CHECK(Pairs(RenderChatPrompt(asked, ChatLayout::kLlama3)) ==
        P{{"<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
           "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
           "<|start_header_id|>assistant<|end_header_id|>\n\n",
           false}});
  CHECK(Pairs(RenderChatPrompt(asked, ChatLayout::kChatMl)) ==
        P{{"<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", false}});
  CHECK(Pairs(RenderChatPrompt({{"user", "Hi"}, {"assistant", "Yo"}}, ChatLayout::kPlain)) ==
        P{{"User: Hi\nAssistant: ", false}, {"Yo", false}, {"EOS", false}, {"Assistant: ", false}});
  CHECK(std::string(ChatLayoutName(ChatLayout::kChatMl)) == "chatml");
}

TEST_CASE("the layout follows the tokenizer's special tokens, and a chat's read spans carry the no-loss bit",
          "[data][chat]") {
  const std::string dir = Tmp("layout");
  test::Spec s;
  s.merges = {{"H", "i"}};
  const auto load = [&](std::vector<std::string> added) {
    s.added = std::move(added);
    WriteTextFile(dir + "/tokenizer.json", test::Build(s).dump());
    return Tokenizer::Load(dir + "/tokenizer.json");
  };
  // Llama 3's names.
  const Tokenizer llama = load({"<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
                                "<|eot_id|>", "<|finetune_right_pad_id|>"});
  CHECK(ChatLayoutFor(llama) == ChatLayout::kLlama3);
  CHECK(llama.SpecialToken("<|eot_id|>") == 261);
  CHECK(ChatTurnEnd(ChatLayout::kLlama3, llama) == 261);
  CHECK(ChatTurnEnd(ChatLayout::kPlain, llama) == llama.Eos());
  CHECK_FALSE(llama.SpecialToken("<|im_end|>").has_value());
  const Tokenizer qwen = load({"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|video_pad|>"});
  CHECK(ChatLayoutFor(qwen) == ChatLayout::kChatMl);
  CHECK(ChatTurnEnd(ChatLayout::kChatMl, qwen) == 259);
  CHECK(qwen.Pad() == 260);  // not <|im_end|>, whose targets a chat learns
  // EOS spans, and no bit on read ids when asked for none.
  std::vector<int32_t> ids;
  EncodeChat({{"Hi", false, false}, {"", true, true}, {"H", true, false}}, qwen, kNoLossBit, ids);
  CHECK(ids == std::vector<int32_t>{256 | kNoLossBit, qwen.Eos(), 'H'});
  ids.clear();
  EncodeChat({{"Hi", false, false}}, qwen, 0, ids);
  CHECK(ids == std::vector<int32_t>{256});
  // Llama 3 without <|eot_id|> is not its chat layout.
  CHECK(ChatLayoutFor(load({"<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
                            "<|finetune_right_pad_id|>"})) == ChatLayout::kPlain);

  // The cache of one chat under Llama 3's tokenizer: byte b is id b, "Hi"
  // 256, the specials 257...
  WriteTextFile(
      dir + "/chat.jsonl",
      nlohmann::json{{"messages", {{{"role", "user"}, {"content", "Hi"}}, {{"role", "assistant"}, {"content", "ok"}}}}}
              .dump() +
          "\n");
  const Corpus corpus = ReadCorpus({dir + "/chat.jsonl"});
  WriteTokenCache(corpus, llama, dir + "/tokens.bin");
  const TokenCache cache(dir + "/tokens.bin", corpus.fingerprint, llama.Fingerprint());
  const int32_t start = 259, end = 260, eot = 261, r = kNoLossBit;
  const std::vector<int32_t> want = {
      start | r, 'u' | r,  's' | r,  'e' | r, 'r' | r, end | r, '\n' | r, '\n' | r, 256 | r, eot | r,  // user: read
      start | r, 'a' | r,  's' | r,  's' | r, 'i' | r, 's' | r, 't' | r,  'a' | r,  'n' | r, 't' | r,
      end | r,   '\n' | r, '\n' | r,  // the assistant's header: read
      'o',       'k',      eot};      // its answer and the end of its turn: learned
  CHECK(std::vector<int32_t>(cache.DocBegin(0), cache.DocBegin(0) + cache.DocSize(0)) == want);
}

TEST_CASE("chat records are read with their roles, and a bad one is one line naming the line and the field",
          "[data][chat]") {
  const std::string dir = Tmp("records");
  WriteTextFile(dir + "/mixed.jsonl",
                "{\"text\": \"plain\"}\n"
                "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": \"assistant\", \"content\": "
                "\" there\\u0007\"}]}\n"
                "{\"prompt\": \"Q\", \"completion\": \"A\"}\n");
  const Corpus c = ReadCorpus({dir + "/mixed.jsonl"});
  REQUIRE(c.chats.size() == 3);
  CHECK(c.chats[0].empty());
  REQUIRE(c.chats[1].size() == 2);
  CHECK(c.chats[1][1].role == "assistant");
  CHECK(c.chats[1][1].content == " there");  // cleaned as any text
  CHECK(c.chats[2].empty());
  // The document is the chat's plain layout: what a tokenizer trained here
  // learns from.
  CHECK(c.documents == std::vector<std::string>{"plain", "User: Hi\nAssistant:  there", "A"});
  CHECK(c.prompts == std::vector<std::string>{"", "", "Q"});
  // A file without chats has none.
  WriteTextFile(dir + "/plain.jsonl", "{\"text\": \"plain\"}\n");
  CHECK(ReadCorpus({dir + "/plain.jsonl"}).chats.empty());

  for (const auto& [line, message] : std::vector<std::pair<std::string, std::string>>{
           {R"({"messages": []})", "bad.jsonl:2: \"messages\" is not a list of messages"},
           {R"({"messages": "hi"})", "bad.jsonl:2: \"messages\" is not a list of messages"},
           {R"({"messages": [{"role": "user"}]})",
            "bad.jsonl:2: \"messages\"[0] is not {\"role\": ..., \"content\": ...}"},
           {R"({"messages": [{"role": "assistant", "content": null}]})",
            "bad.jsonl:2: \"messages\"[0].content is not a string"},
           {R"({"messages": [{"role": "user", "content": "a"}, {"role": 1, "content": "b"}]})",
            "bad.jsonl:2: \"messages\"[1].role is not a string"},
           {R"({"messages": [{"role": "", "content": "a"}]})", "bad.jsonl:2: \"messages\"[0].role is empty"},
           {R"({"messages": [{"role": "user", "content": "a"}]})",
            "bad.jsonl:2: \"messages\" has no \"assistant\" message, so nothing to learn"},
           {R"({"messages": [{"role": "assistant", "content": "a"}], "prompt": "p"})",
            "bad.jsonl:2: \"messages\" takes no \"prompt\""},
           {R"({"messages": [{"role": "assistant", "content": "a"}], "text": "t"})", "bad.jsonl:2: a record is"}}) {
    INFO(line);
    WriteTextFile(dir + "/bad.jsonl", "{\"text\": \"fine\"}\n" + line + "\n");
    CHECK_THROWS_WITH(ReadCorpus({dir + "/bad.jsonl"}), Catch::Contains(message));
  }
}

TEST_CASE("the kept fuzz inputs of the records harness are read or refused with pplab::Error", "[data][chat][fuzz]") {
  const std::string dir = std::string(PPLAB_TEST_DATA_DIR) + "/fuzz/records/";
  int files = 0;
  for (const std::string& name : ListDirectory(dir)) {
    INFO(name);
    Corpus corpus;
    try {
      ReadRecords(name, ReadTextFile(dir + name), corpus);
    } catch (const Error&) {
      ++files;
      continue;
    }
    CHECK(corpus.prompts.size() == corpus.documents.size());
    CHECK((corpus.chats.empty() || corpus.chats.size() == corpus.documents.size()));
    for (const auto& chat : corpus.chats) {
      for (const ChatLayout layout : {ChatLayout::kPlain, ChatLayout::kLlama3, ChatLayout::kChatMl}) {
        CHECK_NOTHROW(RenderChat(chat, layout));
      }
    }
    ++files;
  }
  CHECK(files >= 2);
}

}  // namespace
}  // namespace pplab::chat_test
