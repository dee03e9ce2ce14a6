// Corpora whose documents are rows: json lines (.jsonl, .json, .ndjson; plain, gzip or zstd) and
// parquet files. A RowReader hands out one row's text at a time, in file order, so that memory
// stays bounded by a buffer (json lines) or a batch of rows (parquet) whatever the file's size.
// A bad row (a malformed line, a missing field, a value that is not a string) is a DataError
// naming the file and the line or row group, or, with skip_bad, is counted and passed over; a
// damaged file (a corrupt or truncated stream or parquet file) likewise ends the file there.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "autoloco/data/input_format.hpp"

namespace autoloco {

struct RowOptions {
  std::string text_field = "text";  // json key or parquet column holding the document
  bool skip_bad = false;
};

// What skip_bad passed over, across files.
struct SkippedRows {
  uint64_t rows = 0;                  // bad rows left out
  uint64_t files = 0;                 // files whose rest was left out (damaged streams)
  std::vector<std::string> examples;  // the first few messages, for the report

  void add(const std::string& message, bool whole_rest_of_file);
  static constexpr size_t kExamples = 5;
};

struct Row {
  std::string_view text;  // valid until the next call of next()
  // Where the row is, for its split name and messages: the line number (from 1) of a json
  // line; the row number (from 0) in the file for parquet.
  uint64_t index = 0;
};

class RowReader {
 public:
  virtual ~RowReader() = default;
  // The next row, or false at the end of the file. Throws DataError for bad input unless
  // skip_bad (then it records the problem in `skipped` and goes on).
  virtual bool next(Row& row) = 0;
};

// Opens a json lines or parquet file. Throws DataError (a parquet file in a build without
// Arrow, a file that cannot be opened, a parquet file without the column).
std::unique_ptr<RowReader> open_rows(const std::string& path, InputFormat format,
                                     const RowOptions& options, SkippedRows& skipped);

// Whether this build reads parquet (Arrow's C++ library was found at configure time).
bool parquet_supported();

}  // namespace autoloco
