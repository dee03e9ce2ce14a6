// Streaming decompression with zlib (gzip) and libzstd, both the system's.
#include "autoloco/data/compressed_input.hpp"

#include <fmt/format.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "autoloco/util/error.hpp"

namespace autoloco {
namespace {

constexpr size_t kBufferBytes = size_t{1} << 20;
constexpr unsigned char kGzipMagic[] = {0x1f, 0x8b};
constexpr unsigned char kZstdMagic[] = {0x28, 0xb5, 0x2f, 0xfd};

}  // namespace

struct CompressedInput::Decoder {
  z_stream gzip{};
  bool gzip_ready = false;
  ZSTD_DCtx* zstd = nullptr;
  ~Decoder() {
    if (gzip_ready) inflateEnd(&gzip);
    if (zstd != nullptr) ZSTD_freeDCtx(zstd);
  }
};

const char* compression_name(Compression compression) {
  switch (compression) {
    case Compression::gzip:
      return "gzip";
    case Compression::zstd:
      return "zstd";
    case Compression::none:
      break;
  }
  return "none";
}

Compression detect_compression(const unsigned char* head, size_t size) {
  if (size >= sizeof(kGzipMagic) && std::memcmp(head, kGzipMagic, sizeof(kGzipMagic)) == 0) {
    return Compression::gzip;
  }
  if (size >= sizeof(kZstdMagic) && std::memcmp(head, kZstdMagic, sizeof(kZstdMagic)) == 0) {
    return Compression::zstd;
  }
  return Compression::none;
}

CompressedInput::CompressedInput(const std::string& path)
    : path_(path), in_(path, std::ios::binary), buffer_(kBufferBytes) {
  if (!in_) {
    throw DataError(fmt::format("cannot read input '{}': {}; check the path and permissions", path,
                                std::strerror(errno)));
  }
  refill();
  compression_ = detect_compression(reinterpret_cast<const unsigned char*>(buffer_.data()), end_);
  decoder_ = std::make_unique<Decoder>();
  if (compression_ == Compression::gzip) {
    // 16 + MAX_WBITS: a gzip header and trailer (CRC-32 and length checked), nothing else.
    if (inflateInit2(&decoder_->gzip, 16 + MAX_WBITS) != Z_OK) {
      throw DataError(fmt::format("cannot start zlib for '{}': out of memory?", path));
    }
    decoder_->gzip_ready = true;
  } else if (compression_ == Compression::zstd) {
    decoder_->zstd = ZSTD_createDCtx();
    if (decoder_->zstd == nullptr) {
      throw DataError(fmt::format("cannot start zstd for '{}': out of memory?", path));
    }
  }
}

CompressedInput::~CompressedInput() = default;

bool CompressedInput::refill() {
  if (eof_) return false;
  in_.read(buffer_.data(), static_cast<std::streamsize>(buffer_.size()));
  if (in_.bad()) {
    throw DataError(
        fmt::format("cannot read input '{}': {}; check the disk", path_, std::strerror(errno)));
  }
  pos_ = 0;
  end_ = static_cast<size_t>(in_.gcount());
  if (!in_) eof_ = true;
  return end_ > 0;
}

void CompressedInput::corrupt(const std::string& what) const {
  throw DataError(fmt::format(
      "input '{}' is not a valid {} stream: {} (near compressed byte {}); the file is damaged "
      "or was cut short: download or copy it again",
      path_, compression_name(compression_), what, consumed_));
}

size_t CompressedInput::read(char* out, size_t size) {
  if (size == 0) return 0;
  if (compression_ == Compression::gzip) return read_gzip(out, size);
  if (compression_ == Compression::zstd) return read_zstd(out, size);
  size_t done = 0;
  while (done < size && (pos_ < end_ || refill())) {
    const size_t n = std::min(size - done, end_ - pos_);
    std::memcpy(out + done, buffer_.data() + pos_, n);
    pos_ += n;
    consumed_ += n;
    done += n;
  }
  return done;
}

size_t CompressedInput::read_gzip(char* out, size_t size) {
  z_stream& z = decoder_->gzip;
  z.next_out = reinterpret_cast<Bytef*>(out);
  z.avail_out = static_cast<uInt>(std::min<size_t>(size, UINT32_MAX));
  const uInt wanted = z.avail_out;
  while (z.avail_out > 0) {
    const bool have_input = pos_ < end_ || refill();
    if (!have_input && !in_frame_) break;  // the end, between members
    if (!in_frame_) {
      inflateReset(&z);
      in_frame_ = true;
    }
    z.next_in = reinterpret_cast<Bytef*>(buffer_.data() + pos_);
    z.avail_in = static_cast<uInt>(end_ - pos_);
    const uInt out_before = z.avail_out;
    const int rc = inflate(&z, Z_NO_FLUSH);
    const size_t used = (end_ - pos_) - z.avail_in;
    pos_ += used;
    consumed_ += used;
    if (rc == Z_STREAM_END) {
      in_frame_ = false;
    } else if (rc == Z_BUF_ERROR || (rc == Z_OK && used == 0 && z.avail_out == out_before)) {
      // No progress: inflate needs input that the file does not have.
      corrupt(have_input ? "inflate made no progress"
                         : "the stream ends inside a member (truncated)");
    } else if (rc != Z_OK) {
      corrupt(z.msg != nullptr ? z.msg : fmt::format("zlib error {}", rc));
    }
  }
  return wanted - z.avail_out;
}

size_t CompressedInput::read_zstd(char* out, size_t size) {
  ZSTD_outBuffer output{out, size, 0};
  while (output.pos < output.size) {
    const bool have_input = pos_ < end_ || refill();
    if (!have_input && !in_frame_) break;
    ZSTD_inBuffer input{buffer_.data() + pos_, end_ - pos_, 0};
    const size_t out_before = output.pos;
    const size_t rc = ZSTD_decompressStream(decoder_->zstd, &output, &input);
    pos_ += input.pos;
    consumed_ += input.pos;
    if (ZSTD_isError(rc) != 0U) corrupt(ZSTD_getErrorName(rc));
    in_frame_ = rc != 0;  // 0: a frame ended and everything of it was written out
    if (!have_input && in_frame_ && output.pos == out_before) {
      corrupt("the stream ends inside a frame (truncated)");
    }
  }
  return output.pos;
}

}  // namespace autoloco
