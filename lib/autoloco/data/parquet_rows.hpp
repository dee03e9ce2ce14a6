// Parquet files: the documents are the values of one string column, read with Arrow's own
// Parquet reader (the C++ libraries and headers that the pinned pyarrow wheel ships; Debian 12
// packages no Arrow) one batch of rows at a time, row group by row group, without pre-buffering
// whole column chunks, so memory stays at a batch whatever the file's size.
#pragma once

#include <memory>
#include <string>

#include "autoloco/data/row_reader.hpp"

namespace autoloco {

// Rows decoded at a time.
inline constexpr int64_t kParquetBatchRows = 1024;

class ParquetRowReader : public RowReader {
 public:
  // Throws DataError: not a parquet file, no such column, or a column that is not strings.
  ParquetRowReader(const std::string& path, const RowOptions& options, SkippedRows& skipped);
  ~ParquetRowReader() override;
  bool next(Row& row) override;

 private:
  struct State;
  bool next_batch();
  [[noreturn]] void fail(const std::string& what) const;
  void damaged(const std::string& what);

  std::string path_;
  RowOptions options_;
  SkippedRows& skipped_;
  std::unique_ptr<State> state_;
};

}  // namespace autoloco
