// splitmix64 (Steele, Lea, Flood, "Fast splittable pseudorandom number generators", OOPSLA
// 2014), the one hash of the counter-based random streams: the data loader's draws, the
// documents' train/val split and stochastic rounding on the wire. Value k of a stream is the
// output mix of its state plus k + 1 steps of the Weyl sequence; any value is computed alone,
// with no state carried from the one before.
#pragma once

#include <cstdint>

namespace autoloco {

// The Weyl sequence's increment: 2^64 / φ, odd.
constexpr uint64_t kSplitmixGamma = 0x9e3779b97f4a7c15ULL;

// splitmix64's output function: a bijection of 64-bit words, so distinct inputs never collide.
constexpr uint64_t splitmix64_mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Value `index` of the stream whose state is `state`.
constexpr uint64_t splitmix64_at(uint64_t state, uint64_t index) {
  return splitmix64_mix(state + kSplitmixGamma * (index + 1));
}

}  // namespace autoloco
