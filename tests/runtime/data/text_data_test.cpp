// Text data without LibTorch: corpus reading, the tokenizer, the token cache
// and the samples and their order.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <set>

#include "runtime/data/corpus.h"
#include "runtime/data/text_dataset.h"
#include "runtime/data/text_prepare.h"
#include "runtime/data/token_cache.h"
#include "runtime/data/tokenizer.h"
#include "schedules/error.h"
#include "schedules/file_io.h"

namespace fs = std::filesystem;

namespace pplab::text_data_test {
namespace {

const std::string kText = std::string(PPLAB_TEST_DATA_DIR) + "/text";

std::string Tmp(const std::string& name) {
  const std::string dir = std::string(PPLAB_TEST_TMP_DIR) + "/text_data_" + name;
  RemoveTree(dir);
  fs::create_directories(dir);
  return dir;
}

// The test corpus's tokenizer and cache, built once per test process (ctest
// runs test cases as parallel processes: each gets its own directory).
const PreparedText& Prepared() {
  static const PreparedText prepared = [] {
    TextSource source;
    source.paths = {kText + "/fortunes.txt"};
    source.vocab_size = 200;
    source.cache_dir = Tmp("cache_" + std::to_string(::getpid()));
    return PrepareText(source, nullptr);
  }();
  return prepared;
}

}  // namespace

TEST_CASE("a fortune file splits at % lines, a plain file at blank lines", "[data]") {
  const Corpus fortunes = ReadCorpus({kText + "/fortunes.txt"});
  CHECK(fortunes.documents.size() == 120);
  const Corpus paragraphs = ReadCorpus({kText + "/paragraphs.txt"});
  CHECK(paragraphs.documents.size() == 40);
  for (const std::string& d : paragraphs.documents) {
    CHECK(!d.empty());
    CHECK(d.find("\n\n") == std::string::npos);
  }
  // A directory is its files in name order.
  const Corpus both = ReadCorpus({kText});
  CHECK(both.documents.size() == 160);
  CHECK(both.documents.front() == fortunes.documents.front());
  CHECK(both.fingerprint != fortunes.fingerprint);
}

TEST_CASE("overstrikes are undone and control characters dropped", "[data]") {
  const std::string dir = Tmp("overstrike");
  WriteTextFile(dir + "/a.txt", "_\bb_\bo_\bl_\bd text\x01 here\n%\nsecond\n");
  const Corpus c = ReadCorpus({dir + "/a.txt"});
  REQUIRE(c.documents.size() == 2);
  CHECK(c.documents[0] == "bold text here");
  CHECK(c.documents[1] == "second");
}

TEST_CASE("lines ended by LF, CRLF or a lone CR (old Mac OS) read as the same documents", "[data]") {
  const std::string dir = Tmp("line_ends");
  WriteTextFile(dir + "/lf.txt", "one\ntwo\n\nthree\n");
  WriteTextFile(dir + "/crlf.txt", "one\r\ntwo\r\n\r\nthree\r\n");
  WriteTextFile(dir + "/cr.txt", "one\rtwo\r\rthree\r");
  const std::vector<std::string> lf = ReadCorpus({dir + "/lf.txt"}).documents;
  REQUIRE(lf.size() == 2);  // a blank line between documents
  CHECK(ReadCorpus({dir + "/crlf.txt"}).documents == lf);
  CHECK(ReadCorpus({dir + "/cr.txt"}).documents == lf);  // was one document, "onetwothree"
}

TEST_CASE("what a folder or a file given to --data adds nothing of is said in a note", "[data]") {
  const std::string dir = Tmp("not_read");
  fs::create_directories(dir + "/d/sub");
  WriteTextFile(dir + "/d/a.txt", "some text\n");
  WriteTextFile(dir + "/d/sub/b.txt", "a subfolder's text\n");
  WriteTextFile(dir + "/blank.txt", "\n  \n");
  const Corpus c = ReadCorpus({dir + "/d", dir + "/blank.txt"});
  CHECK(c.documents == std::vector<std::string>{"some text"});
  REQUIRE(c.notes.size() == 2);
  CHECK_THAT(c.notes[0], Catch::StartsWith("--data " + dir + "/d: 1 entry not read (sub): a folder's files are read"));
  CHECK(c.notes[1] ==
        "--data " + dir + "/blank.txt: no text in it (blank, or records with nothing to read); it adds no document");
  // A loop of links is named as one, not as a missing file.
  REQUIRE(std::system(("ln -sf loop_b " + dir + "/loop_a && ln -sf loop_a " + dir + "/loop_b").c_str()) == 0);
  CHECK_THROWS_WITH(ReadCorpus({dir + "/loop_a"}),
                    Catch::Equals("--data " + dir + "/loop_a: Too many levels of symbolic links"));
}

TEST_CASE("bad text input names the file", "[data]") {
  const std::string dir = Tmp("bad");
  WriteTextFile(dir + "/empty.txt", "\n\n  \n");
  WriteTextFile(dir + "/binary.txt", std::string("ok\xff\xfe", 4));
  CHECK_THROWS_WITH(ReadCorpus({dir + "/missing.txt"}), Catch::Contains("missing.txt: no such file"));
  CHECK_THROWS_WITH(ReadCorpus({dir + "/empty.txt"}), Catch::Contains("no text in " + dir + "/empty.txt"));
  CHECK_THROWS_WITH(ReadCorpus({dir + "/binary.txt"}), Catch::Contains("not UTF-8 text (invalid byte at offset 2)"));
  // Sequences whose bits look right but that Unicode forbids: an overlong
  // '/', a surrogate, a code point above U+10FFFF.
  for (const std::string& bad : {std::string("ab\xC0\xAF"), std::string("ab\xED\xA0\x80"),
                                 std::string("ab\xF4\x90\x80\x80"), std::string("ab\xE0\x80\xAF")}) {
    WriteTextFile(dir + "/forbidden.txt", bad);
    CHECK_THROWS_WITH(ReadCorpus({dir + "/forbidden.txt"}),
                      Catch::EndsWith("forbidden.txt: not UTF-8 text (invalid byte at offset 2)"));
  }
  WriteTextFile(dir + "/fine.txt", "ab \xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80 \xF4\x8F\xBF\xBF");
  CHECK(ReadCorpus({dir + "/fine.txt"}).documents.size() == 1);
  WriteTextFile(dir + "/empty2.txt", "\n");
  CHECK_THROWS_WITH(ReadCorpus({dir + "/empty.txt", dir + "/empty2.txt"}),
                    "--data: no text in " + dir + "/empty.txt, " + dir + "/empty2.txt");
}

TEST_CASE("a file is read once: a folder's second name for it is skipped, and one given twice is refused", "[data]") {
  const std::string dir = Tmp("twice");
  WriteTextFile(dir + "/a.txt", "first\n\nsecond\n");
  WriteTextFile(dir + "/b.txt", "third\n");
  // Debian's fortunes keep a UTF-8 alias of each file (art.u8 -> art); a
  // plain file named .u8 is text like any other.
  REQUIRE(::symlink("a.txt", (dir + "/a.txt.u8").c_str()) == 0);
  REQUIRE(::link((dir + "/b.txt").c_str(), (dir + "/c.txt").c_str()) == 0);
  WriteTextFile(dir + "/notes.u8", "fourth\n");
  const Corpus c = ReadCorpus({dir});
  CHECK(c.files == std::vector<std::string>{dir + "/a.txt", dir + "/b.txt", dir + "/notes.u8"});
  CHECK(c.documents == std::vector<std::string>{"first", "second", "third", "fourth"});
  // Records in any case of the extension.
  WriteTextFile(dir + "/upper.JSONL", "{\"prompt\": \"Q\", \"completion\": \" A\"}\n");
  const Corpus upper = ReadCorpus({dir + "/upper.JSONL"});
  CHECK(upper.documents == std::vector<std::string>{" A"});
  CHECK(upper.prompts == std::vector<std::string>{"Q"});
  CHECK_THROWS_WITH(
      ReadCorpus({dir + "/a.txt", dir + "/a.txt"}),
      "--data " + dir + "/a.txt: " + dir + "/a.txt is " + dir +
          "/a.txt, read already (a file given twice, or inside a folder also given): give each file once");
  CHECK_THROWS_WITH(ReadCorpus({dir, dir + "/b.txt"}), Catch::StartsWith("--data " + dir + "/b.txt: " + dir +
                                                                         "/b.txt is " + dir + "/b.txt, read already"));
  CHECK_THROWS_WITH(ReadCorpus({dir + "/c.txt", dir}),
                    Catch::StartsWith("--data " + dir + ": " + dir + "/b.txt is " + dir + "/c.txt, read already"));
}

TEST_CASE("a trained tokenizer round-trips text and has PAD 0, BOS 2, EOS 3", "[data]") {
  const Tokenizer t = Tokenizer::Load(Prepared().tokenizer_path);
  CHECK(t.VocabSize() == 200);
  CHECK(t.Pad() == 0);
  CHECK(t.Bos() == 2);
  CHECK(t.Eos() == 3);
  const std::string text = "The pipeline sends a message to its neighbour.";
  const std::vector<int32_t> ids = t.Encode(text);
  CHECK(ids.size() < text.size());  // pieces, not characters
  CHECK(t.Decode(ids) == text);
  // Training is deterministic: the same corpus gives the same model bytes.
  const std::string again = Tmp("again") + "/t.model";
  TrainTokenizer(ReadCorpus({kText + "/fortunes.txt"}).documents, 200, again);
  CHECK(ReadTextFile(again) == ReadTextFile(Prepared().tokenizer_path));
  CHECK_THROWS_WITH(Tokenizer::Load(kText + "/fortunes.txt"), Catch::Contains("not a SentencePiece model"));
  // Its pieces, as the model spells them: the special ones, and words with
  // their start marked by U+2581, so the pieces of a text put together give
  // the text, each word start a space (SentencePiece adds one at the front).
  CHECK(t.Piece(0) == "<pad>");
  CHECK(t.Piece(2) == "<s>");
  CHECK(t.Piece(3) == "</s>");
  CHECK(t.Piece(-1).empty());
  CHECK(t.Piece(t.VocabSize()).empty());
  std::string joined;
  for (int32_t id : ids) joined += t.Piece(id);
  std::string spaced;
  for (size_t at = 0; at < joined.size();) {
    if (joined.compare(at, 3, "\xe2\x96\x81") == 0) {
      spaced += ' ';
      at += 3;
    } else {
      spaced += joined[at++];
    }
  }
  CHECK(spaced == " " + text);
}

TEST_CASE("a line longer than SentencePiece's 64 KiB sentence limit is trained on, in parts", "[data]") {
  // One 300 KB line of two words; SentencePiece skipped such a line unseen.
  std::string line;
  while (line.size() < 300000) line += "quokka zyzzyva ";
  const std::vector<std::string> fortunes = ReadCorpus({kText + "/fortunes.txt"}).documents;
  std::vector<std::string> with_line = fortunes;
  with_line.push_back(line);
  const std::string path = Tmp("long_line") + "/t.model";
  TrainTokenizer(with_line, 300, path);
  const Tokenizer t = Tokenizer::Load(path);
  CHECK(t.Encode("quokka zyzzyva").size() == 2);  // a piece for each word, learned from the line alone
  const std::string without = Tmp("long_line") + "/without.model";
  TrainTokenizer(fortunes, 300, without);
  CHECK(Tokenizer::Load(without).Encode("quokka zyzzyva").size() > 4);
  // The line alone trains too (nothing else to learn from: it was an error).
  const std::string alone = Tmp("long_line") + "/alone.model";
  TrainTokenizer({line}, 40, alone);
  CHECK(Tokenizer::Load(alone).Encode("quokka").size() == 1);
}

TEST_CASE("a run of 40000 characters without a space trains, in parts, where SentencePiece crashed", "[data]") {
  // Past 32768 characters in one word SentencePiece's BPE trainer crashed
  // (a segmentation fault); a base64 blob is such a word. The blob here is
  // "xy" repeated, with a two-byte character (U+00E9) now and then, so a
  // cut must fall between characters; with prose before and after.
  std::string blob;
  while (blob.size() < 40000) blob += blob.size() % 1000 == 0 ? "\xC3\xA9" : "xy";
  const std::vector<std::string> docs = {"some prose before the blob", "x" + blob + "y", "and some prose after it"};
  const std::string path = Tmp("long_word") + "/t.model";
  TrainTokenizer(docs, 40, path);
  const Tokenizer t = Tokenizer::Load(path);
  // What was learned from the blob: a piece of many xy's, and its text
  // decodes back (the prose's rarer letters are below the 99.95 % coverage).
  CHECK(t.Encode("xyxyxyxyxyxyxyxy").size() <= 2);
  CHECK(t.Decode(t.Encode("xy\xC3\xA9xyxy xy")) == "xy\xC3\xA9xyxy xy");
}

TEST_CASE("SentencePiece's training errors name --vocab-size and the size that would do", "[data]") {
  const std::vector<std::string> docs = ReadCorpus({kText + "/fortunes.txt"}).documents;
  const std::string path = Tmp("vocab_errors") + "/t.model";
  CHECK_THROWS_WITH(
      TrainTokenizer(docs, 8, path),
      Catch::Matches("--vocab-size 8: this corpus's characters and the special pieces need [0-9]+ pieces; "
                     "give --vocab-size [0-9]+ or more"));
  CHECK_THROWS_WITH(TrainTokenizer(docs, 1000000, path),
                    Catch::Matches("--vocab-size 1000000: BPE finds at most [0-9]+ pieces in this corpus; give "
                                   "--vocab-size [0-9]+ or less, or more text"));
  // The size named does train, also where it is below the 1024 pieces
  // from which the 256 byte pieces are in the vocabulary (the limit
  // SentencePiece gave counted them).
  std::string message;
  try {
    TrainTokenizer(docs, 1000000, path);
  } catch (const Error& e) {
    message = e.what();
  }
  const size_t at = message.find("give --vocab-size ");
  REQUIRE(at != std::string::npos);
  const int most = std::stoi(message.substr(at + 18));
  INFO(message);
  CHECK(most < 1024);
  CHECK_NOTHROW(TrainTokenizer(docs, most, path));
  CHECK(Tokenizer::Load(path).VocabSize() == most);
  // A corpus of one letter: its most is below the 8 --vocab-size takes, so
  // only more text is named (it said "give --vocab-size 7 or less").
  CHECK_THROWS_WITH(TrainTokenizer({"a"}, 8, path),
                    Catch::Matches("--vocab-size 8: BPE finds at most [0-7] pieces in this corpus, fewer than the 8 "
                                   "--vocab-size takes at the least; give more text"));
}

TEST_CASE("a tokenizer without a PAD piece, as Llama 2's, pads with its UNK piece", "[data]") {
  const std::string path = Tmp("llama2_ids") + "/t.model";
  TrainTokenizer(ReadCorpus({kText + "/fortunes.txt"}).documents, 200, path, TokenizerIds::kLlama2);
  const Tokenizer t = Tokenizer::Load(path);
  CHECK(t.VocabSize() == 200);
  CHECK(t.Pad() == 0);  // UNK
  CHECK(t.Bos() == 1);
  CHECK(t.Eos() == 2);
  const std::string text = "The pipeline sends a message to its neighbour.";
  const std::vector<int32_t> ids = t.Encode(text);
  CHECK(std::find(ids.begin(), ids.end(), 0) == ids.end());  // the corpus's characters: no UNK
  CHECK(t.Decode(ids) == text);
  CHECK(ReadTextFile(path) != ReadTextFile(Prepared().tokenizer_path));
}

TEST_CASE("a cached tokenizer that does not load is trained again, the same bytes, with a line that says so",
          "[data]") {
  TextSource source;
  source.paths = {kText + "/fortunes.txt"};
  source.vocab_size = 200;
  source.cache_dir = Tmp("cut_tokenizer");
  const PreparedText first = PrepareText(source, nullptr);
  const std::string model = ReadTextFile(first.tokenizer_path);
  // Cut to 100 bytes it parses, with the first few pieces; cut inside a
  // piece it does not ("not a SentencePiece model", on every later run).
  for (const size_t keep : {size_t{100}, size_t{37}}) {
    WriteTextFile(first.tokenizer_path, model.substr(0, keep));
    std::vector<std::string> said;
    const PreparedText again = PrepareText(source, [&](const std::string& line) { said.push_back(line); });
    CHECK(ReadTextFile(again.tokenizer_path) == model);
    CHECK(again.tokenizer_fingerprint == first.tokenizer_fingerprint);
    CHECK(again.cache_path == first.cache_path);  // the token cache of the same tokenizer stands
    REQUIRE(said.size() == 2);
    CHECK_THAT(said[0], Catch::Contains(first.tokenizer_path) && Catch::EndsWith("; training it again"));
    CHECK_THAT(said[1], Catch::StartsWith("trained a 200-piece BPE tokenizer"));
  }
}

TEST_CASE("the token cache holds each document's tokens and refuses a stale or cut file", "[data]") {
  const PreparedText& p = Prepared();
  const Tokenizer t = Tokenizer::Load(p.tokenizer_path);
  const Corpus corpus = ReadCorpus({kText + "/fortunes.txt"});
  const TokenCache cache(p.cache_path, p.corpus_fingerprint, p.tokenizer_fingerprint);
  REQUIRE(cache.NumDocuments() == 120);
  int64_t total = 0;
  for (int64_t d = 0; d < cache.NumDocuments(); ++d) {
    const std::vector<int32_t> want = t.Encode(corpus.documents[d]);
    const std::vector<int32_t> got(cache.DocBegin(d), cache.DocBegin(d) + cache.DocSize(d));
    CHECK(got == want);
    total += cache.DocSize(d);
  }
  CHECK(total == cache.NumTokens());
  CHECK_THROWS_WITH(TokenCache(p.cache_path, p.corpus_fingerprint + 1, p.tokenizer_fingerprint),
                    Catch::Contains("built from another corpus"));
  const std::string cut = Tmp("cut") + "/tokens.bin";
  const std::string bytes = ReadTextFile(p.cache_path);
  WriteTextFile(cut, bytes.substr(0, bytes.size() - 4));
  CHECK_THROWS_WITH(TokenCache(cut, p.corpus_fingerprint, p.tokenizer_fingerprint), Catch::Contains("truncated"));
}

TEST_CASE("the token cache is the same file for any number of encoding threads", "[data]") {
  const PreparedText& p = Prepared();
  const Tokenizer t = Tokenizer::Load(p.tokenizer_path);
  const Corpus corpus = ReadCorpus({kText + "/fortunes.txt"});
  const std::string dir = Tmp("threads");
  WriteTokenCache(corpus, t, dir + "/one.bin", 1);
  const std::string one = ReadTextFile(dir + "/one.bin");
  // 3 and 7 split the 120 documents unevenly; 500 is more threads than
  // documents (one document each).
  for (int threads : {2, 3, 7, 500}) {
    INFO(threads << " threads");
    const std::string path = dir + "/" + std::to_string(threads) + ".bin";
    CHECK(WriteTokenCache(corpus, t, path, threads) ==
          TokenCache(dir + "/one.bin", corpus.fingerprint, t.Fingerprint()).NumTokens());
    CHECK(ReadTextFile(path) == one);
  }
}

TEST_CASE("a .jsonl file holds prompt and completion records, whose prompt tokens carry the no-loss bit", "[data]") {
  const std::string dir = Tmp("jsonl");
  WriteTextFile(dir + "/sft.jsonl",
                "{\"prompt\": \"Q: two and two?\\nA:\", \"completion\": \" four\"}\n"
                "\n"
                "{\"text\": \"  plain text, not trimmed\\n\"}\n"
                "{\"completion\": \"no prompt\"}\n");
  const Corpus c = ReadCorpus({dir + "/sft.jsonl"});
  CHECK(c.documents == std::vector<std::string>{" four", "  plain text, not trimmed\n", "no prompt"});
  CHECK(c.prompts == std::vector<std::string>{"Q: two and two?\nA:", "", ""});
  // A plain file's documents have empty prompts.
  const Corpus plain = ReadCorpus({kText + "/paragraphs.txt"});
  CHECK(plain.prompts == std::vector<std::string>(plain.documents.size()));

  const PreparedText& p = Prepared();
  const Tokenizer t = Tokenizer::Load(p.tokenizer_path);
  WriteTokenCache(c, t, dir + "/tokens.bin", 2);
  const TokenCache cache(dir + "/tokens.bin", c.fingerprint, t.Fingerprint());
  cache.CheckIds(t.VocabSize());
  std::vector<int32_t> want;
  for (int32_t id : t.Encode("Q: two and two?\nA:")) want.push_back(id | kNoLossBit);
  for (int32_t id : t.Encode(" four")) want.push_back(id);
  CHECK(std::vector<int32_t>(cache.DocBegin(0), cache.DocBegin(0) + cache.DocSize(0)) == want);
  CHECK(std::vector<int32_t>(cache.DocBegin(2), cache.DocBegin(2) + cache.DocSize(2)) == t.Encode("no prompt"));

  for (const auto& [line, message] : std::vector<std::pair<std::string, std::string>>{
           {"{\"prompt\": \"x\"}",
            "sft.jsonl:2: a record is {\"prompt\": ..., \"completion\": ...}, {\"messages\": [...]} or {\"text\": "
            "...}"},
           {"[1]", "sft.jsonl:2: a record is"},
           {"{\"completion\": 3}", "sft.jsonl:2: \"completion\" is not a string"},
           {"{\"text\": \"a\", \"prompt\": \"b\"}", "sft.jsonl:2: \"text\" takes no \"prompt\""},
           {"{\"text\": \"a\", \"completion\": \"b\"}", "sft.jsonl:2: a record is"},
           {"{not json", "sft.jsonl:2: not valid JSON ("},
           // A key given twice was resolved to its last value: read "y".
           {"{\"prompt\": \"x\", \"prompt\": \"y\", \"completion\": \"z\"}",
            "sft.jsonl:2: key 'prompt' is given twice in one object"}}) {
    INFO(line);
    WriteTextFile(dir + "/sft.jsonl", "{\"text\": \"fine\"}\n" + line + "\n");
    CHECK_THROWS_WITH(ReadCorpus({dir + "/sft.jsonl"}), Catch::Contains(message));
  }
}

TEST_CASE("a record's keys that no kind reads are named in one note a file, with counts and the first line", "[data]") {
  const std::string dir = Tmp("jsonl_keys");
  WriteTextFile(dir + "/typo.jsonl",
                "{\"promt\": \"Q?\", \"completion\": \" A\", \"id\": 1}\n"
                "{\"text\": \"plain\"}\n"
                "{\"promt\": \"Q2?\", \"completion\": \" B\"}\n");
  WriteTextFile(dir + "/clean.jsonl", "{\"prompt\": \"Q?\", \"completion\": \" A\"}\n");
  const Corpus c = ReadCorpus({dir + "/typo.jsonl", dir + "/clean.jsonl"});
  // The misspelt prompt is not read: its record is a completion alone.
  CHECK(c.prompts == std::vector<std::string>{"", "", "", "Q?"});
  REQUIRE(c.notes.size() == 1);
  CHECK(c.notes[0] == "--data " + dir +
                          "/typo.jsonl: ignored the key \"id\" in 1 record (first at line 1), the key \"promt\" in 2 "
                          "records (first at line 1); a record reads \"prompt\" and \"completion\", \"messages\" or "
                          "\"text\"");
  CHECK(ReadCorpus({dir + "/clean.jsonl"}).notes.empty());
}

TEST_CASE("samples with no token to learn are left out, and every learned target is still read once an epoch",
          "[data]") {
  // Prompts of 12 to 40 words and short completions, cut into windows of 6:
  // many windows lie inside a prompt.
  const std::string dir = Tmp("unlearned");
  std::string records;
  for (int i = 0; i < 40; ++i) {
    std::string prompt;
    for (int w = 0; w < 12 + (i * 7) % 29; ++w) prompt += (w ? " " : "") + std::string(w % 2 ? "and" : "the");
    records += "{\"prompt\": \"" + prompt + "\", \"completion\": \" fine " + std::to_string(i) + "\"}\n";
  }
  WriteTextFile(dir + "/sft.jsonl", records);
  const Corpus c = ReadCorpus({dir + "/sft.jsonl"});
  const Tokenizer t = Tokenizer::Load(Prepared().tokenizer_path);
  WriteTokenCache(c, t, dir + "/tokens.bin", 2);
  const TokenCache cache(dir + "/tokens.bin", c.fingerprint, t.Fingerprint());
  const auto learns = [](int32_t id, int32_t pad) { return (id & kNoLossBit) == 0 && id != pad; };
  for (const bool packed : {false, true}) {
    INFO((packed ? "packed" : "padded"));
    TextDataOptions o;
    o.seq_len = 6;
    o.packed = packed;
    o.val_fraction = 0;
    const TextDataset data(cache, o);
    CHECK(data.NumUnlearnedSamples() > 0);
    // The learned targets of one epoch: each sample learns something, and
    // together they are the learned targets of every window there was.
    std::vector<int32_t> sample(o.seq_len + 1);
    int64_t learned = 0;
    for (int64_t p = 0; p < data.NumTrainSamples(); ++p) {
      data.TrainSample(p, sample.data());
      const auto n = std::count_if(sample.begin() + 1, sample.end(), [&](int32_t id) { return learns(id, o.pad); });
      CHECK(n > 0);
      learned += n;
    }
    // By hand: each document is BOS + ids + EOS; padded windows start every
    // 6 ids of it, packed ones every 6 ids of the documents laid end to end
    // (the last partial window dropped).
    int64_t expected = 0, windows = 0;
    std::vector<int32_t> stream;
    for (int64_t d = 0; d < cache.NumDocuments(); ++d) {
      std::vector<int32_t> doc = {o.bos};
      doc.insert(doc.end(), cache.DocBegin(d), cache.DocBegin(d) + cache.DocSize(d));
      doc.push_back(o.eos);
      stream.insert(stream.end(), doc.begin(), doc.end());
      if (!packed) {
        expected += std::count_if(doc.begin() + 1, doc.end(), [&](int32_t id) { return learns(id, o.pad); });
        windows += (static_cast<int64_t>(doc.size()) - 2 + o.seq_len) / o.seq_len;
      }
    }
    if (packed) {
      windows = (static_cast<int64_t>(stream.size()) - 1) / o.seq_len;
      expected = std::count_if(stream.begin() + 1, stream.begin() + 1 + windows * o.seq_len,
                               [&](int32_t id) { return learns(id, o.pad); });
    }
    CHECK(learned == expected);
    CHECK(data.NumTrainSamples() + data.NumUnlearnedSamples() == windows);
  }
  // Plain text learns every target: nothing is left out.
  const PreparedText& p = Prepared();
  const TokenCache plain(p.cache_path, p.corpus_fingerprint, p.tokenizer_fingerprint);
  TextDataOptions o;
  o.seq_len = 6;
  CHECK(TextDataset(plain, o).NumUnlearnedSamples() == 0);
  // Windows of one target inside prompts of 400 letters: only those whose
  // target is a completion token or the EOS are kept.
  WriteTextFile(dir + "/long.jsonl", "{\"prompt\": \"" + std::string(400, 'a') + "\", \"completion\": \" b\"}\n" +
                                         "{\"prompt\": \"" + std::string(400, 'c') + "\", \"completion\": \" d\"}\n");
  const Corpus long_prompts = ReadCorpus({dir + "/long.jsonl"});
  WriteTokenCache(long_prompts, t, dir + "/long.bin", 1);
  const TokenCache long_cache(dir + "/long.bin", long_prompts.fingerprint, t.Fingerprint());
  o.val_fraction = 0;
  o.seq_len = 1;
  const TextDataset one(long_cache, o);
  const auto completion = [&](const char* text) { return static_cast<int64_t>(t.Encode(text).size()) + 1; };
  CHECK(one.NumTrainSamples() == completion(" b") + completion(" d"));
  CHECK(one.NumTrainSamples() + one.NumUnlearnedSamples() == long_cache.DocSize(0) + long_cache.DocSize(1) + 2);
}

TEST_CASE("padded samples are BOS + document + EOS in windows that cover every next-token pair", "[data]") {
  const PreparedText& p = Prepared();
  const TokenCache cache(p.cache_path, p.corpus_fingerprint, p.tokenizer_fingerprint);
  TextDataOptions o;
  o.seq_len = 16;
  o.val_fraction = 0.1;
  const TextDataset data(cache, o);
  // Every training window of one epoch, grouped by the document it starts
  // with: the windows' pairs (a[i], a[i+1]) are exactly those of BOS+doc+EOS.
  const int64_t n = data.NumTrainSamples();
  std::multiset<std::pair<int32_t, int32_t>> seen, want;
  std::vector<int32_t> row(o.seq_len + 1);
  int64_t windows_with_pad = 0;
  for (int64_t i = 0; i < n; ++i) {
    data.TrainSample(i, row.data());
    for (int k = 0; k < o.seq_len; ++k) {
      if (row[k + 1] != o.pad) seen.insert({row[k], row[k + 1]});
    }
    windows_with_pad += row.back() == o.pad;
  }
  std::set<int64_t> val_docs;
  int64_t val_windows = 0;
  for (int64_t d = 0; d < cache.NumDocuments(); ++d) {
    std::vector<int32_t> seq = {o.bos};
    seq.insert(seq.end(), cache.DocBegin(d), cache.DocBegin(d) + cache.DocSize(d));
    seq.push_back(o.eos);
    std::multiset<std::pair<int32_t, int32_t>> pairs;
    for (size_t k = 0; k + 1 < seq.size(); ++k) pairs.insert({seq[k], seq[k + 1]});
    want.insert(pairs.begin(), pairs.end());
    val_windows += (static_cast<int64_t>(seq.size()) - 2 + o.seq_len) / o.seq_len;
  }
  // Training pairs plus validation pairs are all pairs.
  for (int64_t i = 0; i < data.NumValSamples(); ++i) {
    data.ValSample(i, row.data());
    for (int k = 0; k < o.seq_len; ++k) {
      if (row[k + 1] != o.pad) seen.insert({row[k], row[k + 1]});
    }
  }
  CHECK(seen == want);
  CHECK(data.NumTrainSamples() + data.NumValSamples() == val_windows);
  CHECK(data.NumValDocuments() > 0);
  CHECK(data.NumValDocuments() < 30);  // about 10 % of 120
  CHECK(windows_with_pad > 0);
}

TEST_CASE("each epoch reads every training sample once, in an order set by seed and epoch", "[data]") {
  const PreparedText& p = Prepared();
  const TokenCache cache(p.cache_path, p.corpus_fingerprint, p.tokenizer_fingerprint);
  TextDataOptions o;
  o.seq_len = 8;
  o.packed = true;
  const TextDataset a(cache, o);
  o.seed = 2;
  const TextDataset b(cache, o);
  const int64_t n = a.NumTrainSamples();
  REQUIRE(n > 10);
  auto rows = [&](const TextDataset& d, int64_t first) {
    std::vector<std::vector<int32_t>> out(n, std::vector<int32_t>(o.seq_len + 1));
    for (int64_t i = 0; i < n; ++i) d.TrainSample(first + i, out[i].data());
    return out;
  };
  const auto epoch0 = rows(a, 0), epoch1 = rows(a, n), other_seed = rows(b, 0);
  CHECK(std::multiset<std::vector<int32_t>>(epoch0.begin(), epoch0.end()) ==
        std::multiset<std::vector<int32_t>>(epoch1.begin(), epoch1.end()));
  CHECK(epoch0 != epoch1);
  CHECK(epoch0 != other_seed);
  CHECK(rows(a, 0) == epoch0);  // the same seed and epoch: the same order
  CHECK(a.EpochOf(n + 3) == std::make_pair<int64_t, int64_t>(1, 3));
  // Packed windows hold no PAD.
  for (const auto& r : epoch0) CHECK(std::count(r.begin(), r.end(), o.pad) == 0);
}

TEST_CASE("a training split shorter than one sequence is refused", "[data]") {
  const PreparedText& p = Prepared();
  const TokenCache cache(p.cache_path, p.corpus_fingerprint, p.tokenizer_fingerprint);
  TextDataOptions o;
  o.packed = true;
  o.seq_len = 1 << 20;
  CHECK_THROWS_WITH(TextDataset(cache, o), Catch::Contains("shorter than one sequence"));
}

}  // namespace pplab::text_data_test

