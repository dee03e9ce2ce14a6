// Json lines: one JSON object per line, the document in one of its string fields. Parsed with
// RapidJSON (Debian's rapidjson-dev), which validates each line fully, UTF-8 included, at
// hundreds of MB/s, so that parsing costs little beside tokenizing. Blank lines are allowed and
// skipped (files often end with one).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "autoloco/data/compressed_input.hpp"
#include "autoloco/data/row_reader.hpp"

namespace autoloco {

// A line longer than this is an error (memory stays bounded by it).
inline constexpr size_t kMaxJsonLineBytes = size_t{256} << 20;

class JsonLinesReader : public RowReader {
 public:
  JsonLinesReader(const std::string& path, const RowOptions& options, SkippedRows& skipped);
  ~JsonLinesReader() override;
  bool next(Row& row) override;

 private:
  struct Parser;
  // The next line in [line_begin_, line_end_); false at the end of the file.
  bool next_line();
  // Moves the unfinished line to the front and reads after it; returns where the search for
  // its newline goes on.
  size_t read_more();
  // The document of the current line, or false (after recording it) when it is bad.
  bool parse_line(Row& row);
  // Throws, or records the line as skipped (skip_bad).
  void bad_line(uint64_t line, const std::string& what);

  std::string path_;
  RowOptions options_;
  SkippedRows& skipped_;
  std::unique_ptr<CompressedInput> input_;
  std::unique_ptr<Parser> parser_;
  std::vector<char> buffer_;  // decompressed bytes
  size_t begin_ = 0;          // first byte not yet handed out
  size_t end_ = 0;            // bytes valid in buffer_
  bool input_done_ = false;
  bool discarding_ = false;  // inside a line too long to keep, skipped up to its newline
  size_t line_begin_ = 0;
  size_t line_end_ = 0;
  uint64_t line_number_ = 0;
};

}  // namespace autoloco
