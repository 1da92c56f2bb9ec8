// safetensors: the files Hugging Face publishes model weights in (no
// LibTorch here).
//
// A file is an 8-byte little-endian length N, then N bytes of JSON that map
// each tensor's name to {"dtype", "shape", "data_offsets": [begin, end]}
// (plus an optional "__metadata__" of strings), then the tensors' bytes;
// the offsets count from the end of the JSON. A model too big for one file
// is several, listed by model.safetensors.index.json ({"weight_map": {name:
// file}}).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace pplab {

struct SafetensorsTensor {
  std::string file;   // the file that holds it
  std::string dtype;  // as written: "F32", "BF16", "F16", "I64", ...
  std::vector<int64_t> shape;
  uint64_t offset = 0;  // of its first byte in `file`
  uint64_t bytes = 0;
  int64_t Elements() const;
};

// The tensors of one safetensors file or of a model's folder, by name,
// from their headers (the data is read by ReadAsFloat32). Every header is
// checked when opened: its JSON, each entry's dtype, shape and offsets
// inside the file and matching the shape. Errors (pplab::Error) name the
// file and the tensor.
class WeightFiles {
 public:
  // `path`: a .safetensors file; or a folder holding
  // model.safetensors.index.json (the model in several files) or
  // model.safetensors.
  static WeightFiles Open(const std::string& path);

  // nullptr when no file has `name`.
  const SafetensorsTensor* Find(const std::string& name) const;
  const std::map<std::string, SafetensorsTensor>& Tensors() const { return tensors_; }
  // The path Open was given, for messages.
  const std::string& Origin() const { return origin_; }

 private:
  std::string origin_;
  std::map<std::string, SafetensorsTensor> tensors_;
};

// The tensors of one file, from its header.
std::map<std::string, SafetensorsTensor> ReadSafetensorsHeader(const std::string& file);

// Reads `t` into `out` (t.Elements() floats): F32 as stored, BF16 and F16
// widened (exactly: every such value is a float). Throws pplab::Error for
// another dtype, naming the tensor, or when the file is short.
void ReadAsFloat32(const std::string& name, const SafetensorsTensor& t, float* out);

// Whether `a` and `b` have one shape and the same values, read as
// ReadAsFloat32 reads them (so an F32 tensor can equal a BF16 one), compared
// bit for bit, a part at a time. The names are for ReadAsFloat32's errors.
bool SameValues(const std::string& a_name, const SafetensorsTensor& a, const std::string& b_name,
                const SafetensorsTensor& b);

struct TensorToWrite {
  std::string name;
  std::vector<int64_t> shape;
  const float* data = nullptr;  // shape's product of values
};

// Writes `tensors` to `path` as F32, or as BF16 (rounded to nearest, ties to
// even) where `bf16`, in the order given, with `metadata` as the header's
// __metadata__. As WriteFile writes (schedules/file_io.h): a regular file
// through a temporary renamed into place, so a failure leaves no partial
// file; a device, FIFO or symlink written through.
void WriteSafetensors(const std::string& path, const std::vector<TensorToWrite>& tensors, bool bf16,
                      const std::map<std::string, std::string>& metadata = {});

// IEEE half and bfloat16 bit patterns to float, and float to bfloat16
// (round to nearest, ties to even; NaN stays NaN).
float HalfToFloat(uint16_t h);
float Bfloat16ToFloat(uint16_t b);
uint16_t FloatToBfloat16(float f);

}  // namespace pplab
