#include "autoloco/util/crc32.hpp"

#include <zlib.h>

#include <algorithm>

namespace autoloco {

uint32_t crc32(const void* data, size_t bytes, uint32_t crc) {
  // zlib takes uInt lengths: feed buffers over 4 GiB in pieces.
  constexpr size_t kPiece = size_t{1} << 30;
  const auto* p = static_cast<const Bytef*>(data);
  uLong c = crc;
  while (bytes > 0) {
    const size_t n = std::min(bytes, kPiece);
    c = ::crc32(c, p, static_cast<uInt>(n));
    p += n;
    bytes -= n;
  }
  return static_cast<uint32_t>(c);
}

}  // namespace autoloco
