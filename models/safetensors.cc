#include "models/safetensors.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <tuple>
#include <utility>
#include <vector>

#include "schedules/error.h"
#include "schedules/file_io.h"
#include "schedules/json_reader.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors are little-endian; this reader assumes a little-endian host"
#endif

namespace pplab {
namespace {

using nlohmann::json;

// A header longer than this is not a weight file (the largest published
// models' headers are a few MB).
constexpr uint64_t kMaxHeaderBytes = 100ULL << 20;

int DtypeBytes(const std::string& dtype) {
  static const std::pair<const char*, int> kSizes[] = {
      {"F64", 8}, {"F32", 4},  {"F16", 2}, {"BF16", 2}, {"I64", 8}, {"I32", 4},     {"I16", 2},    {"I8", 1},
      {"U8", 1},  {"BOOL", 1}, {"U16", 2}, {"U32", 4},  {"U64", 8}, {"F8_E4M3", 1}, {"F8_E5M2", 1}};
  for (const auto& [name, bytes] : kSizes) {
    if (dtype == name) return bytes;
  }
  return 0;
}

uint64_t FileSize(const std::string& file) {
  struct stat info;
  if (stat(file.c_str(), &info) != 0) throw Error("cannot read " + file + ": " + std::strerror(errno));
  if (!S_ISREG(info.st_mode)) throw Error("cannot read " + file + ": not a regular file");
  return static_cast<uint64_t>(info.st_size);
}

bool IsDirectory(const std::string& path) {
  struct stat info;
  return stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
}

bool Exists(const std::string& path) {
  struct stat info;
  return stat(path.c_str(), &info) == 0;
}

std::string Join(const std::string& dir, const std::string& name) {
  return dir + (dir.empty() || dir.back() == '/' ? "" : "/") + name;
}

}  // namespace

int64_t SafetensorsTensor::Elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::map<std::string, SafetensorsTensor> ReadSafetensorsHeader(const std::string& file) {
  auto fail = [&](const std::string& why) { throw Error(file + ": " + why); };
  const uint64_t size = FileSize(file);
  std::ifstream in(file, std::ios::binary);
  if (!in) fail("cannot open");
  unsigned char length_bytes[8] = {};
  if (size < 8 || !in.read(reinterpret_cast<char*>(length_bytes), 8)) fail("too short for a safetensors file");
  uint64_t length = 0;
  for (int i = 7; i >= 0; --i) length = (length << 8) | length_bytes[i];
  if (length > kMaxHeaderBytes || length > size - 8) {
    fail("the header length " + std::to_string(length) + " does not fit the file of " + std::to_string(size) +
         " bytes: not a safetensors file");
  }
  std::string text(length, '\0');
  if (!in.read(text.data(), static_cast<std::streamsize>(length))) fail("cannot read the header");
  if (text.find('\0') != std::string::npos) fail("the safetensors header holds a NUL byte");
  const json header = ParseJsonStrict(text, file + ": the safetensors header");
  if (!header.is_object()) fail("the safetensors header is not a JSON object");
  if (header.contains("__metadata__")) {
    const json& m = header["__metadata__"];
    bool strings = m.is_object();
    for (auto it = strings ? m.begin() : json::const_iterator(); strings && it != m.end(); ++it) {
      strings = it.value().is_string();
    }
    if (!strings) fail("__metadata__ must map names to strings, got " + m.dump());
  }
  const uint64_t data_start = 8 + length, data_bytes = size - data_start;
  std::map<std::string, SafetensorsTensor> out;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    const std::string where = "tensor '" + it.key() + "': ";
    const json& e = it.value();
    if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") || !e.contains("data_offsets")) {
      fail(where + "expected {\"dtype\", \"shape\", \"data_offsets\"}, got " + e.dump());
    }
    SafetensorsTensor t;
    t.file = file;
    if (!e["dtype"].is_string() || DtypeBytes(e["dtype"].get<std::string>()) == 0) {
      fail(where + "unknown dtype " + e["dtype"].dump());
    }
    t.dtype = e["dtype"].get<std::string>();
    if (!e["shape"].is_array()) fail(where + "shape must be an array, got " + e["shape"].dump());
    for (const json& d : e["shape"]) {
      if (!d.is_number_integer() || d.get<long long>() < 0 || d.get<long long>() > (1LL << 40)) {
        fail(where + "shape " + e["shape"].dump() + " is not a list of sizes");
      }
      t.shape.push_back(d.get<int64_t>());
    }
    const json& off = e["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned() ||
        off[0].get<uint64_t>() > off[1].get<uint64_t>() || off[1].get<uint64_t>() > data_bytes) {
      fail(where + "data_offsets " + off.dump() + " are not a range inside the file's " + std::to_string(data_bytes) +
           " bytes of data");
    }
    t.offset = data_start + off[0].get<uint64_t>();
    t.bytes = off[1].get<uint64_t>() - off[0].get<uint64_t>();
    // The shape's bytes, multiplied only while they stay within the range's
    // (so nothing overflows, and Elements() is safe once they match).
    uint64_t want = static_cast<uint64_t>(DtypeBytes(t.dtype));
    bool empty = false;
    for (int64_t d : t.shape) empty = empty || d == 0;
    for (int64_t d : t.shape) {
      if (empty)
        want = 0;
      else
        want = want <= t.bytes / static_cast<uint64_t>(d) ? want * static_cast<uint64_t>(d) : t.bytes + 1;
    }
    if (want != t.bytes) {
      fail(where + "its " + std::to_string(t.bytes) + " bytes do not hold shape " + e["shape"].dump() + " of " +
           t.dtype);
    }
    out.emplace(it.key(), std::move(t));
  }
  // The tensors' ranges tile the data from its start to the file's end, as
  // Hugging Face's reader requires: no two share bytes, none is left over.
  std::vector<std::tuple<uint64_t, uint64_t, std::string>> ranges;  // (offset, bytes, name)
  for (const auto& [name, t] : out) ranges.emplace_back(t.offset, t.bytes, name);
  std::sort(ranges.begin(), ranges.end());
  uint64_t at = data_start;
  for (const auto& [offset, bytes, name] : ranges) {
    if (offset != at) {
      fail("tensor '" + name + "' starts at data byte " + std::to_string(offset - data_start) +
           (offset < at ? ", inside the tensor before it" : ", past a gap after the tensor before it") +
           " (data_offsets must tile the data)");
    }
    at += bytes;
  }
  if (at != size) {
    fail("the tensors' data ends at byte " + std::to_string(at - data_start) + " of " + std::to_string(data_bytes) +
         ": the file holds bytes no tensor names");
  }
  return out;
}

