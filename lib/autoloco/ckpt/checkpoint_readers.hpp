// The files of one checkpoint, each opened once when first needed and read against the
// manifest's sums: a resume and the tools read the pieces of a sharded vector from several rank
// files (ckpt/flat_pieces.hpp).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "autoloco/ckpt/h5_file.hpp"
#include "autoloco/ckpt/manifest.hpp"

namespace autoloco {

class CheckpointReaders {
 public:
  // `manifest` must outlive this.
  CheckpointReaders(std::string path, const Manifest& manifest);

  const std::string& path() const { return path_; }
  // File `name` of the checkpoint. Throws CheckpointError when the manifest does not list it.
  const H5Reader& open(const std::string& name);
  // The rank files of dc `dc` of a checkpoint written with `members` ranks per dc.
  std::vector<const H5Reader*> dc_rank_files(int dc, int members);

 private:
  std::string path_;
  const Manifest& manifest_;
  std::map<std::string, std::unique_ptr<H5Reader>> open_;
};

}  // namespace autoloco
