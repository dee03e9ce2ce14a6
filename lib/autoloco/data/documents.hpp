// The documents of a corpus and their train/val split, before anything is tokenized. A
// document is a whole input file, or a piece of one: a corpus of only a few files (one
// novel.txt) is cut at blank lines into documents small enough that the validation split gets
// its share. The split is per document, by a hash of its name and the seed, so it is the
// same on every machine and no document straddles train and val.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "autoloco/data/input_format.hpp"

namespace autoloco {

struct PrepareOptions;

struct InputFile {
  std::filesystem::path path;
  std::string rel;  // relative to its input root: what the split hashes
  uint64_t size = 0;
  InputFormat format = InputFormat::text;  // rows (json lines, parquet) are read as they stream
};

// A document of a text file: a byte range of it.
struct Document {
  size_t file = 0;  // index into DocumentPlan::files
  uint64_t offset = 0;
  uint64_t size = 0;
  bool val = false;
};

struct DocumentPlan {
  std::vector<InputFile> files;
  std::vector<Document> documents;  // of the text files, in file order, then offset order
  size_t skipped_files = 0;         // walked files left out by the filters
  // The cut size in force: files longer than it were cut into documents of at most it.
  uint64_t doc_bytes = 0;
  bool whole_files = true;  // whether the auto rule kept files whole (doc_bytes = the cap)
};

// Whole files are documents when there are at least this many per unit of val fraction
// (400 at 0.05), so that val holds about 20 of them.
inline constexpr double kDocumentsPerValFraction = 20.0;
// Even then, a file larger than this is cut, so no document needs more memory than it.
inline constexpr uint64_t kMaxDocumentBytes = uint64_t{64} << 20;
// The smallest cut size the auto rule picks.
inline constexpr uint64_t kMinDocumentBytes = 1024;

// Collects the inputs (files or directories, walked in sorted order; `out_dir` is never read
// back in), cuts the text files into documents and assigns each to train or val (the auto cut
// size counts text files only: rows are documents already). Throws DataError.
DocumentPlan plan_documents(const PrepareOptions& options,
                            const std::filesystem::path& canonical_out_dir);

// Whether a document of this name (a text file's relative name, "name#piece" for a piece of
// one, "name:line" or "name:row" for a row) falls in the validation split.
bool in_val_split(const std::string& name, uint64_t seed, double val_fraction);

// Whether `name` ends with one of `suffixes` (--ext, and prepare's own output names).
bool has_suffix(const std::string& name, const std::vector<std::string>& suffixes);

// The cut size of the auto rule (options.doc_bytes == 0) for `files` files of `bytes` bytes in
// all; 0 keeps files whole (up to kMaxDocumentBytes).
uint64_t auto_document_bytes(size_t files, uint64_t bytes, double val_fraction);

// Cuts `text` into pieces of at most `limit` bytes, as (offset, size). A cut goes at the end
// of a blank line in the second half of the window, else at a line end there, and the newline
// it lands on is dropped: the separator written after each document takes its place, so the
// split text reads as before. Without a line end in reach, the cut falls on a UTF-8 character
// boundary. Called on successive windows of a file (see plan_documents).
std::vector<std::pair<uint64_t, uint64_t>> cut_documents(std::string_view text, uint64_t limit);

// The position of the first cut of `text` (longer than `limit`) and whether a newline there
// is dropped.
std::pair<uint64_t, bool> find_cut(std::string_view text, uint64_t limit);

}  // namespace autoloco
