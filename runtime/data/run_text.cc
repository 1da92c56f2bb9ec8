#include "runtime/data/run_text.h"

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "runtime/data/fnv.h"
#include "schedules/error.h"

namespace pplab {

std::unique_ptr<RunText> OpenRunText(const TextSource& source, TextDataOptions data,
                                     const std::function<void(const std::string&)>& log,
                                     const std::optional<PreparedText>& prepared) {
  auto text = std::make_unique<RunText>();
  text->prepared = prepared ? *prepared : PrepareText(source, log);
  text->tokenizer.emplace(Tokenizer::Load(text->prepared.tokenizer_path));
  text->cache = std::make_unique<TokenCache>(text->prepared.cache_path, text->prepared.corpus_fingerprint,
                                             text->prepared.tokenizer_fingerprint);
  text->cache->CheckIds(text->tokenizer->VocabSize());
  data.bos = text->tokenizer->Bos();
  data.eos = text->tokenizer->Eos();
  data.pad = text->tokenizer->Pad();
  text->dataset = std::make_unique<TextDataset>(*text->cache, data);
  return text;
}

std::string PreparedTextEnv(const PreparedText& p) {
  const nlohmann::json j = {{"tokenizer_path", p.tokenizer_path},
                            {"cache_path", p.cache_path},
                            {"corpus", FnvHex(p.corpus_fingerprint)},
                            {"tokenizer", FnvHex(p.tokenizer_fingerprint)},
                            {"documents", p.documents},
                            {"tokens", p.tokens},
                            {"chats", p.chats}};
  return std::string(kPreparedTextEnv) + "=" + j.dump();
}

std::optional<PreparedText> PreparedTextFromEnv() {
  const char* text = std::getenv(kPreparedTextEnv);
  if (text == nullptr) return std::nullopt;
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    PreparedText p;
    p.tokenizer_path = j.at("tokenizer_path").get<std::string>();
    p.cache_path = j.at("cache_path").get<std::string>();
    p.corpus_fingerprint = std::stoull(j.at("corpus").get<std::string>(), nullptr, 16);
    p.tokenizer_fingerprint = std::stoull(j.at("tokenizer").get<std::string>(), nullptr, 16);
    p.documents = j.at("documents").get<int64_t>();
    p.tokens = j.at("tokens").get<int64_t>();
    p.chats = j.at("chats").get<bool>();
    return p;
  } catch (const std::exception& e) {
    throw Error(std::string("environment variable ") + kPreparedTextEnv + " is malformed: " + e.what());
  }
}

}  // namespace pplab
