// A fast 64-bit hash of a buffer, for the elastic mode's state hashes (the anchor and the outer
// state, every round, on every dc): four independent multiply-mix lanes over 8-byte words run
// at memory speed where SHA-256 would take seconds per GB. Not for adversaries: it tells copies
// that drifted apart, which is all the state check needs (the key protects the membership).
#pragma once

#include <cstddef>
#include <cstdint>

namespace autoloco {

uint64_t fast_hash64(const void* data, size_t bytes, uint64_t seed = 0);

}  // namespace autoloco
