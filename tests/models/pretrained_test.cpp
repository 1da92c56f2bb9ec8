#include "models/pretrained.h"

#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>

#include "models/llama_config.h"
#include "models/safetensors.h"
#include "schedules/error.h"
#include "schedules/file_io.h"

namespace pplab::pretrained_test {
namespace {

std::string TmpPath(const std::string& name) {
  const std::string dir = std::string(PPLAB_TEST_TMP_DIR) + "/pretrained";
  mkdir(dir.c_str(), 0755);
  return dir + "/" + name;
}

uint32_t Bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

// A file of an 8-byte length, `header` and `data` bytes, as written by hand.
std::string RawFile(const std::string& name, const std::string& header, size_t data, uint64_t length = 0) {
  const std::string path = TmpPath(name);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  const uint64_t n = length != 0 ? length : header.size();
  for (int i = 0; i < 8; ++i) out.put(static_cast<char>((n >> (8 * i)) & 0xff));
  out << header << std::string(data, '\0');
  return path;
}

// Every parameter of `c`, as F32 (or BF16) tensors whose values are
// value(parameter index, element index), in one file.
// `tied`: the LM head holds the embedding's values.
std::string ModelFile(const std::string& name, const LlamaConfig& c, bool bf16 = false, const std::string& skip = "",
                      bool tied = false) {
  std::vector<std::vector<float>> data;
  std::vector<TensorToWrite> tensors;
  const std::vector<ParameterShape> shapes = LlamaParameterShapes(c);
  data.reserve(shapes.size());
  for (const ParameterShape& p : shapes) {
    if (HuggingFaceName(p.name) == skip) continue;
    int64_t n = 1;
    for (int64_t d : p.shape) n *= d;
    data.emplace_back(n);
    for (int64_t i = 0; i < n; ++i) data.back()[i] = 0.25f * static_cast<float>((i + data.size()) % 64) - 8;
    if (tied && p.name == "lm_head.weight") data.back() = data.front();  // the embedding's values
    tensors.push_back({HuggingFaceName(p.name), p.shape, data.back().data()});
  }
  const std::string path = TmpPath(name);
  WriteSafetensors(path, tensors, bf16);
  return path;
}

TEST_CASE("half and bfloat16 widen to the float of the same value, and floats round to bfloat16 to nearest even",
          "[pretrained]") {
  CHECK(HalfToFloat(0x3C00) == 1.0f);
  CHECK(HalfToFloat(0xC000) == -2.0f);
  CHECK(HalfToFloat(0x7BFF) == 65504.0f);                  // the largest half
  CHECK(HalfToFloat(0x0400) == std::ldexp(1.0f, -14));     // the smallest normal
  CHECK(HalfToFloat(0x0001) == std::ldexp(1.0f, -24));     // the smallest subnormal
  CHECK(HalfToFloat(0x03FF) == std::ldexp(1023.0f, -24));  // the largest subnormal
  CHECK(HalfToFloat(0x8200) == -std::ldexp(512.0f, -24));
  CHECK(Bits(HalfToFloat(0x8000)) == 0x80000000u);  // -0
  CHECK(HalfToFloat(0x7C00) == std::numeric_limits<float>::infinity());
  CHECK(std::isnan(HalfToFloat(0x7E00)));

  CHECK(Bfloat16ToFloat(0x3F80) == 1.0f);
  CHECK(Bfloat16ToFloat(0xC0A0) == -5.0f);
  CHECK(FloatToBfloat16(1.0f) == 0x3F80);
  // bfloat16 keeps 7 mantissa bits: 1 + 2^-8 lies halfway between 1 and
  // 1 + 2^-7 and goes to the even one (1); 1 + 3 x 2^-8 lies halfway between
  // 1 + 2^-7 and 1 + 2^-6 and goes to the even one (1 + 2^-6).
  CHECK(FloatToBfloat16(1.0f + std::ldexp(1.0f, -8)) == 0x3F80);
  CHECK(FloatToBfloat16(1.0f + 3 * std::ldexp(1.0f, -8)) == 0x3F82);
  CHECK(FloatToBfloat16(1.0f + 5 * std::ldexp(1.0f, -9)) == 0x3F81);  // above halfway: up
  CHECK(FloatToBfloat16(std::numeric_limits<float>::infinity()) == 0x7F80);
  CHECK(std::isnan(Bfloat16ToFloat(FloatToBfloat16(std::nanf("")))));
}

TEST_CASE("safetensors files round-trip, F32 exactly and BF16 rounded", "[pretrained]") {
  const std::vector<float> a = {1.0f, -2.5f, 3.0f + std::ldexp(1.0f, -20), 0.0f, 7.0f, -0.125f};
  const std::vector<float> b = {42.0f};
  for (const bool bf16 : {false, true}) {
    const std::string path = TmpPath(bf16 ? "rt-bf16.safetensors" : "rt-f32.safetensors");
    WriteSafetensors(path, {{"w.a", {2, 3}, a.data()}, {"b", {1}, b.data()}}, bf16, {{"format", "pt"}});
    const WeightFiles files = WeightFiles::Open(path);
    REQUIRE(files.Tensors().size() == 2);
    const SafetensorsTensor* t = files.Find("w.a");
    REQUIRE(t != nullptr);
    CHECK(t->dtype == (bf16 ? "BF16" : "F32"));
    CHECK(t->shape == std::vector<int64_t>{2, 3});
    CHECK(t->bytes == (bf16 ? 12u : 24u));
    CHECK(files.Find("b")->offset % 8 == 0);  // the data (b first, by name) starts aligned
    std::vector<float> got(6);
    ReadAsFloat32("w.a", *t, got.data());
    for (size_t i = 0; i < a.size(); ++i) {
      CHECK(got[i] == (bf16 ? Bfloat16ToFloat(FloatToBfloat16(a[i])) : a[i]));
    }
    CHECK(got[2] == (bf16 ? 3.0f : a[2]));  // 2^-20 is below bfloat16's precision at 3
    float one = 0;
    ReadAsFloat32("b", *files.Find("b"), &one);
    CHECK(one == 42.0f);
    CHECK(files.Find("c") == nullptr);
  }
}

TEST_CASE("SameValues compares two tensors value by value, across dtypes and past the first part read",
          "[pretrained]") {
  // More than one part (2^20 values) of values bfloat16 holds exactly.
  const int64_t n = (int64_t{1} << 20) + 5;
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(i % 200) - 100;
  x.front() = 0.0f;
  std::vector<float> last = x;
  last.back() += 1;  // differs only in the second part
  std::vector<float> first = x;
  first.front() = -0.0f;  // 0 and -0 are equal numbers but other bits
  const std::string f32 = TmpPath("same-f32.safetensors");
  WriteSafetensors(
      f32, {{"x", {n}, x.data()}, {"last", {n}, last.data()}, {"first", {n}, first.data()}, {"flat", {1, n}, x.data()}},
      false);
  const std::string bf16 = TmpPath("same-bf16.safetensors");
  WriteSafetensors(bf16, {{"x", {n}, x.data()}}, true);
  const WeightFiles a = WeightFiles::Open(f32), b = WeightFiles::Open(bf16);
  CHECK(SameValues("x", *a.Find("x"), "x", *a.Find("x")));
  CHECK(SameValues("x", *a.Find("x"), "x", *b.Find("x")));
  CHECK_FALSE(SameValues("x", *a.Find("x"), "last", *a.Find("last")));
  CHECK_FALSE(SameValues("last", *a.Find("last"), "x", *b.Find("x")));
  CHECK_FALSE(SameValues("x", *a.Find("x"), "first", *a.Find("first")));
  CHECK_FALSE(SameValues("x", *a.Find("x"), "flat", *a.Find("flat")));  // another shape
}

TEST_CASE("a damaged or foreign safetensors file is refused with one line naming the file and the tensor",
          "[pretrained]") {
  auto refused = [](const std::string& path, const std::string& why) {
    INFO(path);
    CHECK_THROWS_WITH(WeightFiles::Open(path), Catch::StartsWith(path) && Catch::Contains(why));
  };
  refused(RawFile("short.safetensors", "", 0, 1) + "", "the header length 1 does not fit");
  const std::string tiny = TmpPath("tiny.safetensors");
  WriteTextFile(tiny, "abc");
  refused(tiny, "too short for a safetensors file");
  refused(RawFile("long.safetensors", "{}", 0, 1ULL << 40), "does not fit the file");
  refused(RawFile("json.safetensors", "{\"a\": ", 0), "the safetensors header");
  refused(RawFile("dtype.safetensors", R"({"a": {"dtype": "F24", "shape": [1], "data_offsets": [0, 3]}})", 3),
          "tensor 'a': unknown dtype \"F24\"");
  refused(RawFile("range.safetensors", R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", 4),
          "tensor 'a': data_offsets [0,8] are not a range inside the file's 4 bytes");
  refused(RawFile("size.safetensors", R"({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", 8),
          "tensor 'a': its 8 bytes do not hold shape [3] of F32");
  refused(RawFile("huge.safetensors",
                  R"({"a": {"dtype": "F32", "shape": [1099511627776, 1099511627776], "data_offsets": [0, 8]}})", 8),
          "its 8 bytes do not hold shape");
  refused(RawFile("entry.safetensors", R"({"a": [1, 2]})", 0), "tensor 'a': expected {\"dtype\"");
  // The ranges must tile the data: no overlap, no gap, nothing after.
  const std::string two_f32 = R"("dtype": "F32", "shape": [2])";
  refused(RawFile("overlap.safetensors",
                  "{\"a\": {" + two_f32 + R"(, "data_offsets": [0, 8]}, "b": {)" + two_f32 +
                      R"(, "data_offsets": [4, 12]}})",
                  12),
          "tensor 'b' starts at data byte 4, inside the tensor before it");
  refused(RawFile("same.safetensors",
                  "{\"a\": {" + two_f32 + R"(, "data_offsets": [0, 8]}, "b": {)" + two_f32 +
                      R"(, "data_offsets": [0, 8]}})",
                  8),
          "starts at data byte 0, inside the tensor before it");
  refused(RawFile("gap.safetensors", "{\"a\": {" + two_f32 + R"(, "data_offsets": [4, 12]}})", 12),
          "tensor 'a' starts at data byte 4, past a gap");
  refused(RawFile("trailing.safetensors", "{\"a\": {" + two_f32 + R"(, "data_offsets": [0, 8]}})", 9),
          "the tensors' data ends at byte 8 of 9");
  refused(RawFile("metadata.safetensors", R"({"__metadata__": [1, 2]})", 0), "__metadata__ must map names to strings");
  refused(RawFile("metadata-int.safetensors", R"({"__metadata__": {"format": 1}})", 0), "__metadata__ must map");
  refused(RawFile("nul.safetensors", std::string("{}\0\0", 4), 0), "the safetensors header holds a NUL byte");
  // Padding with spaces, an empty tensor anywhere and string metadata are fine.
  CHECK(WeightFiles::Open(RawFile("fine.safetensors",
                                  R"({"__metadata__": {"format": "pt"}, "e": {"dtype": "F32", "shape": [0], )"
                                  R"("data_offsets": [8, 8]}, "a": {)" +
                                      two_f32 + R"(, "data_offsets": [0, 8]}}    )",
                                  8))
            .Tensors()
            .size() == 2);
  // A dtype pplab does not widen is found by the check, and by the read.
  const std::string ints =
      RawFile("ints.safetensors", R"({"a": {"dtype": "I64", "shape": [1], "data_offsets": [0, 8]}})", 8);
  float out = 0;
  CHECK_THROWS_WITH(ReadAsFloat32("a", *WeightFiles::Open(ints).Find("a"), &out),
                    Catch::Contains("tensor 'a' is I64; pplab reads weights stored as F32, BF16 or F16"));
}

TEST_CASE("a model's folder: one file, or several listed by model.safetensors.index.json", "[pretrained]") {
  const std::string dir = TmpPath("folder");
  RemoveTree(dir);
  mkdir(dir.c_str(), 0755);
  CHECK_THROWS_WITH(WeightFiles::Open(dir),
                    Catch::Contains("is a folder without model.safetensors or model.safetensors.index.json"));
  WriteTextFile(dir + "/pytorch_model.bin", "pickle");
  CHECK_THROWS_WITH(WeightFiles::Open(dir), Catch::Contains("its pytorch_model*.bin files are pickles"));
  const std::vector<float> x = {1, 2, 3, 4}, y = {5, 6};
  WriteSafetensors(dir + "/model-00001-of-00002.safetensors", {{"x", {4}, x.data()}}, false);
  WriteSafetensors(dir + "/model-00002-of-00002.safetensors", {{"y", {2}, y.data()}}, true);
  WriteTextFile(dir + "/model.safetensors.index.json",
                R"({"metadata": {"total_size": 20}, "weight_map": {"x": "model-00001-of-00002.safetensors",
                    "y": "model-00002-of-00002.safetensors"}})");
  const WeightFiles files = WeightFiles::Open(dir);
  REQUIRE(files.Tensors().size() == 2);
  CHECK(files.Find("x")->file == dir + "/model-00001-of-00002.safetensors");
  CHECK(files.Find("y")->dtype == "BF16");
  std::vector<float> got(2);
  ReadAsFloat32("y", *files.Find("y"), got.data());
  CHECK(got == y);

