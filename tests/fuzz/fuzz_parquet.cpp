// libFuzzer target: parquet files as autoloco-prepare reads them (data/parquet_rows.hpp, Arrow's
// reader from the pyarrow wheel): the input as a file, its `text` column read row by row, once
// stopping at the first problem and once with skip_bad. A DataError is a correct refusal; a
// finding is anything else (an exception of Arrow's that escaped, a crash, a sanitizer report in
// our code, a hang), or skip_bad stopping with an error after the file opened.
#include <cstddef>
#include <cstdint>

#include "autoloco/data/row_reader.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const autoloco::fuzz::ScratchFile file(data, size);
  for (const bool skip_bad : {false, true}) {
    autoloco::RowOptions options;
    options.skip_bad = skip_bad;
    autoloco::SkippedRows skipped;
    std::unique_ptr<autoloco::RowReader> reader;
    autoloco::fuzz::expect_typed_errors([&] {
      reader = autoloco::open_rows(file.path(), autoloco::InputFormat::parquet, options, skipped);
    });
    if (reader == nullptr) continue;  // refused at open: not a parquet file, no text column
    bool finished = false;
    autoloco::fuzz::expect_typed_errors([&] {
      autoloco::Row row;
      while (reader->next(row)) {
      }
      finished = true;
    });
    if (skip_bad) autoloco::fuzz::require(finished, "--skip-bad stopped with an error");
  }
  return 0;
}
