#include "autoloco/ckpt/flat_pieces.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "autoloco/util/error.hpp"

namespace autoloco {

std::string piece_ranges_name(const std::string& name) {
  return name + "_ranges";
}

void write_flat_piece(H5Writer& w, const std::string& name, const float* values,
                      const std::vector<FlatRange>& ranges) {
  std::vector<int64_t> pairs;
  int64_t count = 0;
  for (const FlatRange& r : ranges) {
    pairs.push_back(r.offset);
    pairs.push_back(r.numel);
    count += r.numel;
  }
  w.write(name, values, {count});
  w.write(piece_ranges_name(name), pairs.data(), {static_cast<int64_t>(ranges.size()), 2});
}

FlatPieces::FlatPieces(std::string name, int64_t numel) : name_(std::move(name)), numel_(numel) {}

namespace {

// The (offset, length) pairs of a piece, each inside the vector: a damaged list is refused
// before any value is read.
std::vector<FlatRange> read_ranges(const H5Reader& file, const std::string& dataset,
                                   int64_t numel) {
  const std::vector<int64_t> pairs = file.read_i64(dataset);
  if (pairs.size() % 2 != 0) {
    throw CheckpointError(fmt::format(
        "'{}': {} holds {} values, not (offset, length) pairs: the file is damaged; use another "
        "checkpoint",
        file.path(), dataset, pairs.size()));
  }
  std::vector<FlatRange> ranges;
  for (size_t i = 0; i < pairs.size(); i += 2) {
    const FlatRange r{pairs[i], pairs[i + 1]};
    if (r.offset < 0 || r.numel < 0 || r.offset > numel || r.numel > numel - r.offset) {
      throw CheckpointError(fmt::format(
          "'{}': {} names elements [{}, +{}) of a vector of {}: the file is damaged; use another "
          "checkpoint",
          file.path(), dataset, r.offset, r.numel, numel));
    }
    ranges.push_back(r);
  }
  return ranges;
}

int64_t total(const std::vector<FlatRange>& ranges) {
  int64_t n = 0;
  for (const FlatRange& r : ranges)
    n += r.numel;
  return n;
}

}  // namespace

void FlatPieces::add(const H5Reader& file, const std::vector<FlatRange>& implied) {
  Piece piece;
  piece.file = &file;
  const std::string ranges = piece_ranges_name(name_);
  if (file.has(ranges)) {
    piece.ranges = read_ranges(file, ranges, numel_);
  } else if (file.has(name_)) {
    piece.ranges = implied;
  } else {
    return;
  }
  piece.count = total(piece.ranges);
  // Checked before anything is allocated for it: the length the file holds (bounded by its size)
  // is the ranges' total, so damaged ranges cannot ask for more than the file has.
  const int64_t stored = file.numel(name_);
  if (stored != piece.count) {
    throw CheckpointError(fmt::format(
        "'{}': {} holds {} values where its ranges name {}: the file is damaged; use another "
        "checkpoint",
        file.path(), name_, stored, piece.count));
  }
  pieces_.push_back(std::move(piece));
}

int64_t FlatPieces::extent() const {
  int64_t end = 0;
  for (const Piece& piece : pieces_) {
    for (const FlatRange& r : piece.ranges)
      end = std::max(end, r.end());
  }
  return end;
}

void FlatPieces::read_into(float* out, const std::vector<FlatRange>& want, int64_t origin) const {
  // What the pieces put in place, to find an element none holds.
  std::vector<FlatRange> covered;
  std::vector<float> values;
  for (const Piece& piece : pieces_) {
    bool overlaps = false;
    for (const FlatRange& r : piece.ranges) {
      for (const FlatRange& w : want)
        overlaps = overlaps || (std::max(r.offset, w.offset) < std::min(r.end(), w.end()));
    }
    if (!overlaps) continue;
    values.resize(static_cast<size_t>(piece.count));
    piece.file->read(name_, values.data(), piece.count);
    int64_t at = 0;
    for (const FlatRange& r : piece.ranges) {
      for (const FlatRange& w : want) {
        const int64_t lo = std::max(r.offset, w.offset);
        const int64_t hi = std::min(r.end(), w.end());
        if (lo >= hi) continue;
        std::copy(values.begin() + (at + lo - r.offset), values.begin() + (at + hi - r.offset),
                  out + (lo - origin));
        covered.push_back(FlatRange{lo, hi - lo});
      }
      at += r.numel;
    }
  }
  std::sort(covered.begin(), covered.end(),
            [](const FlatRange& a, const FlatRange& b) { return a.offset < b.offset; });
  for (const FlatRange& w : want) {
    int64_t next = w.offset;  // the first element of w not yet known to be held
    for (const FlatRange& c : covered) {
      if (c.offset <= next && c.end() > next) next = c.end();
    }
    if (next < w.end()) {
      throw CheckpointError(fmt::format(
          "the checkpoint holds no value of {} at element {} (of {}; {} file{} hold{} pieces of "
          "it): a file is missing or damaged; use another checkpoint",
          name_, next, numel_, pieces_.size(), pieces_.size() == 1 ? "" : "s",
          pieces_.size() == 1 ? "s" : ""));
    }
  }
}

}  // namespace autoloco
