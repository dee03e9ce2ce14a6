// The one place that knows which reader reads which format.
#include "autoloco/data/row_reader.hpp"

#include <fmt/format.h>

#include "autoloco/data/json_lines.hpp"
#include "autoloco/util/error.hpp"
#ifdef AUTOLOCO_HAVE_PARQUET
#include "autoloco/data/parquet_rows.hpp"
#endif

namespace autoloco {

void SkippedRows::add(const std::string& message, bool whole_rest_of_file) {
  if (whole_rest_of_file) {
    ++files;
  } else {
    ++rows;
  }
  if (examples.size() < kExamples) examples.push_back(message);
}

bool parquet_supported() {
#ifdef AUTOLOCO_HAVE_PARQUET
  return true;
#else
  return false;
#endif
}

std::unique_ptr<RowReader> open_rows(const std::string& path, InputFormat format,
                                     const RowOptions& options, SkippedRows& skipped) {
  if (format == InputFormat::json_lines) {
    return std::make_unique<JsonLinesReader>(path, options, skipped);
  }
  if (format != InputFormat::parquet) {
    throw DataError(fmt::format("'{}' is a text file, not rows", path));
  }
#ifdef AUTOLOCO_HAVE_PARQUET
  return std::make_unique<ParquetRowReader>(path, options, skipped);
#else
  throw DataError(fmt::format(
      "'{}' is a parquet file, and this build of autoloco-prepare reads none: it was configured "
      "without Arrow's C++ library (scripts/hf-env.sh installs the pyarrow wheel that has it; "
      "then configure again), or convert the file to json lines",
      path));
#endif
}

}  // namespace autoloco
