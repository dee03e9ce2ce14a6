// Token shard writer and memory-mapped reader (format in shard.hpp).
#include "autoloco/data/shard.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <utility>

#include "autoloco/util/durable_file.hpp"
#include "autoloco/util/error.hpp"

namespace autoloco {
namespace {

constexpr const char* kRerun = "truncated or corrupted: re-run autoloco-prepare";

// Explicit little-endian encoding keeps the files portable whatever the host byte order.
void put_le(unsigned char* out, uint32_t value, uint64_t bytes) {
  for (uint64_t b = 0; b < bytes; ++b)
    out[b] = static_cast<unsigned char>(value >> (8 * b));
}

uint32_t get_le(const unsigned char* in, uint64_t bytes) {
  uint32_t value = 0;
  for (uint64_t b = 0; b < bytes; ++b)
    value |= static_cast<uint32_t>(in[b]) << (8 * b);
  return value;
}

std::string errno_text() {
  return std::strerror(errno);
}

// Removes the temporary file unless the write reached the rename.
struct TmpFile {
  std::string path;
  FILE* file = nullptr;
  bool keep = false;
  ~TmpFile() {
    if (file != nullptr) std::fclose(file);
    if (!keep) std::remove(path.c_str());
  }
};

void write_bytes(TmpFile& tmp, const std::string& path, const unsigned char* data, size_t n) {
  if (std::fwrite(data, 1, n, tmp.file) != n) {
    throw DataError(
        fmt::format("cannot write token shard '{}': {}; check free disk space and "
                    "permissions",
                    path, errno_text()));
  }
}

void check_tokens_fit(const std::string& path, const std::vector<uint32_t>& tokens,
                      TokenWidth width) {
  if (tokens.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    throw DataError(
        fmt::format("token shard '{}': {} tokens do not fit the int32 count of the "
                    "header; write smaller shards (--shard-tokens)",
                    path, tokens.size()));
  }
  if (width != TokenWidth::u16) return;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] > std::numeric_limits<uint16_t>::max()) {
      throw DataError(
          fmt::format("token shard '{}': token {} at position {} does not fit "
                      "uint16; write it with TokenWidth::u32",
                      path, tokens[i], i));
    }
  }
}

std::vector<unsigned char> encode_header(uint64_t count, TokenWidth width) {
  std::vector<unsigned char> header(kShardHeaderBytes, 0);
  const bool u16 = width == TokenWidth::u16;
  put_le(header.data() + 0, static_cast<uint32_t>(u16 ? kShardMagicU16 : kShardMagicU32), 4);
  put_le(header.data() + 4, static_cast<uint32_t>(u16 ? kShardVersionU16 : kShardVersionU32), 4);
  put_le(header.data() + 8, static_cast<uint32_t>(count), 4);
  return header;
}

}  // namespace

void write_shard(const std::string& path, const std::vector<uint32_t>& tokens, TokenWidth width) {
  check_tokens_fit(path, tokens, width);
  TmpFile tmp{path + ".tmp"};
  tmp.file = std::fopen(tmp.path.c_str(), "wb");
  if (tmp.file == nullptr) {
    throw DataError(
        fmt::format("cannot create token shard '{}': {}; check that the directory "
                    "exists and is writable",
                    tmp.path, errno_text()));
  }
  const std::vector<unsigned char> header = encode_header(tokens.size(), width);
  write_bytes(tmp, path, header.data(), header.size());

  // Encode in chunks so a large shard does not need a second full-size buffer.
  const uint64_t bytes = token_bytes(width);
  constexpr size_t kChunk = 1 << 16;
  std::vector<unsigned char> buffer(kChunk * bytes);
  for (size_t begin = 0; begin < tokens.size(); begin += kChunk) {
    const size_t n = std::min(kChunk, tokens.size() - begin);
    for (size_t i = 0; i < n; ++i)
      put_le(buffer.data() + i * bytes, tokens[begin + i], bytes);
    write_bytes(tmp, path, buffer.data(), n * bytes);
  }
  // Data must be on disk before the rename makes it visible under the real name.
  const bool flushed = std::fflush(tmp.file) == 0 && ::fsync(::fileno(tmp.file)) == 0;
  const bool closed = std::fclose(tmp.file) == 0;
  tmp.file = nullptr;
  if (!flushed || !closed) {
    throw DataError(fmt::format("cannot write token shard '{}': {}; check free disk space", path,
                                errno_text()));
  }
  // The rename and the directory entry it changed reach the disk before the shard counts as
  // written: a power cut after a rename alone can leave the name pointing nowhere.
  try {
    rename_durable(tmp.path, path);
  } catch (const Error& e) {
    throw DataError(fmt::format("cannot write token shard '{}': {}", path, e.what()));
  }
  tmp.keep = true;
}

