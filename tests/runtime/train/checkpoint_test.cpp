// Checkpoints in one process: pruning, the manifest's checks, shard
// identity, export completeness. Each test builds the damaged checkpoint it
// refuses.
#include "runtime/train/checkpoint.h"

#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>

#include "models/safetensors.h"
#include "runtime/data/fnv.h"
#include "runtime/train/manifest.h"
#include "runtime/train/shard_file.h"
#include "schedules/error.h"
#include "schedules/file_io.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace pplab::checkpoint_test {
namespace {

std::string Tmp(const std::string& name) {
  const std::string dir = std::string(PPLAB_TEST_TMP_DIR) + "/checkpoint_" + name;
  RemoveTree(dir);
  fs::create_directories(dir);
  return dir;
}

// Two parameters of a toy model, "a" (2x3) and "b" (4), with AdamW state.
struct Toy {
  at::Tensor a = torch::arange(6, torch::kFloat).reshape({2, 3});
  at::Tensor b = torch::ones({4});
  AdamW optimizer{{{"a", a}, {"b", b}}, AdamWConfig{}};
};

// Publishes a checkpoint of `ranks` shards at `step`: rank r holds the
// parameters of `toys[r]`. `elements`: the model's parameter count claimed.
std::string Publish(const std::string& dir, int step, std::vector<Toy*> toys, int64_t elements,
                    const std::string& run_id = "run1") {
  const CheckpointIdentity id{run_id, json({{"seed", 1}, {"parameter_elements", elements}}).dump()};
  const std::string tmp = CheckpointDirName(dir, step) + ".tmp";
  for (size_t r = 0; r < toys.size(); ++r) WriteShard(tmp, static_cast<RankId>(r), step, id, toys[r]->optimizer);
  return PublishCheckpoint(dir, step, static_cast<int>(toys.size()), id,
                           json({{"parameter_elements", elements}}).dump());
}

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

json Manifest(const std::string& path) { return json::parse(ReadTextFile(path + "/manifest.json")); }
void SetManifest(const std::string& path, const json& m) { WriteTextFile(path + "/manifest.json", m.dump(2)); }

}  // namespace

TEST_CASE("checksums are the standard FNV-1a 64", "[checkpoint]") {
  CHECK(Fnv1a64("") == 14695981039346656037ULL);  // 0xcbf29ce484222325, the offset basis
  CHECK(Fnv1a64("a") == 0xaf63dc4c8601ec8cULL);   // the published test vectors
  CHECK(Fnv1a64("foobar") == 0x85944171f73967e8ULL);
}

TEST_CASE("pruning removes only this run's older checkpoints, never the one just published", "[checkpoint]") {
  const std::string dir = Tmp("prune");
  Toy toy;
  // An earlier run left steps 90 and 100; this run writes 20, 40, 45.
  Publish(dir, 90, {&toy}, 10);
  Publish(dir, 100, {&toy}, 10);
  std::vector<std::string> published;
  for (int step : {20, 40, 45}) {
    published.push_back(Publish(dir, step, {&toy}, 10));
    PruneCheckpoints(published, 2);
    CHECK(fs::is_directory(published.back()));
    CHECK(LatestCheckpoint(dir) == published.back());
  }
  CHECK_FALSE(fs::exists(CheckpointDirName(dir, 20)));
  CHECK(fs::is_directory(CheckpointDirName(dir, 40)));
  CHECK(fs::is_directory(CheckpointDirName(dir, 45)));
  CHECK(fs::is_directory(CheckpointDirName(dir, 90)));  // not this run's: kept
  CHECK(fs::is_directory(CheckpointDirName(dir, 100)));
  CHECK(ReadTextFile(dir + "/latest") == "step-000045\n");
  CHECK_NOTHROW(VerifyCheckpoint(LatestCheckpoint(dir)));
}

TEST_CASE("a shard name outside the checkpoint directory is refused", "[checkpoint]") {
  const std::string dir = Tmp("traversal");
  Toy toy;
  const std::string path = Publish(dir, 1, {&toy}, 10);
  for (const char* name : {"../../../../etc/hostname", "/etc/hostname", "..", "sub/rank-0.shard", "rank-1.shard"}) {
    json m = Manifest(path);
    m["files"][0]["name"] = name;
    SetManifest(path, m);
    INFO(name);
    CHECK_THROWS_WITH(VerifyCheckpoint(path), Catch::Contains(path + "/manifest.json: field 'files[0].name' must be"));
  }
}

