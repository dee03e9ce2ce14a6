// The safetensors file format (huggingface/safetensors), without LibTorch: its element types, the
// description of one tensor, and the JSON header, written and read. A file is an 8-byte
// little-endian header length N, N bytes of JSON ({"__metadata__": {str: str}, name: {"dtype",
// "shape", "data_offsets": [begin, end]}, ...}, padded with spaces to a multiple of 8), then the
// data section, which the tensors' byte ranges (relative to its start) cover exactly.
// The readers (safetensors_reader.hpp, safetensors_dir.hpp), the writer
// (safetensors_writer.hpp) and the LibTorch bridge (safetensors.hpp) build on this.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace autoloco {

// Every element type of the format. Those LibTorch 1.13 lacks (U16, U32, U64, the F8s) are
// listed, so that such a file opens and says which tensor it cannot convert.
enum class SafetensorsDtype {
  BOOL,
  U8,
  I8,
  F8_E5M2,
  F8_E4M3,
  I16,
  U16,
  F16,
  BF16,
  I32,
  U32,
  F32,
  F64,
  I64,
  U64
};

// The name in the header ("F32"), the type of a name (nullopt when unknown), bytes per element.
const char* dtype_name(SafetensorsDtype dtype);
std::optional<SafetensorsDtype> dtype_from_name(const std::string& name);
uint64_t dtype_bytes(SafetensorsDtype dtype);

// One tensor of a file: [begin, end) are byte offsets into the data section.
struct SafetensorsEntry {
  std::string name;
  SafetensorsDtype dtype = SafetensorsDtype::F32;
  std::vector<int64_t> shape;
  uint64_t begin = 0;
  uint64_t end = 0;

  uint64_t bytes() const { return end - begin; }
  int64_t numel() const;
  bool operator==(const SafetensorsEntry& other) const;
};

// What a file's header says: its tensors in the order of their data, and __metadata__.
struct SafetensorsHeader {
  std::vector<SafetensorsEntry> entries;
  std::map<std::string, std::string> metadata;
};

// The largest header a reader accepts, as the safetensors library does (100 MB): a damaged
// length field must not make it allocate the size of the file.
constexpr uint64_t kSafetensorsMaxHeaderBytes = 100'000'000;

// The header's JSON for `entries` (their order kept), padded with spaces to a multiple of 8
// bytes as the safetensors library pads it, so that the data section starts 8-byte aligned.
std::string encode_safetensors_header(const std::vector<SafetensorsEntry>& entries,
                                      const std::map<std::string, std::string>& metadata);

// Parses and checks a header completely before anything trusts it: JSON, known dtypes,
// non-negative dims whose product fits, byte ranges that match the shapes, lie in the data
// section of `data_bytes` bytes and cover it without overlaps or holes, unique names.
// Throws CheckpointError naming `path`, the tensor and what is wrong. Entries come sorted by
// their offset in the data (the writer's order).
SafetensorsHeader parse_safetensors_header(const std::string& json, uint64_t data_bytes,
                                           const std::string& path);

}  // namespace autoloco
