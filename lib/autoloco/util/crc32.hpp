// CRC-32 (the zlib/PNG polynomial) of a buffer: the checksum a checkpoint's manifest keeps for
// every dataset it lists.
#pragma once

#include <cstddef>
#include <cstdint>

namespace autoloco {

// Continues `crc` over `bytes` bytes of `data` (start with 0).
uint32_t crc32(const void* data, size_t bytes, uint32_t crc = 0);

}  // namespace autoloco