namespace {

// Owns a file descriptor only for the duration of Shard's constructor.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

TokenWidth width_from_header(const std::string& path, int32_t magic, int32_t version) {
  if (magic != kShardMagicU16 && magic != kShardMagicU32) {
    throw DataError(
        fmt::format("token shard '{}': bad magic {} (expected {} or {}); not a "
                    "token shard, or {}",
                    path, magic, kShardMagicU16, kShardMagicU32, kRerun));
  }
  const bool u16 = magic == kShardMagicU16;
  const int32_t expected = u16 ? kShardVersionU16 : kShardVersionU32;
  if (version != expected) {
    throw DataError(
        fmt::format("token shard '{}': version {} does not match magic {} (expected "
                    "version {}); {}",
                    path, version, magic, expected, kRerun));
  }
  return u16 ? TokenWidth::u16 : TokenWidth::u32;
}

}  // namespace

Shard::Shard(const std::string& path) : path_(path) {
  Fd file{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (file.fd < 0) {
    throw DataError(
        fmt::format("cannot open token shard '{}': {}; check the data paths or "
                    "create shards with autoloco-prepare",
                    path, errno_text()));
  }
  struct stat info {};
  if (::fstat(file.fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    throw DataError(
        fmt::format("token shard '{}' is not a regular file; point the data paths "
                    "at shard files made by autoloco-prepare",
                    path));
  }
  const auto file_bytes = static_cast<uint64_t>(info.st_size);
  if (file_bytes < kShardHeaderBytes) {
    throw DataError(fmt::format("token shard '{}' has {} bytes, fewer than the {}-byte header; {}",
                                path, file_bytes, kShardHeaderBytes, kRerun));
  }
  void* map = ::mmap(nullptr, file_bytes, PROT_READ, MAP_PRIVATE, file.fd, 0);
  if (map == MAP_FAILED) {
    throw DataError(fmt::format("cannot memory-map token shard '{}': {}", path, errno_text()));
  }
  map_ = static_cast<const unsigned char*>(map);
  map_bytes_ = file_bytes;
  try {
    const auto magic = static_cast<int32_t>(get_le(map_ + 0, 4));
    const auto version = static_cast<int32_t>(get_le(map_ + 4, 4));
    const auto count = static_cast<int32_t>(get_le(map_ + 8, 4));
    width_ = width_from_header(path, magic, version);
    if (count < 0) {
      throw DataError(
          fmt::format("token shard '{}': negative token count {}; {}", path, count, kRerun));
    }
    count_ = static_cast<uint64_t>(count);
    const uint64_t expected = kShardHeaderBytes + count_ * token_bytes(width_);
    if (file_bytes != expected) {
      throw DataError(fmt::format(
          "token shard '{}' has {} bytes but its header promises {} "
          "({} tokens of {} bytes after the {}-byte header); {}",
          path, file_bytes, expected, count_, token_bytes(width_), kShardHeaderBytes, kRerun));
    }
  } catch (...) {
    release();
    throw;
  }
}

Shard::~Shard() {
  release();
}

Shard::Shard(Shard&& other) noexcept
    : path_(std::move(other.path_)),
      map_(std::exchange(other.map_, nullptr)),
      map_bytes_(std::exchange(other.map_bytes_, 0)),
      count_(std::exchange(other.count_, 0)),
      width_(other.width_) {}

Shard& Shard::operator=(Shard&& other) noexcept {
  if (this != &other) {
    release();
    path_ = std::move(other.path_);
    map_ = std::exchange(other.map_, nullptr);
    map_bytes_ = std::exchange(other.map_bytes_, 0);
    count_ = std::exchange(other.count_, 0);
    width_ = other.width_;
  }
  return *this;
}

void Shard::release() noexcept {
  if (map_ != nullptr) ::munmap(const_cast<unsigned char*>(map_), map_bytes_);
  map_ = nullptr;
  map_bytes_ = 0;
}

uint32_t Shard::load(uint64_t i) const {
  const uint64_t bytes = token_bytes(width_);
  return get_le(map_ + kShardHeaderBytes + i * bytes, bytes);
}

uint32_t Shard::token(uint64_t i) const {
  if (i >= count_) {
    throw std::out_of_range(fmt::format("token {} of shard '{}' with {} tokens", i, path_, count_));
  }
  return load(i);
}

void Shard::copy_tokens(uint64_t start, int64_t n, int64_t* out) const {
  if (n < 0 || start > count_ || static_cast<uint64_t>(n) > count_ - start) {
    throw std::out_of_range(fmt::format("tokens [{}, {} + {}) of shard '{}' with {} tokens", start,
                                        start, n, path_, count_));
  }
  // Branch on the width once, outside the loop: this is the data loader's hot path.
  const unsigned char* base = map_ + kShardHeaderBytes;
  const auto count = static_cast<uint64_t>(n);
  if (width_ == TokenWidth::u16) {
    for (uint64_t i = 0; i < count; ++i)
      out[i] = get_le(base + (start + i) * 2, 2);
  } else {
    for (uint64_t i = 0; i < count; ++i)
      out[i] = get_le(base + (start + i) * 4, 4);
  }
}

uint32_t Shard::max_token() const {
  uint32_t best = 0;
  for (uint64_t i = 0; i < count_; ++i)
    best = std::max(best, load(i));
  return best;
}

}  // namespace autoloco
