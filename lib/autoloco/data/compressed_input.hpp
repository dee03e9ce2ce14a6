// A file's bytes, decompressed as they are read: plain, gzip (one member or several, as `cat
// a.gz b.gz` makes) or zstd (one frame or several), told apart by the stream's first bytes,
// not by the file's name. Memory stays at the two buffers whatever the file's size. A corrupt
// or truncated stream is a DataError naming the file and the compressed offset.
#pragma once

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

namespace autoloco {

enum class Compression { none, gzip, zstd };

const char* compression_name(Compression compression);

// The compression of a stream that starts with `head` (at least 4 bytes, or the whole file).
Compression detect_compression(const unsigned char* head, size_t size);

class CompressedInput {
 public:
  // Opens `path`; throws DataError when it cannot be read.
  explicit CompressedInput(const std::string& path);
  ~CompressedInput();
  CompressedInput(const CompressedInput&) = delete;
  CompressedInput& operator=(const CompressedInput&) = delete;

  // Fills `out` with up to `size` decompressed bytes; returns how many, 0 at the end of the
  // stream. Throws DataError for a corrupt or truncated stream.
  size_t read(char* out, size_t size);

  Compression compression() const { return compression_; }
  const std::string& path() const { return path_; }
  // Compressed bytes consumed so far: where a message says the damage is.
  uint64_t compressed_offset() const { return consumed_; }

 private:
  struct Decoder;
  bool refill();
  size_t read_gzip(char* out, size_t size);
  size_t read_zstd(char* out, size_t size);
  [[noreturn]] void corrupt(const std::string& what) const;

  std::string path_;
  std::ifstream in_;
  Compression compression_ = Compression::none;
  std::vector<char> buffer_;  // compressed bytes read ahead
  size_t pos_ = 0;            // next unread byte of buffer_
  size_t end_ = 0;            // bytes valid in buffer_
  bool eof_ = false;          // the file has no more bytes
  bool in_frame_ = false;     // inside a gzip member or zstd frame not yet finished
  uint64_t consumed_ = 0;
  std::unique_ptr<Decoder> decoder_;
};

}  // namespace autoloco