TEST_CASE("a shard of another step or run is refused even with a matching checksum", "[checkpoint]") {
  const std::string dir = Tmp("mixed");
  Toy toy;
  const std::string step1 = Publish(dir, 1, {&toy}, 10);
  const std::string step2 = Publish(dir, 2, {&toy}, 10);
  // Step 1's shard copied into step 2, its size and checksum written into
  // step 2's manifest: the checksums pass, the shard's own step does not.
  fs::copy_file(step1 + "/rank-0.shard", step2 + "/rank-0.shard", fs::copy_options::overwrite_existing);
  const std::vector<char> bytes = ReadBinaryFile(step2 + "/rank-0.shard");
  json m = Manifest(step2);
  m["files"][0]["bytes"] = bytes.size();
  m["files"][0]["fnv1a64"] = FnvHex(Fnv1a64(bytes.data(), bytes.size()));
  SetManifest(step2, m);
  const std::string verified = VerifyCheckpoint(step2);
  Toy into;
  CHECK_THROWS_WITH(LoadCheckpoint(step2, verified, into.optimizer),
                    Catch::Contains("rank-0.shard: holds step 1, the manifest step 2 (shards of two steps mixed)"));
  // Another run's shard at the same step.
  const std::string other = Publish(Tmp("mixed_other"), 2, {&toy}, 10, "run2");
  fs::copy_file(other + "/rank-0.shard", step2 + "/rank-0.shard", fs::copy_options::overwrite_existing);
  const std::vector<char> other_bytes = ReadBinaryFile(step2 + "/rank-0.shard");
  m["files"][0]["bytes"] = other_bytes.size();
  m["files"][0]["fnv1a64"] = FnvHex(Fnv1a64(other_bytes.data(), other_bytes.size()));
  SetManifest(step2, m);
  CHECK_THROWS_WITH(LoadCheckpoint(step2, VerifyCheckpoint(step2), into.optimizer),
                    Catch::Contains("written by run run2, the manifest is run run1"));
  // An identity field edited in the manifest no longer matches the shards' hash.
  const std::string step3 = Publish(dir, 3, {&toy}, 10);
  json m3 = Manifest(step3);
  m3["seed"] = 2;
  SetManifest(step3, m3);
  CHECK_THROWS_WITH(LoadCheckpoint(step3, VerifyCheckpoint(step3), into.optimizer),
                    Catch::Contains("identity hash does not match"));
}

TEST_CASE("a parameter's optimizer state with a part missing, or a negative step count, is refused", "[checkpoint]") {
  // One step, so that both parameters have moments and a step count.
  Toy toy;
  toy.a.requires_grad_(true);
  toy.b.requires_grad_(true);
  toy.a.mutable_grad() = torch::ones_like(toy.a);
  toy.b.mutable_grad() = torch::ones_like(toy.b);
  toy.optimizer.Step(0.1);
  const CheckpointIdentity id{"run1", json({{"seed", 1}, {"parameter_elements", 10}}).dump()};
  const auto publish = [&](const std::string& dir, const std::function<void(NamedTensors&)>& edit) {
    NamedTensors tensors = ShardTensors(toy.optimizer, {}, nullptr);
    edit(tensors);
    WriteShardTensors(CheckpointDirName(dir, 1) + ".tmp", 0, 1, id, tensors);
    return PublishCheckpoint(dir, 1, 1, id, json({{"parameter_elements", 10}}).dump());
  };
  Toy into;
  const std::string whole = publish(Tmp("state_whole"), [](NamedTensors&) {});
  CHECK_NOTHROW(LoadCheckpoint(whole, VerifyCheckpoint(whole), into.optimizer));
  // a's first moment lost: it was loaded as a fresh moment, unsaid.
  const std::string lost = publish(Tmp("state_lost"), [](NamedTensors& t) {
    t.erase(std::remove_if(t.begin(), t.end(), [](const auto& n) { return n.first == "a#exp_avg"; }), t.end());
  });
  CHECK_THROWS_WITH(LoadCheckpoint(lost, VerifyCheckpoint(lost), into.optimizer),
                    Catch::EndsWith("the optimizer state of a is incomplete or has another shape"));
  const std::string negative = publish(Tmp("state_negative"), [](NamedTensors& t) {
    for (auto& [name, tensor] : t) {
      if (name == "b#step") tensor = torch::full({1}, -1, torch::kLong);
    }
  });
  CHECK_THROWS_WITH(LoadCheckpoint(negative, VerifyCheckpoint(negative), into.optimizer),
                    Catch::EndsWith("the optimizer state of b counts -1 steps"));
}

