// write_safetensors_file: lays the tensors out end to end, writes the header and the bytes to a
// new file, and puts it in place without replacing any file.
#include "autoloco/model/safetensors_writer.hpp"

#include <fmt/format.h>

#include <limits>
#include <set>
#include <vector>

#include "autoloco/util/error.hpp"
#include "autoloco/util/new_file.hpp"

namespace autoloco {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "safetensors data is little-endian and is written as held in memory");

CheckpointError tensor_error(const std::string& path, const std::string& name,
                             const std::string& what) {
  return CheckpointError(fmt::format("cannot write tensor '{}' to '{}': {}", name, path, what));
}

uint64_t blob_bytes(const SafetensorsBlob& t, const std::string& path) {
  uint64_t bytes = dtype_bytes(t.dtype);
  for (const int64_t d : t.shape) {
    if (d < 0) throw tensor_error(path, t.name, fmt::format("dimension {} is negative", d));
    if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes)) {
      throw tensor_error(path, t.name, "its size overflows 64 bits");
    }
  }
  return bytes;
}

void write_blob(NewFile& file, const SafetensorsBlob& t, uint64_t bytes) {
  if (t.data != nullptr || bytes == 0) {
    file.write(t.data, bytes);
    return;
  }
  if (!t.fill) {
    throw tensor_error(file.path(), t.name, "it has neither data nor a fill function");
  }
  std::vector<char> buffer(bytes);
  t.fill(buffer.data());
  file.write(buffer.data(), buffer.size());
}

}  // namespace

std::vector<SafetensorsEntry> layout_safetensors(const std::vector<SafetensorsBlob>& tensors,
                                                 const std::string& path) {
  std::vector<SafetensorsEntry> entries;
  std::set<std::string> names;
  uint64_t offset = 0;
  for (const SafetensorsBlob& t : tensors) {
    if (t.name == "__metadata__") {
      throw tensor_error(path, t.name, "the name is reserved for the file's metadata");
    }
    if (!names.insert(t.name).second) throw tensor_error(path, t.name, "the name is given twice");
    const uint64_t bytes = blob_bytes(t, path);
    if (bytes > std::numeric_limits<uint64_t>::max() - offset) {
      throw tensor_error(path, t.name, "the file's size overflows 64 bits");
    }
    entries.push_back(SafetensorsEntry{t.name, t.dtype, t.shape, offset, offset + bytes});
    offset += bytes;
  }
  return entries;
}

void write_safetensors_file(const std::string& path, const std::vector<SafetensorsBlob>& tensors,
                            const std::map<std::string, std::string>& metadata) {
  const std::vector<SafetensorsEntry> entries = layout_safetensors(tensors, path);
  const std::string header = encode_safetensors_header(entries, metadata);
  if (header.size() > kSafetensorsMaxHeaderBytes) {
    throw CheckpointError(fmt::format(
        "cannot write '{}': its header of {} bytes is over the {} bytes readers accept; write "
        "fewer tensors to each file",
        path, header.size(), kSafetensorsMaxHeaderBytes));
  }
  unsigned char length[8];
  for (int i = 0; i < 8; ++i)
    length[i] = static_cast<unsigned char>(static_cast<uint64_t>(header.size()) >> (8 * i));
  try {
    NewFile file(path);
    file.write(length, sizeof(length));
    file.write(header.data(), header.size());
    for (size_t i = 0; i < tensors.size(); ++i)
      write_blob(file, tensors[i], entries[i].bytes());
    file.commit();
  } catch (const CheckpointError&) {
    throw;
  } catch (const Error& e) {
    throw CheckpointError(e.what());
  }
}

}  // namespace autoloco
