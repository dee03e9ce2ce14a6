#include "autoloco/util/fast_hash.hpp"

#include <cstring>

namespace autoloco {
namespace {

constexpr uint64_t kPrime1 = 0x9E3779B185EBCA87ULL;
constexpr uint64_t kPrime2 = 0xC2B2AE3D27D4EB4FULL;

constexpr uint64_t rotl(uint64_t x, int r) {
  return (x << r) | (x >> (64 - r));
}

uint64_t lane(uint64_t acc, uint64_t word) {
  acc += word * kPrime2;
  acc = rotl(acc, 31);
  return acc * kPrime1;
}

uint64_t mix(uint64_t h) {
  h ^= h >> 33;
  h *= kPrime2;
  h ^= h >> 29;
  h *= kPrime1;
  return h ^ (h >> 32);
}

}  // namespace

uint64_t fast_hash64(const void* data, size_t bytes, uint64_t seed) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t acc[4] = {seed + kPrime1, seed + kPrime2, seed, seed - kPrime1};
  size_t i = 0;
  for (; i + 32 <= bytes; i += 32) {
    for (int l = 0; l < 4; ++l) {
      uint64_t w;
      std::memcpy(&w, p + i + 8 * l, 8);
      acc[l] = lane(acc[l], w);
    }
  }
  uint64_t h = rotl(acc[0], 1) + rotl(acc[1], 7) + rotl(acc[2], 12) + rotl(acc[3], 18);
  for (; i + 8 <= bytes; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = lane(h, w);
  }
  for (; i < bytes; ++i)
    h = lane(h, p[i]);
  return mix(h ^ bytes);
}

}  // namespace autoloco
