// How the inter-dc collectives cut a payload among G ranks: G chunks of ceil(count / G)
// values, the last ones shorter or empty. Every rank computes every chunk alike.
#pragma once

#include <algorithm>
#include <cstddef>

namespace autoloco {

struct Chunk {
  size_t begin = 0;
  size_t count = 0;
};

// Chunk c of `count` values cut into `parts`.
inline Chunk chunk_of(size_t c, size_t count, size_t parts) {
  const size_t per = (count + parts - 1) / parts;
  const size_t begin = std::min(count, c * per);
  return {begin, std::min(count, begin + per) - begin};
}

}  // namespace autoloco
