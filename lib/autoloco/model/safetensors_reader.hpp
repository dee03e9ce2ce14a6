// One .safetensors file opened for reading, without LibTorch: its header is read and checked
// completely on open (safetensors_format.hpp), its tensors are listed without touching their
// data, and one tensor's bytes are read on request. The LibTorch side is safetensors.hpp.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "autoloco/model/safetensors_format.hpp"

namespace autoloco {

class SafetensorsReader {
 public:
  // Opens `path` and checks its header. Throws CheckpointError naming the file (missing, not a
  // plain file, shorter than the header it announces, or a header that fails a check).
  explicit SafetensorsReader(std::string path);
  ~SafetensorsReader();
  SafetensorsReader(SafetensorsReader&& other) noexcept;
  SafetensorsReader& operator=(SafetensorsReader&&) = delete;
  SafetensorsReader(const SafetensorsReader&) = delete;
  SafetensorsReader& operator=(const SafetensorsReader&) = delete;

  const std::string& path() const { return path_; }
  // The tensors in the order of their data (the order they were written in).
  const std::vector<SafetensorsEntry>& entries() const { return header_.entries; }
  const std::map<std::string, std::string>& metadata() const { return header_.metadata; }
  // The tensor named `name`, or nullptr.
  const SafetensorsEntry* find(const std::string& name) const;
  // The tensor named `name`; throws CheckpointError naming the file and the tensor when absent.
  const SafetensorsEntry& entry(const std::string& name) const;

  // Copies the tensor's bytes (little-endian, as stored) into `out`, which holds entry.bytes().
  // `entry` is one of entries(). Safe to call from several threads at once. Throws
  // CheckpointError naming the file and tensor when the file has shrunk or cannot be read.
  void read_bytes(const SafetensorsEntry& entry, void* out) const;

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t data_start_ = 0;  // 8 + the header's length
  SafetensorsHeader header_;
  std::map<std::string, size_t> index_;  // name -> position in header_.entries
};

}  // namespace autoloco