TEST_CASE("every manifest field is type- and range-checked, naming file and field", "[checkpoint]") {
  const std::string dir = Tmp("fields");
  Toy toy;
  const std::string path = Publish(dir, 5, {&toy}, 10);
  const json good = Manifest(path);
  struct Case {
    const char* field;
    json value;
    const char* says;
  };
  for (const Case& c :
       {Case{"step", json(int64_t{1} << 62),
             "field 'step' must be an integer in [1, 2147483647], got 4611686018427387904"},
        Case{"step", json(-5), "field 'step' must be an integer in [1, 2147483647], got -5"},
        Case{"step", json("100"), "field 'step' must be an integer in [1, 2147483647], got \"100\""},
        Case{"step", json(2.5), "field 'step' must be an integer"},
        Case{"ranks", json(0), "field 'ranks' must be an integer"},
        Case{"run_id", json(7), "field 'run_id' must be a string"},
        Case{"files", json("x"), "field 'files' must be an array"}, Case{"version", json(3), "field 'version' is 3"},
        Case{"precision", json("fp16"), "field 'precision' must be \"fp32\" or \"bf16\", got 'fp16'"},
        Case{"precision", json(16), "field 'precision' must be a string"}}) {
    json m = good;
    m[c.field] = c.value;
    SetManifest(path, m);
    INFO(c.field << " = " << c.value.dump());
    CHECK_THROWS_WITH(ReadManifest(path), Catch::Contains(path + "/manifest.json: " + c.says));
  }
  json m = good;
  m.erase("step");
  SetManifest(path, m);
  CHECK_THROWS_WITH(ReadManifest(path), Catch::Contains("field 'step' is missing"));
  m = good;
  m["files"][0]["bytes"] = -1;
  SetManifest(path, m);
  CHECK_THROWS_WITH(ReadManifest(path), Catch::Contains("field 'files[0].bytes' must be an integer"));
  m = good;
  m["version"] = 1;  // pplab's first format: pickled shards
  SetManifest(path, m);
  CHECK_THROWS_WITH(ReadManifest(path), Catch::Contains("a version-1 checkpoint (pickled .pt shards"));
}

TEST_CASE("a damaged shard is refused by name, never read out of bounds", "[checkpoint]") {
  Toy toy;
  const NamedTensors tensors = {{"a", toy.a}, {"b", toy.b}};
  const std::vector<char> good = EncodeShard({"r", 1, 0, "x"}, tensors);
  ShardIdentity id;
  const NamedTensors back = DecodeShard("s", good, &id);
  REQUIRE(back.size() == 2);
  CHECK(torch::equal(back[0].second, toy.a));
  CHECK(id.step == 1);
  for (size_t cut : {size_t{0}, size_t{10}, size_t{30}, good.size() - 70}) {  // the last 48 bytes are padding
    INFO(cut);
    CHECK_THROWS_WITH(DecodeShard("s", std::vector<char>(good.begin(), good.begin() + cut), &id),
                      Catch::StartsWith("s: ") && Catch::Contains("not a valid pplab shard"));
  }
}

TEST_CASE("a shard whose shape's product passes 2^64 is refused, not wrapped to an empty tensor", "[checkpoint]") {
  // A header of a 2^32 x 2^32 tensor of 0 bytes: the product wraps to 0 in
  // 64 bits, which once matched its byte count and reached LibTorch.
  const std::string text = json({{"run_id", "r"},
                                 {"step", 1},
                                 {"rank", 0},
                                 {"identity", "x"},
                                 {"tensors",
                                  {{{"name", "zz"},
                                    {"dtype", "float32"},
                                    {"shape", {uint64_t{1} << 32, uint64_t{1} << 32}},
                                    {"offset", 0},
                                    {"bytes", 0}}}}})
                               .dump();
  std::vector<char> bytes = EncodeShard({"r", 1, 0, "x"}, {});
  const uint64_t length = text.size();
  bytes.resize(24);
  std::memcpy(bytes.data() + 16, &length, 8);
  bytes.insert(bytes.end(), text.begin(), text.end());
  bytes.resize((bytes.size() + 63) / 64 * 64, 0);
  ShardIdentity id;
  CHECK_THROWS_WITH(DecodeShard("s", bytes, &id), Catch::StartsWith("s: tensor zz: shape too large"));
}