namespace pplab::text_data_test {

TEST_CASE("a token cache that shrinks while mapped stops the process with one line naming it", "[data]") {
  const PreparedText& p = Prepared();
  const std::string path = Tmp("shrink") + "/tokens.bin";
  fs::copy_file(p.cache_path, path);
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::dup2(fds[1], STDERR_FILENO);
    try {
      const TokenCache cache(path, p.corpus_fingerprint, p.tokenizer_fingerprint);
      const int64_t d = cache.NumDocuments() - 1;
      const volatile int32_t* last = cache.DocBegin(d) + cache.DocSize(d) - 1;  // pages past the first
      fs::resize_file(path, 64);    // another process cuts the file under the run
      ::_exit(*last == 0 ? 0 : 1);  // not reached: the read past the end is a bus error
    } catch (...) {
      ::_exit(3);
    }
  }
  ::close(fds[1]);
  std::string out;
  char buf[512];
  ssize_t n;
  while ((n = ::read(fds[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  INFO(out);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 2);
  CHECK(out ==
        "pplab: error: token cache " + path + " shrank while in use (bus error reading it); run again to rebuild it\n");
  // A file cut before it is opened is refused by its size, before mapping,
  // and PrepareText treats it as stale and rebuilds it.
  CHECK_THROWS_WITH(TokenCache(path, p.corpus_fingerprint, p.tokenizer_fingerprint), Catch::Contains("truncated"));
}

TEST_CASE("a corrupt token id in the cache is one error naming the file", "[data]") {
  const PreparedText& p = Prepared();
  const std::string path = Tmp("bad_id") + "/tokens.bin";
  // Past the pieces, with or without the no-loss bit (a prompt's token).
  for (const int32_t bad : {int32_t{1} << 29, kNoLossBit | 200}) {
    std::string bytes = ReadTextFile(p.cache_path);
    std::memcpy(&bytes[bytes.size() - 4], &bad, 4);
    WriteTextFile(path, bytes);
    const TokenCache cache(path, p.corpus_fingerprint, p.tokenizer_fingerprint);
    CHECK_THROWS_WITH(cache.CheckIds(200),
                      Catch::Contains("token cache " + path + ": token ") &&
                          Catch::Contains("has id " + std::to_string(bad) + ", outside the tokenizer's 200 pieces"));
  }
  const TokenCache good(p.cache_path, p.corpus_fingerprint, p.tokenizer_fingerprint);
  CHECK_NOTHROW(good.CheckIds(200));
}

}  // namespace pplab::text_data_test

namespace pplab::text_data_test {

TEST_CASE("a model folder's tokenizer is found by name whatever it is, and a FIFO is then refused by name",
          "[data][tokenizer]") {
  const std::string dir = Tmp("folder_tokenizer");
  CHECK(FolderTokenizer(dir).empty());
  WriteTextFile(dir + "/tokenizer.json", "{}");
  CHECK(FolderTokenizer(dir) == dir + "/tokenizer.json");
  // tokenizer.model comes first, and a FIFO of that name is it: it read as
  // "its folder has no tokenizer.model", the reader now refuses it by name.
  REQUIRE(::mkfifo((dir + "/tokenizer.model").c_str(), 0600) == 0);
  CHECK(FolderTokenizer(dir) == dir + "/tokenizer.model");
  CHECK_THROWS_WITH(Tokenizer::Load(dir + "/tokenizer.model"), Catch::Contains("is a FIFO, not a regular file"));
}

}  // namespace pplab::text_data_test
