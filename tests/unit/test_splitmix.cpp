// util/splitmix.hpp, the one splitmix64 of the data loader, the documents' split and the wire's
// stochastic rounding: its published outputs, so that none of their streams changes with it.
#include <catch2/catch.hpp>

#include <cstdint>

#include "autoloco/util/splitmix.hpp"

using namespace autoloco;

TEST_CASE("splitmix64 gives the reference generator's outputs", "[util]") {
  // Vigna's splitmix64.c from state 0: next() adds the increment, then mixes.
  CHECK(splitmix64_at(0, 0) == 0xe220a8397b1dcdafULL);
  CHECK(splitmix64_at(0, 1) == 0x6e789e6aa1b965f4ULL);
  CHECK(splitmix64_at(0, 2) == 0x06c45d188009454fULL);
  // Value k of a stream is the mix of its state k + 1 increments on.
  CHECK(splitmix64_at(42, 6) == splitmix64_mix(42 + 7 * kSplitmixGamma));
  static_assert(splitmix64_mix(0) == 0, "the mix fixes 0");
}