  WriteTextFile(dir + "/model.safetensors.index.json", R"({"weight_map": {"x": "model-00002-of-00002.safetensors"}})");
  CHECK_THROWS_WITH(WeightFiles::Open(dir),
                    Catch::Contains("tensor 'x' is listed in model-00002-of-00002.safetensors, whose header does not "
                                    "have it"));
  WriteTextFile(dir + "/model.safetensors.index.json", R"({"weight_map": {"x": "../x.safetensors"}})");
  CHECK_THROWS_WITH(WeightFiles::Open(dir), Catch::Contains("names '../x.safetensors', not a file in the folder"));
  WriteTextFile(dir + "/model.safetensors.index.json", R"({"weight_map": {"x": "gone.safetensors"}})");
  CHECK_THROWS_WITH(WeightFiles::Open(dir), Catch::Contains("cannot read " + dir + "/gone.safetensors"));
}

TEST_CASE("the parameter list has Hugging Face's names and the counts of ModelParams", "[pretrained]") {
  auto count = [](const LlamaConfig& c) {
    int64_t n = 0;
    for (const ParameterShape& p : LlamaParameterShapes(c)) {
      int64_t e = 1;
      for (int64_t d : p.shape) e *= d;
      n += e;
    }
    return n;
  };
  for (const char* file : {"llama3-8b-config.json", "qwen2.5-7b-config.json", "qwen3-32b-config.json"}) {
    INFO(file);
    const LlamaConfig c = LoadLlamaConfig(std::string(PPLAB_TEST_DATA_DIR) + "/models/" + file);
    // Each pipeline keeps a tied head too; ModelParams counts it once.
    CHECK(count(c) == ModelParams(c) + (c.tie_word_embeddings ? EmbeddingParams(c) : 0));
  }
  CHECK(HuggingFaceName("layers.3.mlp.up_proj.weight") == "model.layers.3.mlp.up_proj.weight");
  CHECK(HuggingFaceName("embed_tokens.weight") == "model.embed_tokens.weight");
  CHECK(HuggingFaceName("lm_head.weight") == "lm_head.weight");
}

TEST_CASE("a model's files are checked against its config before anything runs", "[pretrained]") {
  LlamaConfig c = LlamaPreset("tiny");
  const std::string good = ModelFile("tiny.safetensors", c);
  const int64_t values = CheckPretrained(WeightFiles::Open(good), c);
  CHECK(values == ModelParams(c));
  CHECK(CheckPretrained(WeightFiles::Open(ModelFile("tiny-bf16.safetensors", c, true)), c) == values);

  // Another depth, width or vocabulary: the first tensor that differs, named.
  LlamaConfig deeper = c;
  deeper.num_hidden_layers = 5;
  CHECK_THROWS_WITH(CheckPretrained(WeightFiles::Open(good), deeper),
                    Catch::Contains("no tensor 'model.layers.4.input_layernorm.weight'"));
  LlamaConfig shallower = c;
  shallower.num_hidden_layers = 3;
  CHECK_THROWS_WITH(CheckPretrained(WeightFiles::Open(good), shallower),
                    Catch::Contains("tensor 'model.layers.3.") &&
                        Catch::Contains("is not a parameter of this model (3 layers, hidden size 32)"));
  LlamaConfig words = c;
  words.vocab_size = 200;
  CHECK_THROWS_WITH(CheckPretrained(WeightFiles::Open(good), words),
                    Catch::StartsWith(good) &&
                        Catch::Contains("tensor 'model.embed_tokens.weight' is 256 x 32, the model's is 200 x 32 "
                                        "(vocabularies of 256 and 200 pieces: give the model's own tokenizer"));
  LlamaConfig wide = c;
  wide.intermediate_size = 96;
  CHECK_THROWS_WITH(CheckPretrained(WeightFiles::Open(good), wide),
                    Catch::Contains("'model.layers.0.mlp.gate_proj.weight' is 64 x 32, the model's is 96 x 32"));

  // A tied model's files keep the embedding only; an untied one needs its head.
  const std::string headless = ModelFile("headless.safetensors", c, false, "lm_head.weight");
  CHECK_THROWS_WITH(CheckPretrained(WeightFiles::Open(headless), c),
                    Catch::Contains("no tensor 'lm_head.weight' (a model without tie_word_embeddings"));
  LlamaConfig tied = c;
  tied.tie_word_embeddings = true;
  CHECK(CheckPretrained(WeightFiles::Open(headless), tied) == values);
  CHECK(PretrainedTensor(WeightFiles::Open(headless), tied, "lm_head.weight").offset ==
        WeightFiles::Open(headless).Find("model.embed_tokens.weight")->offset);
  // A head kept anyway must be the embedding, in any of the dtypes read.
  CHECK(CheckPretrained(WeightFiles::Open(ModelFile("tied.safetensors", c, false, "", true)), tied) == values);
  CHECK(CheckPretrained(WeightFiles::Open(ModelFile("tied-bf16.safetensors", c, true, "", true)), tied) == values);
  CHECK_THROWS_WITH(CheckPretrained(WeightFiles::Open(good), tied),
                    Catch::StartsWith(good + ": tensor 'lm_head.weight' is not 'model.embed_tokens.weight', but the "
                                             "config ties them (tie_word_embeddings)"));

  // A rotary scaling pplab does not compute.
  LlamaConfig yarn = c;
  yarn.rope_scaling.type = "yarn";
  CHECK_THROWS_WITH(CheckPretrained(WeightFiles::Open(good), yarn),
                    Catch::Contains("rope_scaling type 'yarn' is not implemented"));
}

}  // namespace
}  // namespace pplab::pretrained_test
