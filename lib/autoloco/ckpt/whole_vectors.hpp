// A checkpoint's sharded vectors whole, whatever layout wrote them (docs/checkpoints.md,
// Layout): the outer state (outer/*, sync/pending_sum) lives whole in global.h5 and the AdamW
// moments and the replica in their dc's file, unless a sharded run (for the replica: a fully
// sharded one) wrote them as pieces of its rank files
// (ckpt/flat_pieces.hpp); then they are assembled here. What the tools and tests compare, so
// that checkpoints of two shard modes of one run compare equal. Error-feedback residuals are
// each rank's own and are not assembled.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "autoloco/ckpt/checkpoint_readers.hpp"
#include "autoloco/ckpt/manifest.hpp"

namespace autoloco {

// The file that holds vector `dataset` whole (written by a rank of dc `dc`), or "" for a
// dataset that no layout splits.
std::string vector_home(const std::string& dataset, int dc);

// (file, dataset) is one of the vectors as this checkpoint stores them: a whole one in its home,
// or a piece of one in a rank file, or a piece's ranges.
bool part_of_vector(const std::string& file, const std::string& dataset, const H5Reader& reader);

using WholeVectors = std::map<std::pair<std::string, std::string>, std::vector<float>>;

// Every such vector of the checkpoint, whole: (home file, dataset) -> values. Throws
// CheckpointError when the pieces of one leave an element out.
WholeVectors whole_vectors(CheckpointReaders& files, const Manifest& manifest);

}  // namespace autoloco
