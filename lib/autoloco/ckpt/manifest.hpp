// manifest.json: the last file of a checkpoint. It lists every file with its size and every
// dataset with its byte count and CRC-32; a checkpoint without one, or whose files disagree with
// it, is incomplete or damaged and is never used.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "autoloco/ckpt/h5_file.hpp"

namespace autoloco {

struct ManifestFile {
  std::string name;  // relative to the checkpoint directory
  int64_t size = 0;  // bytes on disk
  DatasetSums datasets;

  std::string to_json() const;
};

struct Manifest {
  int64_t format_version = 0;
  int64_t step = 0;
  int64_t round = 0;
  std::string reason;   // every_steps, every_minutes, signal, end
  std::string created;  // UTC, ISO 8601
  std::vector<ManifestFile> files;

  // The entry of `name`, or nullptr.
  const ManifestFile* find(const std::string& name) const;
  int64_t total_bytes() const;
  std::string to_json() const;
};

// Parses manifest JSON (or one ManifestFile's JSON). Throws CheckpointError naming `origin`,
// also for a file name that is not a plain name in the checkpoint's directory (empty, ".",
// "..", or with a '/'), a file listed twice, or a negative size.
Manifest parse_manifest(const std::string& text, const std::string& origin);
ManifestFile parse_manifest_file(const std::string& text, const std::string& origin);

// Reads <dir>/manifest.json. Throws CheckpointError when it is missing or unreadable.
Manifest read_manifest(const std::string& dir);

// Writes <dir>/manifest.json through a temporary file, flushed, then renamed.
void write_manifest(const std::string& dir, const Manifest& manifest);

// The current time as "2026-11-30T09:41:07Z".
std::string utc_now();

}  // namespace autoloco
