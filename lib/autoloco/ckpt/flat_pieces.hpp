// A flat fp32 vector of a checkpoint (the anchor, an optimizer moment, a residual: laid out as
// the parameters' flat buffer) stored whole in one file or in pieces over several
// (docs/checkpoints.md, Layout). A piece is a dataset NAME of the values of some ranges of the
// vector, one after the other, and beside it NAME_ranges: their (offset, length) pairs. A
// sharded run writes each member's shard as a piece of its own rank file, in parallel; a reader
// assembles any ranges from whatever pieces a checkpoint has, so a checkpoint written with one
// shard mode and ranks_per_dc resumes with any other, and the tools read every layout.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "autoloco/ckpt/h5_file.hpp"
#include "autoloco/util/flat_range.hpp"

namespace autoloco {

// The dataset beside a piece's values that lists its ranges.
std::string piece_ranges_name(const std::string& name);

// Writes `values` (the elements of `ranges` one after the other) as a piece of NAME.
void write_flat_piece(H5Writer& w, const std::string& name, const float* values,
                      const std::vector<FlatRange>& ranges);

// The reader of one vector: its pieces in the files added, and any ranges of it assembled.
class FlatPieces {
 public:
  // `name` of a vector of `numel` elements.
  FlatPieces(std::string name, int64_t numel);

  // A file that may hold the vector or pieces of it (not owned; it must outlive this). Where the
  // file has NAME without NAME_ranges, its values cover `implied` (the whole vector in a file that
  // holds it whole; a rank's own shard in a checkpoint from before pieces).
  void add(const H5Reader& file, const std::vector<FlatRange>& implied);
  void add_whole(const H5Reader& file) { add(file, {FlatRange{0, numel_}}); }

  // Some file holds the vector or a piece of it.
  bool found() const { return !pieces_.empty(); }
  const std::string& name() const { return name_; }
  int64_t numel() const { return numel_; }
  // Where the last element any piece holds ends.
  int64_t extent() const;

  // Writes the elements of every range of `want` into `out`, element i at out[i - origin] (the
  // vector laid out whole from element `origin` on; the rest is left as it is), reading only the
  // pieces that overlap them. Throws CheckpointError naming the vector and the first element no
  // piece holds.
  void read_into(float* out, const std::vector<FlatRange>& want, int64_t origin = 0) const;

 private:
  struct Piece {
    const H5Reader* file = nullptr;
    std::vector<FlatRange> ranges;
    int64_t count = 0;  // the values' length
  };
  std::string name_;
  int64_t numel_ = 0;
  std::vector<Piece> pieces_;
};

}  // namespace autoloco
