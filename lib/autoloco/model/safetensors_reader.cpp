// SafetensorsReader: opens a .safetensors file, checks its header before trusting any of it, and
// reads tensors' bytes with pread (no mapping: a file that shrinks under a mapping would kill the
// process with SIGBUS, a short pread is an error that names the file).
#include "autoloco/model/safetensors_reader.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "autoloco/util/error.hpp"

namespace autoloco {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "safetensors data is little-endian and is read as stored");

// Reads exactly `size` bytes at `offset`; false when the file ends first.
bool pread_all(int fd, void* out, uint64_t size, uint64_t offset) {
  auto* bytes = static_cast<char*>(out);
  while (size > 0) {
    const ssize_t n = ::pread(fd, bytes, size, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes += n;
    size -= static_cast<uint64_t>(n);
    offset += static_cast<uint64_t>(n);
  }
  return true;
}

CheckpointError damaged(const std::string& path, const std::string& what) {
  return CheckpointError(
      fmt::format("'{}': {}: the file is damaged or not a safetensors file", path, what));
}

}  // namespace

SafetensorsReader::SafetensorsReader(std::string path) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) {
    throw CheckpointError(
        fmt::format("cannot open safetensors file '{}': {}", path_, std::strerror(errno)));
  }
  // From here on the destructor does not run: close the file on every error.
  try {
    struct stat st {};
    if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
      throw CheckpointError(fmt::format("'{}' is not a plain file", path_));
    }
    const auto size = static_cast<uint64_t>(st.st_size);
    unsigned char length_bytes[8] = {};
    if (size < 8 || !pread_all(fd_, length_bytes, 8, 0)) {
      throw damaged(path_,
                    fmt::format("it is {} bytes, too short for the 8-byte header length", size));
    }
    uint64_t length = 0;
    for (int i = 7; i >= 0; --i)
      length = (length << 8) | length_bytes[i];
    if (length > kSafetensorsMaxHeaderBytes) {
      throw damaged(path_, fmt::format("its header length {} is over the limit of {} bytes", length,
                                       kSafetensorsMaxHeaderBytes));
    }
    if (length > size - 8) {
      throw damaged(path_, fmt::format("its header of {} bytes runs past the end of the file "
                                       "({} bytes)",
                                       length, size));
    }
    std::string json(length, '\0');
    if (!pread_all(fd_, json.data(), length, 8)) {
      throw damaged(path_, "it ended while its header was read");
    }
    data_start_ = 8 + length;
    header_ = parse_safetensors_header(json, size - data_start_, path_);
  } catch (...) {
    ::close(fd_);
    throw;
  }
  for (size_t i = 0; i < header_.entries.size(); ++i)
    index_.emplace(header_.entries[i].name, i);
}

SafetensorsReader::~SafetensorsReader() {
  if (fd_ >= 0) ::close(fd_);
}

SafetensorsReader::SafetensorsReader(SafetensorsReader&& other) noexcept
    : path_(std::move(other.path_)),
      fd_(std::exchange(other.fd_, -1)),
      data_start_(other.data_start_),
      header_(std::move(other.header_)),
      index_(std::move(other.index_)) {}

const SafetensorsEntry* SafetensorsReader::find(const std::string& name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &header_.entries[it->second];
}

const SafetensorsEntry& SafetensorsReader::entry(const std::string& name) const {
  const SafetensorsEntry* e = find(name);
  if (e == nullptr) {
    throw CheckpointError(fmt::format("'{}' has no tensor '{}' ({} tensors in the file)", path_,
                                      name, header_.entries.size()));
  }
  return *e;
}

void SafetensorsReader::read_bytes(const SafetensorsEntry& entry, void* out) const {
  errno = 0;
  if (!pread_all(fd_, out, entry.bytes(), data_start_ + entry.begin)) {
    throw CheckpointError(fmt::format(
        "cannot read tensor '{}' (bytes {} to {}) of '{}': {}: the file was shortened or "
        "changed after it was opened",
        entry.name, entry.begin, entry.end, path_, errno != 0 ? std::strerror(errno) : "EOF"));
  }
}

}  // namespace autoloco
