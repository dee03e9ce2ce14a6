// The safetensors header: its element types, its JSON written the way the safetensors library
// writes it, and its parsing with every check a reader needs before it trusts an offset.
#include "autoloco/model/safetensors_format.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join (LibTorch 2.x bundles an fmt that keeps it there)
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <limits>
#include <set>
#include <utility>

#include "autoloco/util/error.hpp"
#include "autoloco/util/json.hpp"

namespace autoloco {
namespace {

struct DtypeInfo {
  SafetensorsDtype dtype;
  const char* name;
  uint64_t bytes;
};

constexpr std::array<DtypeInfo, 15> kDtypes = {{
    {SafetensorsDtype::BOOL, "BOOL", 1},
    {SafetensorsDtype::U8, "U8", 1},
    {SafetensorsDtype::I8, "I8", 1},
    {SafetensorsDtype::F8_E5M2, "F8_E5M2", 1},
    {SafetensorsDtype::F8_E4M3, "F8_E4M3", 1},
    {SafetensorsDtype::I16, "I16", 2},
    {SafetensorsDtype::U16, "U16", 2},
    {SafetensorsDtype::F16, "F16", 2},
    {SafetensorsDtype::BF16, "BF16", 2},
    {SafetensorsDtype::I32, "I32", 4},
    {SafetensorsDtype::U32, "U32", 4},
    {SafetensorsDtype::F32, "F32", 4},
    {SafetensorsDtype::F64, "F64", 8},
    {SafetensorsDtype::I64, "I64", 8},
    {SafetensorsDtype::U64, "U64", 8},
}};

const DtypeInfo& info(SafetensorsDtype dtype) {
  for (const DtypeInfo& d : kDtypes) {
    if (d.dtype == dtype) return d;
  }
  throw Error(fmt::format("safetensors dtype {} has no entry", static_cast<int>(dtype)));
}

constexpr const char* kDamaged = "the file is damaged or not a safetensors file";

CheckpointError file_error(const std::string& path, const std::string& what) {
  return CheckpointError(fmt::format("'{}': {}: {}", path, what, kDamaged));
}

CheckpointError tensor_error(const std::string& path, const std::string& name,
                             const std::string& what) {
  return CheckpointError(fmt::format("'{}': tensor '{}': {}: {}", path, name, what, kDamaged));
}

std::string shape_text(const std::vector<int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

// A JSON integer: a plain (unquoted) scalar of decimal digits no larger than `max`. Stricter
// than yaml-cpp's as<>() (which takes "0x10", "+1" or a quoted "1").
std::optional<uint64_t> json_integer(const YAML::Node& node, uint64_t max) {
  if (!node.IsScalar() || node.Tag() != "?") return std::nullopt;
  const std::optional<uint64_t> value = parse_json_uint(node.Scalar());
  if (!value || *value > max) return std::nullopt;
  return value;
}

// The list of integers under `key` of a tensor's entry.
std::vector<uint64_t> integer_list(const YAML::Node& node, const char* key, uint64_t max,
                                   const std::string& path, const std::string& name) {
  if (!node.IsSequence()) throw tensor_error(path, name, fmt::format("\"{}\" is not a list", key));
  std::vector<uint64_t> values;
  for (const YAML::Node& item : node) {
    const std::optional<uint64_t> value = json_integer(item, max);
    if (!value) {
      throw tensor_error(path, name,
                         fmt::format("\"{}\" holds '{}', not an integer from 0 to {}", key,
                                     item.IsScalar() ? item.Scalar() : "(a list or object)", max));
    }
    values.push_back(*value);
  }
  return values;
}

// Elements times bytes per element, or nullopt when either overflows (a numel must also fit
// int64, as LibTorch counts elements in it).
std::optional<uint64_t> byte_size(const std::vector<int64_t>& shape, uint64_t element_bytes) {
  uint64_t numel = 1;
  for (const int64_t d : shape) {
    if (d == 0) return 0;
  }
  for (const int64_t d : shape) {
    if (__builtin_mul_overflow(numel, static_cast<uint64_t>(d), &numel)) return std::nullopt;
  }
  if (numel > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(numel, element_bytes, &bytes)) return std::nullopt;
  return bytes;
}

SafetensorsEntry parse_entry(const std::string& name, const YAML::Node& node, uint64_t data_bytes,
                             const std::string& path) {
  if (!node.IsMap()) throw tensor_error(path, name, "its entry is not an object");
  SafetensorsEntry e;
  e.name = name;
  bool has_dtype = false, has_shape = false, has_offsets = false;
  for (const auto& field : node) {
    const std::string key = field.first.IsScalar() ? field.first.Scalar() : "";
    if (key == "dtype" && !has_dtype) {
      const std::string dtype = field.second.IsScalar() ? field.second.Scalar() : "";
      const std::optional<SafetensorsDtype> known = dtype_from_name(dtype);
      if (!known) throw tensor_error(path, name, fmt::format("unknown dtype '{}'", dtype));
      e.dtype = *known;
      has_dtype = true;
    } else if (key == "shape" && !has_shape) {
      const auto max = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
      for (const uint64_t d : integer_list(field.second, "shape", max, path, name))
        e.shape.push_back(static_cast<int64_t>(d));
      has_shape = true;
    } else if (key == "data_offsets" && !has_offsets) {
      const std::vector<uint64_t> offsets = integer_list(
          field.second, "data_offsets", std::numeric_limits<uint64_t>::max(), path, name);
      if (offsets.size() != 2) {
        throw tensor_error(path, name, "\"data_offsets\" is not a pair [begin, end]");
      }
      e.begin = offsets[0];
      e.end = offsets[1];
      has_offsets = true;
    } else {
      throw tensor_error(path, name, fmt::format("unexpected or repeated field '{}'", key));
    }
  }
  if (!has_dtype || !has_shape || !has_offsets) {
    throw tensor_error(path, name, "its entry lacks one of \"dtype\", \"shape\", \"data_offsets\"");
  }
  const std::optional<uint64_t> bytes = byte_size(e.shape, dtype_bytes(e.dtype));
  if (!bytes) {
    throw tensor_error(
        path, name,
        fmt::format("shape {} has more elements than fit in 64 bits", shape_text(e.shape)));
  }
  if (e.begin > e.end || e.end > data_bytes) {
    throw tensor_error(path, name,
                       fmt::format("data_offsets [{}, {}] do not lie in the data section of {} "
                                   "bytes",
                                   e.begin, e.end, data_bytes));
  }
  if (e.end - e.begin != *bytes) {
    throw tensor_error(path, name,
                       fmt::format("shape {} of {} is {} bytes but data_offsets [{}, {}] hold {}",
                                   shape_text(e.shape), dtype_name(e.dtype), *bytes, e.begin, e.end,
                                   e.end - e.begin));
  }
  return e;
}

std::map<std::string, std::string> parse_metadata(const YAML::Node& node, const std::string& path) {
  if (!node.IsMap()) throw file_error(path, "\"__metadata__\" is not an object");
  std::map<std::string, std::string> metadata;
  for (const auto& field : node) {
    if (!field.first.IsScalar() || !field.second.IsScalar()) {
      throw file_error(path, "\"__metadata__\" holds a value that is not a string");
    }
    if (!metadata.emplace(field.first.Scalar(), field.second.Scalar()).second) {
      throw file_error(path,
                       fmt::format("\"__metadata__\" names '{}' twice", field.first.Scalar()));
    }
  }
  return metadata;
}

// The tensors, sorted by offset, must tile the data section: the format forbids holes (they could
// hide a second file in the first) and overlaps (two tensors sharing bytes).
void check_tiling(std::vector<SafetensorsEntry>& entries, uint64_t data_bytes,
                  const std::string& path) {
  std::stable_sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
    return std::make_pair(a.begin, a.end) < std::make_pair(b.begin, b.end);
  });
  uint64_t covered = 0;
  const SafetensorsEntry* previous = nullptr;
  for (const SafetensorsEntry& e : entries) {
    if (e.begin < covered) {
      throw tensor_error(
          path, e.name,
          fmt::format("its bytes [{}, {}) overlap those of tensor '{}' [{}, {})", e.begin, e.end,
                      previous->name, previous->begin, previous->end));
    }
    if (e.begin > covered) {
      throw tensor_error(
          path, e.name,
          fmt::format("bytes [{}, {}) of the data section before it belong to no tensor", covered,
                      e.begin));
    }
    covered = e.end;
    previous = &e;
  }
  if (covered != data_bytes) {
    throw file_error(path, fmt::format("the data section holds {} bytes but the tensors cover {}",
                                       data_bytes, covered));
  }
}

SafetensorsHeader parse_root(const YAML::Node& root, uint64_t data_bytes, const std::string& path) {
  if (!root.IsMap()) throw file_error(path, "the header is not a JSON object");
  SafetensorsHeader header;
  std::set<std::string> names;
  for (const auto& item : root) {
    if (!item.first.IsScalar()) throw file_error(path, "the header has a key that is not a string");
    const std::string& name = item.first.Scalar();
    if (!names.insert(name).second) {
      throw tensor_error(path, name, "the header names it twice");
    }
    if (name == "__metadata__") {
      header.metadata = parse_metadata(item.second, path);
    } else {
      header.entries.push_back(parse_entry(name, item.second, data_bytes, path));
    }
  }
  check_tiling(header.entries, data_bytes, path);
  return header;
}

}  // namespace

