// libFuzzer target: json lines as autoloco-prepare reads them (data/json_lines.hpp): the input as
// a file, plain or, when it starts with their magic bytes, gzip or zstd, read row by row, once
// stopping at the first bad row and once with skip_bad. A DataError is a correct refusal; a
// finding is anything else, or skip_bad reading fewer rows than the stopping read got to.
#include <cstddef>
#include <cstdint>

#include "autoloco/data/row_reader.hpp"
#include "fuzz_support.hpp"

namespace {

uint64_t count_rows(const std::string& path, bool skip_bad, bool& finished) {
  autoloco::RowOptions options;
  options.skip_bad = skip_bad;
  autoloco::SkippedRows skipped;
  uint64_t rows = 0;
  finished = false;
  autoloco::fuzz::expect_typed_errors([&] {
    auto reader = autoloco::open_rows(path, autoloco::InputFormat::json_lines, options, skipped);
    autoloco::Row row;
    while (reader->next(row)) {
      autoloco::fuzz::require(row.index > 0, "a json line numbered 0");
      ++rows;
    }
    finished = true;
  });
  return rows;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const autoloco::fuzz::ScratchFile file(data, size);
  bool strict_finished = false;
  bool skipping_finished = false;
  const uint64_t strict = count_rows(file.path(), false, strict_finished);
  const uint64_t skipping = count_rows(file.path(), true, skipping_finished);
  autoloco::fuzz::require(skipping_finished, "--skip-bad stopped with an error");
  autoloco::fuzz::require(skipping >= strict, "--skip-bad read fewer rows than the strict read");
  if (strict_finished) autoloco::fuzz::require(skipping == strict, "a clean file read differently");
  return 0;
}
