#include "runtime/train/shard_file.h"

#include <torch/torch.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "schedules/error.h"
#include "schedules/json_reader.h"

namespace pplab {
namespace {

constexpr char kMagic[8] = {'P', 'P', 'L', 'A', 'B', 'S', 'H', 'D'};
constexpr uint32_t kVersion = 1;
constexpr size_t kPrefix = 24;  // magic, version, reserved, header length
constexpr size_t kAlign = 64;
// No shard holds more than this: 2^40 bytes of tensors, 2^20 tensors, a
// 64 MiB header. A bound on every size keeps the arithmetic below exact.
constexpr uint64_t kMaxBytes = uint64_t{1} << 40;
constexpr size_t kMaxTensors = size_t{1} << 20;
constexpr uint64_t kMaxHeader = uint64_t{64} << 20;

struct DtypeName {
  at::ScalarType type;
  const char* name;
};
constexpr DtypeName kDtypes[] = {{at::kFloat, "float32"},     {at::kDouble, "float64"}, {at::kHalf, "float16"},
                                 {at::kBFloat16, "bfloat16"}, {at::kLong, "int64"},     {at::kInt, "int32"}};

const char* NameOf(at::ScalarType t) {
  for (const DtypeName& d : kDtypes) {
    if (d.type == t) return d.name;
  }
  throw Error(std::string("checkpoint: cannot store tensors of type ") + c10::toString(t));
}

size_t Padded(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

}  // namespace

std::vector<char> EncodeShard(const ShardIdentity& id, const NamedTensors& tensors) {
  nlohmann::json header = {{"run_id", id.run_id}, {"step", id.step}, {"rank", id.rank}, {"identity", id.identity}};
  header["tensors"] = nlohmann::json::array();
  std::vector<at::Tensor> cpu;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    cpu.push_back(t.detach().to(torch::kCPU).contiguous());
    const uint64_t bytes = cpu.back().numel() * cpu.back().element_size();
    header["tensors"].push_back({{"name", name},
                                 {"dtype", NameOf(cpu.back().scalar_type())},
                                 {"shape", cpu.back().sizes().vec()},
                                 {"offset", offset},
                                 {"bytes", bytes}});
    offset += Padded(bytes);
  }
  const std::string text = header.dump();
  const size_t data_start = Padded(kPrefix + text.size());
  std::vector<char> out(data_start + offset, 0);
  std::memcpy(out.data(), kMagic, sizeof kMagic);
  const uint32_t version = kVersion;
  std::memcpy(out.data() + 8, &version, 4);
  const uint64_t length = text.size();
  std::memcpy(out.data() + 16, &length, 8);
  std::memcpy(out.data() + kPrefix, text.data(), text.size());
  for (size_t i = 0; i < cpu.size(); ++i) {
    const uint64_t at = header["tensors"][i]["offset"].get<uint64_t>();
    if (cpu[i].numel() > 0) std::memcpy(out.data() + data_start + at, cpu[i].data_ptr(), cpu[i].nbytes());
  }
  return out;
}

NamedTensors DecodeShard(const std::string& path, const std::vector<char>& bytes, ShardIdentity* id) {
  auto fail = [&](const std::string& why) -> void { throw Error(path + ": " + why + " (not a valid pplab shard)"); };
  if (bytes.size() < kPrefix || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) fail("no PPLABSHD magic");
  uint32_t version = 0;
  uint64_t length = 0;
  std::memcpy(&version, bytes.data() + 8, 4);
  std::memcpy(&length, bytes.data() + 16, 8);
  if (version != kVersion) fail("format version " + std::to_string(version) + ", this pplab reads 1");
  if (length > kMaxHeader || length > bytes.size() - kPrefix)
    fail("header length " + std::to_string(length) + " runs past the end");
  const size_t data_start = Padded(kPrefix + length);
  if (data_start > bytes.size()) fail("truncated after the header");
  const uint64_t data_bytes = bytes.size() - data_start;
  nlohmann::json h;
  try {
    h = nlohmann::json::parse(bytes.begin() + kPrefix, bytes.begin() + kPrefix + static_cast<std::ptrdiff_t>(length));
  } catch (const std::exception& e) {
    fail(std::string("header is not JSON: ") + e.what());
  }
  NamedTensors out;
  try {
    if (!h.is_object() || !h.at("run_id").is_string() || !h.at("step").is_number_integer() ||
        !h.at("rank").is_number_integer() || !h.at("identity").is_string() || !h.at("tensors").is_array()) {
      fail("header fields run_id, step, rank, identity or tensors missing or of the wrong type");
    }
    if (id != nullptr) {
      id->run_id = h["run_id"].get<std::string>();
      id->step = h["step"].get<int64_t>();
      id->rank = h["rank"].get<int>();
      id->identity = h["identity"].get<std::string>();
    }
    if (h["tensors"].size() > kMaxTensors) fail("too many tensors");
    for (const auto& t : h["tensors"]) {
      const std::string name = t.at("name").get<std::string>();
      const std::string dtype = t.at("dtype").get<std::string>();
      at::ScalarType type = at::kFloat;
      bool known = false;
      for (const DtypeName& d : kDtypes) {
        if (dtype == d.name) type = d.type, known = true;
      }
      if (!known) fail("tensor " + name + ": unknown dtype '" + dtype + "'");
      std::vector<int64_t> shape;
      for (const auto& dim : t.at("shape")) {
        if (!dim.is_number_integer() || dim.get<int64_t>() < 0 || dim.get<uint64_t>() > kMaxBytes) {
          fail("tensor " + name + ": bad shape " + t.at("shape").dump());
        }
        shape.push_back(dim.get<int64_t>());
      }
      if (shape.size() > 16) fail("tensor " + name + ": more than 16 dimensions");
      // The product, refused once past kMaxBytes (checked before each
      // multiplication, so it never wraps); a 0 anywhere makes it 0.
      uint64_t numel = std::find(shape.begin(), shape.end(), 0) != shape.end() ? 0 : 1;
      for (const int64_t d : shape) {
        if (numel == 0) break;
        if (numel > kMaxBytes / static_cast<uint64_t>(d)) fail("tensor " + name + ": shape too large");
        numel *= static_cast<uint64_t>(d);
      }
      const uint64_t size = numel * c10::elementSize(type);
      const auto& off = t.at("offset");
      const auto& nb = t.at("bytes");
      if (!off.is_number_unsigned() || !nb.is_number_unsigned() || nb.get<uint64_t>() != size) {
        fail("tensor " + name + ": byte count does not match its shape and dtype");
      }
      const uint64_t offset = off.get<uint64_t>();
      if (offset > data_bytes || size > data_bytes - offset)
        fail("tensor " + name + ": data runs past the end of the file");
      at::Tensor tensor = torch::empty(shape, torch::TensorOptions().dtype(type));
      if (size > 0) std::memcpy(tensor.data_ptr(), bytes.data() + data_start + offset, size);
      out.emplace_back(name, std::move(tensor));
    }
  } catch (const nlohmann::json::exception& e) {
    fail("header: " + JsonErrorText(e));
  }
  return out;
}

std::vector<char> ReadBinaryFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw Error("checkpoint: cannot read " + path);
  const std::streamsize size = in.tellg();
  if (size < 0) throw Error("checkpoint: cannot read " + path);
  std::vector<char> bytes(static_cast<size_t>(size));
  in.seekg(0);
  if (!in.read(bytes.data(), size)) throw Error("checkpoint: cannot read " + path);
  return bytes;
}

void WriteBinaryFile(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.flush();
  if (!out) throw Error("checkpoint: cannot write " + path + " (disk full or not writable?)");
}

}  // namespace pplab