WeightFiles WeightFiles::Open(const std::string& path) {
  WeightFiles w;
  w.origin_ = path;
  if (!IsDirectory(path)) {
    w.tensors_ = ReadSafetensorsHeader(path);
    return w;
  }
  const std::string index = Join(path, "model.safetensors.index.json");
  if (!Exists(index)) {
    const std::string single = Join(path, "model.safetensors");
    if (!Exists(single)) {
      const bool pickled =
          Exists(Join(path, "pytorch_model.bin")) || Exists(Join(path, "pytorch_model.bin.index.json"));
      throw Error(path + " is a folder without model.safetensors or model.safetensors.index.json" +
                  (pickled ? std::string(" (its pytorch_model*.bin files are pickles, which pplab does not read: "
                                         "convert them to safetensors)")
                           : std::string()));
    }
    w.tensors_ = ReadSafetensorsHeader(single);
    return w;
  }
  const json doc = ParseJsonStrict(ReadTextFile(index), index);
  if (!doc.is_object() || !doc.contains("weight_map") || !doc["weight_map"].is_object()) {
    throw Error(index + ": expected {\"weight_map\": {tensor: file}}");
  }
  std::map<std::string, std::map<std::string, SafetensorsTensor>> files;
  for (auto it = doc["weight_map"].begin(); it != doc["weight_map"].end(); ++it) {
    if (!it.value().is_string()) throw Error(index + ": weight_map['" + it.key() + "'] is not a file name");
    const std::string name = it.value().get<std::string>();
    if (name.empty() || name.find('/') != std::string::npos || name == "..") {
      throw Error(index + ": weight_map['" + it.key() + "'] names '" + name + "', not a file in the folder");
    }
    auto file = files.find(name);
    if (file == files.end()) file = files.emplace(name, ReadSafetensorsHeader(Join(path, name))).first;
    const auto tensor = file->second.find(it.key());
    if (tensor == file->second.end()) {
      throw Error(index + ": tensor '" + it.key() + "' is listed in " + name + ", whose header does not have it");
    }
    w.tensors_.emplace(it.key(), tensor->second);
  }
  return w;
}

