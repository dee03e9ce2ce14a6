// A run of consecutive elements of a flat buffer (the parameters' flat buffer, or a vector laid
// out as it): what fragments, shards and checkpoint pieces are made of.
#pragma once

#include <cstdint>

namespace autoloco {

struct FlatRange {
  int64_t offset = 0;
  int64_t numel = 0;

  int64_t end() const { return offset + numel; }
};

}  // namespace autoloco
