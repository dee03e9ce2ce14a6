// SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104): the elastic mode's state hashes (the same
// anchor gives the same digest on every dc) and the proof that a lighthouse client holds the
// shared key. Written here from the standards; checked against their published test vectors.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace autoloco {

using Digest = std::array<uint8_t, 32>;

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t bytes);
  void update(std::string_view s) { update(s.data(), s.size()); }
  // The digest of everything updated so far; the hash must not be updated after it.
  Digest finish();

 private:
  void block(const uint8_t* p);

  std::array<uint32_t, 8> h_;
  std::array<uint8_t, 64> buffer_{};
  size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
};

Digest sha256(const void* data, size_t bytes);
inline Digest sha256(std::string_view s) {
  return sha256(s.data(), s.size());
}
Digest hmac_sha256(std::string_view key, std::string_view message);

// Lower-case hexadecimal, two digits per byte.
std::string to_hex(const uint8_t* data, size_t bytes);
inline std::string to_hex(const Digest& d) {
  return to_hex(d.data(), d.size());
}

// Compares in time that does not depend on where the strings first differ, so that a client
// guessing a MAC learns nothing from the lighthouse's response time.
bool equal_in_constant_time(std::string_view a, std::string_view b);

}  // namespace autoloco
