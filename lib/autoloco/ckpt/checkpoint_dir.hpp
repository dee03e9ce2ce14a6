// The checkpoints/ directory of a run: finding checkpoints and telling complete ones from
// incomplete or damaged ones, committing a new one with one rename, and pruning old ones.
// Names: step_<N> (complete once its manifest is in), .tmp-step_<N> (being written, or left by
// a job that died while writing: never read), rejected-step_<N> and superseded-step_<N> (set
// aside by a resume, never deleted).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "autoloco/ckpt/manifest.hpp"

namespace autoloco {

struct CheckpointInfo {
  std::string path;
  int64_t step = 0;
  std::optional<Manifest> manifest;  // empty when it could not be read
  std::string problem;               // empty when the quick check passed
  bool ok() const { return problem.empty(); }
};

// Every step_<N> directory under `dir`, newest (largest N) first, each with the quick check:
// the manifest reads, its format is known, and every file it lists exists with its size.
// A missing `dir` gives an empty list.
std::vector<CheckpointInfo> list_checkpoints(const std::string& dir);

// The quick check of one checkpoint directory (see list_checkpoints).
CheckpointInfo inspect_checkpoint(const std::string& path);

// The full check: the quick one, then every dataset of every file read back and compared with
// the manifest's CRC-32. Returns the problem found, or an empty string.
std::string verify_checkpoint(const std::string& path);

// A temporary directory for the checkpoint of `step` (an old one of that name is removed).
std::string begin_checkpoint(const std::string& dir, int64_t step);

// Renames the temporary directory to step_<N> (replacing an existing step_<N>, which can only
// hold the same state) and flushes the directory. Returns the final path.
std::string commit_checkpoint(const std::string& dir, const std::string& tmp, int64_t step);

// Keeps the newest `keep_last` complete checkpoints, never `protect`, and removes older ones and
// temporary directories left by dead jobs. Returns the removed paths.
std::vector<std::string> prune_checkpoints(const std::string& dir, int64_t keep_last,
                                           const std::string& protect);

// Renames a checkpoint to <prefix>-step_<N> (with a numeric suffix if taken), so a resume never
// sees it again and nothing is deleted. Returns the new path.
std::string set_aside_checkpoint(const std::string& path, const std::string& prefix);

}  // namespace autoloco