TEST_CASE("step directories without 'latest' are refused and a garbage 'latest' is one printable line",
          "[checkpoint]") {
  const std::string dir = Tmp("latest");
  Toy toy;
  Publish(dir, 1, {&toy}, 10);
  fs::create_directories(dir + "/step-000002.tmp");  // a save that failed
  CHECK(PrepareCheckpointDir(dir) == CheckpointDirName(dir, 1));
  CHECK_FALSE(fs::exists(dir + "/step-000002.tmp"));  // cleaned on the next start
  WriteTextFile(dir + "/latest", std::string("\x01\xff\x1b[2Jstep\n\n", 11));
  try {
    LatestCheckpoint(dir);
    FAIL("garbage accepted");
  } catch (const Error& e) {
    const std::string what = e.what();
    CHECK_THAT(what,
               Catch::Contains("latest: expected a checkpoint name like step-000012, found '\\x01\\xff\\x1b[2Jstep'"));
    CHECK(
        std::all_of(what.begin(), what.end(), [](char c) { return std::isprint(static_cast<unsigned char>(c)) != 0; }));
  }
  WriteTextFile(dir + "/latest", "step-000007\n");
  CHECK_THROWS_WITH(LatestCheckpoint(dir), Catch::Contains("names step-000007, which does not exist"));
  fs::remove(dir + "/latest");
  CHECK_THROWS_WITH(PrepareCheckpointDir(dir), Catch::Contains("holds step directories but no 'latest' file"));
  // Readers (generate, export-model) say the same, and how to pick one.
  CHECK_THROWS_WITH(ResolveCheckpoint(dir), "--checkpoint " + dir +
                                                " holds step directories but no 'latest' file: give one of them as "
                                                "--checkpoint, or write its name into " +
                                                dir + "/latest");
  RemoveCheckpoints(dir);
  CHECK_THROWS_WITH(ResolveCheckpoint(dir), Catch::Contains("holds no checkpoint (no manifest.json, no 'latest'"));
  CHECK(PrepareCheckpointDir(dir).empty());
  CHECK_FALSE(HoldsCheckpoints(dir));
}

TEST_CASE("a checkpoint directory's look-alike user files are neither a run nor removed with one", "[checkpoint]") {
  const std::string dir = Tmp("lookalikes");
  const std::vector<std::string> user_files = {"step-by-step.md", "tokenizer-mine.json", "step-old.tmp",
                                               "tokenizer-0123456789ABCDEF.model", "step-000003"};
  for (const std::string& name : user_files) WriteTextFile(dir + "/" + name, "mine\n");
  fs::create_directories(dir + "/step-keep");
  WriteTextFile(dir + "/step-keep/notes.txt", "mine\n");
  CHECK_FALSE(HoldsCheckpoints(dir));  // a file named like a step is no step
  CHECK(PrepareCheckpointDir(dir).empty());
  Toy toy;
  Publish(dir, 1, {&toy}, 10);
  WriteTextFile(dir + "/tokenizer-0123456789abcdef.model", "copy\n");  // the run's own tokenizer copy
  fs::create_directories(dir + "/step-000002.tmp");                    // a save that failed
  CHECK(HoldsCheckpoints(dir));
  RemoveCheckpoints(dir);
  for (const std::string& name : user_files) {
    INFO(name);
    CHECK(ReadTextFile(dir + "/" + name) == "mine\n");
  }
  CHECK(ReadTextFile(dir + "/step-keep/notes.txt") == "mine\n");
  for (const char* gone : {"latest", "step-000001", "step-000002.tmp", "tokenizer-0123456789abcdef.model"}) {
    INFO(gone);
    CHECK_FALSE(fs::exists(dir + "/" + gone));
  }
}

TEST_CASE("export-model fails unless every parameter of the model is written", "[checkpoint]") {
  const std::string dir = Tmp("export");
  Toy toy;
  const std::string out = dir + "/model.pt";
  Publish(dir, 1, {&toy}, 10);  // a + b: 6 + 4 values
  CHECK(ExportModel(dir, out) == 2);
  // The model has 20 values but only one rank's shard (10) is there.
  Publish(dir, 2, {&toy}, 20);
  fs::remove(out);
  CHECK_THROWS_WITH(ExportModel(dir, out), Catch::Contains("hold 10 of the model's 20 parameter values"));
  CHECK_FALSE(fs::exists(out));
  // Two ranks' shards that both hold parameter a: the second names the first.
  const std::string twice = Publish(dir, 3, {&toy, &toy}, 20);
  CHECK_THROWS_WITH(ExportModel(dir, out), Catch::Contains(twice + "/" + ShardName(1) + ": tensor ") &&
                                               Catch::Contains(" is in " + twice + "/" + ShardName(0) + " too"));
}