const SafetensorsTensor* WeightFiles::Find(const std::string& name) const {
  const auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  uint32_t bits;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000 | (mantissa << 13);  // inf or NaN
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);  // rebias 15 -> 127
  } else if (mantissa == 0) {
    bits = sign;  // +-0
  } else {
    // A subnormal half, mantissa x 2^-24, is a normal float: shift the
    // mantissa up until its leading 1 is the implicit bit.
    uint32_t m = mantissa;
    int e = -1;
    do {
      m <<= 1;
      ++e;
    } while ((m & 0x400) == 0);
    bits = sign | (static_cast<uint32_t>(112 - e) << 23) | ((m & 0x3ff) << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

float Bfloat16ToFloat(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t FloatToBfloat16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((bits >> 16) | 0x40);  // a quiet NaN
  bits += 0x7fff + ((bits >> 16) & 1);
  return static_cast<uint16_t>(bits >> 16);
}

namespace {

// A tensor's values in order, widened to float, read a part at a time.
class FloatReader {
 public:
  FloatReader(const std::string& name, const SafetensorsTensor& t)
      : name_(name), t_(t), in_(t.file, std::ios::binary), left_(t.Elements()) {
    width_ = t.dtype == "F32" ? 4 : t.dtype == "BF16" || t.dtype == "F16" ? 2 : 0;
    if (width_ == 0) {
      throw Error(t.file + ": tensor '" + name + "' is " + t.dtype +
                  "; pplab reads weights stored as F32, BF16 or F16");
    }
    in_.seekg(static_cast<std::streamoff>(t.offset));
  }

  // The next min(n, what is left) values into `out`; how many.
  int64_t Read(float* out, int64_t n) {
    n = std::min(n, left_);
    if (width_ == 4) {
      in_.read(reinterpret_cast<char*>(out), static_cast<std::streamsize>(n) * 4);
    } else {
      const bool bfloat = t_.dtype == "BF16";  // else F16
      halves_.resize(static_cast<size_t>(std::min<int64_t>(n, int64_t{1} << 20)));
      for (int64_t done = 0; done < n && in_;) {
        const int64_t take = std::min<int64_t>(n - done, static_cast<int64_t>(halves_.size()));
        if (!in_.read(reinterpret_cast<char*>(halves_.data()), static_cast<std::streamsize>(take) * 2)) break;
        for (int64_t i = 0; i < take; ++i) {
          out[done + i] = bfloat ? Bfloat16ToFloat(halves_[i]) : HalfToFloat(halves_[i]);
        }
        done += take;
      }
    }
    if (!in_) {
      throw Error(t_.file + ": cannot read tensor '" + name_ + "' (the file is shorter than its header says)");
    }
    left_ -= n;
    return n;
  }

 private:
  const std::string& name_;
  const SafetensorsTensor& t_;
  std::ifstream in_;
  int64_t left_;
  int width_ = 0;
  std::vector<uint16_t> halves_;
};

}  // namespace

void ReadAsFloat32(const std::string& name, const SafetensorsTensor& t, float* out) {
  FloatReader(name, t).Read(out, t.Elements());
}

bool SameValues(const std::string& a_name, const SafetensorsTensor& a, const std::string& b_name,
                const SafetensorsTensor& b) {
  if (a.shape != b.shape) return false;
  FloatReader ra(a_name, a), rb(b_name, b);
  constexpr int64_t kChunk = int64_t{1} << 20;
  std::vector<float> va(static_cast<size_t>(std::min(a.Elements(), kChunk)));
  std::vector<float> vb(va.size());
  for (int64_t left = a.Elements(); left > 0;) {
    const int64_t n = ra.Read(va.data(), kChunk);
    rb.Read(vb.data(), kChunk);
    if (std::memcmp(va.data(), vb.data(), static_cast<size_t>(n) * sizeof(float)) != 0) return false;
    left -= n;
  }
  return true;
}

void WriteSafetensors(const std::string& path, const std::vector<TensorToWrite>& tensors, bool bf16,
                      const std::map<std::string, std::string>& metadata) {
  // nlohmann's object keeps keys sorted; the data goes in the same order,
  // so that the offsets rise through the file.
  std::map<std::string, const TensorToWrite*> by_name;
  for (const TensorToWrite& t : tensors) {
    if (!by_name.emplace(t.name, &t).second) throw Error(path + ": tensor '" + t.name + "' given twice");
  }
  const uint64_t width = bf16 ? 2 : 4;
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t at = 0;
  for (const auto& [name, t] : by_name) {
    uint64_t n = 1;
    for (int64_t d : t->shape) n *= static_cast<uint64_t>(d);
    header[name] = {{"dtype", bf16 ? "BF16" : "F32"}, {"shape", t->shape}, {"data_offsets", {at, at + n * width}}};
    at += n * width;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the data starts 8-byte aligned
  WriteFile(path, [&](std::ostream& out) {
    unsigned char length[8];
    for (int i = 0; i < 8; ++i) length[i] = static_cast<unsigned char>((text.size() >> (8 * i)) & 0xff);
    out.write(reinterpret_cast<const char*>(length), 8);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    std::vector<uint16_t> chunk;
    for (const auto& [name, t] : by_name) {
      int64_t n = 1;
      for (int64_t d : t->shape) n *= d;
      if (!bf16) {
        out.write(reinterpret_cast<const char*>(t->data), static_cast<std::streamsize>(n) * 4);
        continue;
      }
      chunk.resize(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) chunk[i] = FloatToBfloat16(t->data[i]);
      out.write(reinterpret_cast<const char*>(chunk.data()), static_cast<std::streamsize>(n) * 2);
    }
  });
}

}  // namespace pplab
