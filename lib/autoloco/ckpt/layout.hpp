// The names of a checkpoint's files (docs/checkpoints.md): one directory checkpoints/step_<N>/
// with global.h5 (world rank 0: anchor, outer state, controller, counters, config), dc_<d>.h5
// (member 0 of dc d: the replica and its AdamW state), rank_<r>.h5 (every rank: data cursor,
// RNG, its own accumulators and error-feedback residual) and manifest.json, written last. With
// topology.shard, the sharded vectors (AdamW moments, anchor, outer state) are pieces of the
// rank files instead (ckpt/flat_pieces.hpp).
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string>

namespace autoloco {

// Bumped when the layout changes in a way an older reader cannot follow: the format written.
// Format 2 added the pieces (ckpt/flat_pieces.hpp) and the residuals' ranges; format 1 holds
// every vector whole, and this autoloco still reads it.
constexpr int64_t kCheckpointFormat = 2;
constexpr int64_t kOldestCheckpointFormat = 1;
inline bool readable_checkpoint_format(int64_t format) {
  return format >= kOldestCheckpointFormat && format <= kCheckpointFormat;
}

inline const char* const kManifestFile = "manifest.json";
inline const char* const kGlobalFile = "global.h5";
inline std::string dc_file(int dc) {
  return fmt::format("dc_{}.h5", dc);
}
inline std::string rank_file(int rank) {
  return fmt::format("rank_{}.h5", rank);
}
inline std::string checkpoint_name(int64_t step) {
  return fmt::format("step_{}", step);
}

}  // namespace autoloco