TEST_CASE("export-model writes a safetensors file under Hugging Face's names, in F32 or BF16", "[checkpoint]") {
  const std::string dir = Tmp("export_safetensors");
  Toy toy;
  toy.b = torch::tensor({1.0f, 1.0f + std::ldexp(1.0f, -10), -3.0f, 0.5f});
  toy.optimizer = AdamW({{"a", toy.a}, {"b", toy.b}}, AdamWConfig{});
  Publish(dir, 1, {&toy}, 10);
  for (const bool bf16 : {false, true}) {
    const std::string out = dir + (bf16 ? "/model-bf16.safetensors" : "/model.safetensors");
    CHECK(ExportModel(dir, out, bf16) == 2);
    const WeightFiles files = WeightFiles::Open(out);
    REQUIRE(files.Tensors().size() == 2);
    for (const auto& [name, want] : {std::pair<std::string, at::Tensor>{"a", toy.a}, {"b", toy.b}}) {
      const SafetensorsTensor* t = files.Find("model." + name);
      REQUIRE(t != nullptr);
      CHECK(t->dtype == (bf16 ? "BF16" : "F32"));
      CHECK(t->shape == want.sizes().vec());
      at::Tensor got = torch::empty(want.sizes(), torch::kFloat);
      ReadAsFloat32(name, *t, got.data_ptr<float>());
      CHECK(torch::equal(got, bf16 ? want.to(torch::kBFloat16).to(torch::kFloat) : want));
    }
  }
  CHECK_FALSE(torch::equal(toy.b, toy.b.to(torch::kBFloat16).to(torch::kFloat)));  // 2^-10 is below BF16's step
  CHECK_THROWS_WITH(ExportModel(dir, dir + "/model.pt", true), Catch::Contains("--bf16 writes a .safetensors file"));
  // The suffix in capitals names a safetensors file too (it was a pickle).
  CHECK(ExportModel(dir, dir + "/MODEL.SAFETENSORS") == 2);
  CHECK(WeightFiles::Open(dir + "/MODEL.SAFETENSORS").Tensors().size() == 2);
}

TEST_CASE("export-model writes through a symlink, and never over the checkpoint it reads", "[checkpoint]") {
  const std::string dir = Tmp("export_targets");
  Toy toy;
  const std::string step = Publish(dir, 1, {&toy}, 10);
  // A link is written through: the file it names gets the model.
  const std::string target = dir + "/target.pt", link = dir + "/link.pt";
  WriteTextFile(target, "old");
  REQUIRE(::symlink("target.pt", link.c_str()) == 0);
  CHECK(ExportModel(dir, link) == 2);
  CHECK(fs::is_symlink(link));
  CHECK(fs::file_size(target) > 3);
  // The checkpoint's own files, by any name, are refused and left as they were.
  const std::string manifest = ReadTextFile(step + "/manifest.json"), latest = ReadTextFile(dir + "/latest");
  for (const std::string& out : {step + "/manifest.json", step + "/rank-0.shard", dir + "/latest", dir + "/./latest",
                                 step + "/../" + fs::path(step).filename().string() + "/manifest.json"}) {
    INFO(out);
    CHECK_THROWS_WITH(ExportModel(dir, out), Catch::Contains("is among the checkpoints of"));
  }
  REQUIRE(::symlink("latest", (dir + "/to-latest.pt").c_str()) == 0);
  CHECK_THROWS_WITH(ExportModel(dir, dir + "/to-latest.pt"), Catch::Contains("is among the checkpoints of"));
  // The step folder given as such, however spelled or linked, is the one
  // in `dir`: its latest is refused too.
  const std::string step_link = Tmp("export_targets_links") + "/step";
  REQUIRE(::symlink(step.c_str(), step_link.c_str()) == 0);
  for (const std::string& given : {step + "/.", step + "/", step + "//", step_link, step_link + "/"}) {
    INFO(given);
    CHECK(fs::equivalent(fs::path(ResolveCheckpoint(given)).parent_path(), dir));
    CHECK_THROWS_WITH(ExportModel(given, dir + "/latest"), Catch::Contains("is among the checkpoints of " + dir));
  }
  CHECK(ReadTextFile(step + "/manifest.json") == manifest);
  CHECK(ReadTextFile(dir + "/latest") == latest);
  CHECK_THROWS_WITH(ExportModel(dir, ""), Catch::Contains("-o is empty"));
}

}  // namespace pplab::checkpoint_test
