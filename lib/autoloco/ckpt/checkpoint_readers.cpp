#include "autoloco/ckpt/checkpoint_readers.hpp"

#include <fmt/format.h>

#include <utility>

#include "autoloco/ckpt/layout.hpp"
#include "autoloco/util/error.hpp"

namespace autoloco {

CheckpointReaders::CheckpointReaders(std::string path, const Manifest& manifest)
    : path_(std::move(path)), manifest_(manifest) {}

const H5Reader& CheckpointReaders::open(const std::string& name) {
  auto it = open_.find(name);
  if (it != open_.end()) return *it->second;
  const ManifestFile* entry = manifest_.find(name);
  if (!entry) {
    throw CheckpointError(fmt::format("'{}': the manifest lists no file {}", path_, name));
  }
  auto reader = std::make_unique<H5Reader>(path_ + "/" + name, &entry->datasets);
  return *open_.emplace(name, std::move(reader)).first->second;
}

std::vector<const H5Reader*> CheckpointReaders::dc_rank_files(int dc, int members) {
  std::vector<const H5Reader*> files;
  for (int m = 0; m < members; ++m)
    files.push_back(&open(rank_file(dc * members + m)));
  return files;
}

}  // namespace autoloco