const char* dtype_name(SafetensorsDtype dtype) {
  return info(dtype).name;
}

std::optional<SafetensorsDtype> dtype_from_name(const std::string& name) {
  for (const DtypeInfo& d : kDtypes) {
    if (name == d.name) return d.dtype;
  }
  return std::nullopt;
}

uint64_t dtype_bytes(SafetensorsDtype dtype) {
  return info(dtype).bytes;
}

int64_t SafetensorsEntry::numel() const {
  int64_t n = 1;
  for (const int64_t d : shape)
    n *= d;
  return n;
}

bool SafetensorsEntry::operator==(const SafetensorsEntry& other) const {
  return name == other.name && dtype == other.dtype && shape == other.shape &&
         begin == other.begin && end == other.end;
}

std::string encode_safetensors_header(const std::vector<SafetensorsEntry>& entries,
                                      const std::map<std::string, std::string>& metadata) {
  // Compact JSON as serde_json writes it, __metadata__ first.
  std::string json = "{";
  if (!metadata.empty()) {
    json += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [key, value] : metadata) {
      json += fmt::format("{}{}:{}", first ? "" : ",", json_quote(key), json_quote(value));
      first = false;
    }
    json += "}";
  }
  for (const SafetensorsEntry& e : entries) {
    json += fmt::format("{}{}:{{\"dtype\":\"{}\",\"shape\":[{}],\"data_offsets\":[{},{}]}}",
                        json.size() > 1 ? "," : "", json_quote(e.name), dtype_name(e.dtype),
                        fmt::join(e.shape, ","), e.begin, e.end);
  }
  json += "}";
  json.append((8 - json.size() % 8) % 8, ' ');
  return json;
}

SafetensorsHeader parse_safetensors_header(const std::string& json, uint64_t data_bytes,
                                           const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::Load(json);  // JSON is a subset of YAML's flow style
  } catch (const YAML::Exception& e) {
    throw file_error(path, fmt::format("the header is not valid JSON ({})", e.what()));
  }
  try {
    return parse_root(root, data_bytes, path);
  } catch (const YAML::Exception& e) {
    throw file_error(path,
                     fmt::format("the header is not a valid safetensors header ({})", e.what()));
  }
}

}  // namespace autoloco
