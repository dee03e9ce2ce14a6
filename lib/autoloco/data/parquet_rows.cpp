// Parquet rows through parquet::arrow, a record batch at a time.
#include "autoloco/data/parquet_rows.hpp"

#include <arrow/api.h>
#include <fmt/format.h>
#include <parquet/arrow/reader.h>
#include <parquet/exception.h>
#include <parquet/file_reader.h>
#include <parquet/metadata.h>
#include <parquet/properties.h>

#include <algorithm>
#include <exception>
#include <filesystem>
#include <system_error>
#include <utility>
#include <vector>

#include "autoloco/util/error.hpp"

namespace autoloco {
namespace {

// Compressed pages are read through a buffer of this size instead of a whole column chunk.
constexpr int64_t kReadBufferBytes = int64_t{1} << 20;

// Arrow allocates what a page header declares before it reads the page, so a damaged size (the
// fuzz target found 2^31 in a 1.5 kB file) would take that much memory before the short read is
// noticed. Reading a file may hold at most this much: the larger of a floor that a batch of long
// documents fits in and a multiple of the file's size that covers any plausible compression.
constexpr int64_t kMinReadMemory = int64_t{256} << 20;
constexpr int64_t kReadMemoryPerFileByte = 8;

// Arrow's memory for one file, counted and refused past a limit.
class LimitedPool final : public arrow::ProxyMemoryPool {
 public:
  explicit LimitedPool(int64_t limit)
      : arrow::ProxyMemoryPool(arrow::default_memory_pool()), limit_(limit) {}

  using arrow::MemoryPool::Allocate;
  using arrow::MemoryPool::Reallocate;
  arrow::Status Allocate(int64_t size, int64_t alignment, uint8_t** out) override {
    ARROW_RETURN_NOT_OK(check(size));
    return arrow::ProxyMemoryPool::Allocate(size, alignment, out);
  }
  arrow::Status Reallocate(int64_t old_size, int64_t new_size, int64_t alignment,
                           uint8_t** ptr) override {
    ARROW_RETURN_NOT_OK(check(new_size - old_size));
    return arrow::ProxyMemoryPool::Reallocate(old_size, new_size, alignment, ptr);
  }

 private:
  arrow::Status check(int64_t more) const {
    if (more <= 0 || bytes_allocated() + more <= limit_) return arrow::Status::OK();
    return arrow::Status::OutOfMemory(fmt::format(
        "it asks for {} bytes, more than reading a file of this size may hold ({} MiB): a size "
        "written in the file is wrong",
        more, limit_ >> 20));
  }

  int64_t limit_;
};

int64_t read_memory_limit(const std::string& path) {
  std::error_code error;
  const auto size = std::filesystem::file_size(path, error);
  if (error) return kMinReadMemory;  // opening it says what is wrong
  return std::max(kMinReadMemory, static_cast<int64_t>(size) * kReadMemoryPerFileByte);
}

bool is_text_type(arrow::Type::type id) {
  return id == arrow::Type::STRING || id == arrow::Type::LARGE_STRING ||
         id == arrow::Type::STRING_VIEW;
}

// Strings, or a dictionary of them (what pyarrow writes for a dictionary-encoded column and
// Arrow restores from the schema it stores in the file).
bool is_text(const arrow::DataType& type) {
  if (type.id() == arrow::Type::DICTIONARY) {
    return is_text_type(static_cast<const arrow::DictionaryType&>(type).value_type()->id());
  }
  return is_text_type(type.id());
}

// Value i of a string array; false for another type.
bool string_at(const arrow::Array& values, int64_t i, std::string_view& out) {
  switch (values.type_id()) {
    case arrow::Type::STRING:
      out = static_cast<const arrow::StringArray&>(values).GetView(i);
      return true;
    case arrow::Type::LARGE_STRING:
      out = static_cast<const arrow::LargeStringArray&>(values).GetView(i);
      return true;
    case arrow::Type::STRING_VIEW:
      out = static_cast<const arrow::StringViewArray&>(values).GetView(i);
      return true;
    case arrow::Type::DICTIONARY: {
      const auto& dict = static_cast<const arrow::DictionaryArray&>(values);
      const int64_t index = dict.GetValueIndex(i);
      const auto& words = *dict.dictionary();
      return index >= 0 && index < words.length() && !words.IsNull(index) &&
             words.type_id() != arrow::Type::DICTIONARY && string_at(words, index, out);
    }
    default:
      return false;
  }
}

std::string column_names(const arrow::Schema& schema) {
  std::string names;
  for (int i = 0; i < schema.num_fields(); ++i) {
    if (i == 8) return names + ", ...";
    names += fmt::format("{}'{}' ({})", i == 0 ? "" : ", ", schema.field(i)->name(),
                         schema.field(i)->type()->ToString());
  }
  return names.empty() ? "none" : names;
}

}  // namespace

struct ParquetRowReader::State {
  explicit State(int64_t memory_limit) : pool(memory_limit) {}

  LimitedPool pool;  // before the reader, which must go first
  std::unique_ptr<parquet::arrow::FileReader> reader;
  int column = -1;  // leaf column index of the text field
  int row_groups = 0;
  int group = 0;            // the row group being read
  int64_t group_first = 0;  // the file's row number of the group's first row
  int64_t group_rows = 0;   // rows of the group handed out so far
  std::unique_ptr<arrow::RecordBatchReader> batches;
  std::shared_ptr<arrow::Array> values;
  int64_t next = 0;  // next row of `values`
  bool done = false;
};

void ParquetRowReader::fail(const std::string& what) const {
  throw DataError(fmt::format("{}: {}", path_, what));
}

void ParquetRowReader::damaged(const std::string& what) {
  const std::string message =
      fmt::format("{}: row group {} of {} cannot be read ({}); the file is damaged or cut short",
                  path_, state_->group, state_->row_groups, what);
  if (!options_.skip_bad) throw DataError(message + ": download or copy it again");
  skipped_.add(message + " (the rest of the file left out)", true);
  state_->done = true;
}

ParquetRowReader::ParquetRowReader(const std::string& path, const RowOptions& options,
                                   SkippedRows& skipped)
    : path_(path),
      options_(options),
      skipped_(skipped),
      state_(std::make_unique<State>(read_memory_limit(path))) {
  try {
    parquet::ReaderProperties properties(&state_->pool);
    properties.enable_buffered_stream();
    // Pages written with a CRC (pyarrow's write_page_checksum) are checked; others cannot be.
    properties.set_page_checksum_verification(true);
    properties.set_buffer_size(kReadBufferBytes);
    parquet::ArrowReaderProperties arrow_properties;
    arrow_properties.set_use_threads(false);  // prepare's own threads share the cores
    arrow_properties.set_batch_size(kParquetBatchRows);
    arrow_properties.set_pre_buffer(false);
    parquet::arrow::FileReaderBuilder builder;
    const arrow::Status opened = builder.OpenFile(path, false, properties);
    if (!opened.ok()) {
      fail(fmt::format("not a readable parquet file ({}); check the file", opened.message()));
    }
    auto built = builder.memory_pool(&state_->pool)->properties(arrow_properties)->Build();
    if (!built.ok()) fail(fmt::format("cannot read its schema ({})", built.status().message()));
    state_->reader = std::move(built).ValueUnsafe();
    std::shared_ptr<arrow::Schema> schema;
    const arrow::Status got = state_->reader->GetSchema(&schema);
    if (!got.ok()) fail(fmt::format("cannot read its schema ({})", got.message()));
    const auto field = schema->GetFieldByName(options.text_field);
    if (field == nullptr) {
      fail(fmt::format("no column '{}' (--text-field; the file has {})", options.text_field,
                       column_names(*schema)));
    }
    if (!is_text(*field->type())) {
      fail(fmt::format("column '{}' holds {}, not strings (--text-field names the text column)",
                       options.text_field, field->type()->ToString()));
    }
    const auto metadata = state_->reader->parquet_reader()->metadata();
    state_->column = metadata->schema()->ColumnIndex(options.text_field);
    if (state_->column < 0)
      fail(fmt::format("column '{}' is not a leaf column", options.text_field));
    state_->row_groups = metadata->num_row_groups();
  } catch (const DataError&) {
    throw;
  } catch (const std::exception& e) {
    fail(fmt::format("not a readable parquet file ({}); check the file", e.what()));
  }
}

ParquetRowReader::~ParquetRowReader() = default;

bool ParquetRowReader::next_batch() {
  State& s = *state_;
  while (!s.done) {
    try {
      if (s.batches == nullptr) {
        if (s.group >= s.row_groups) {
          s.done = true;
          break;
        }
        auto opened = s.reader->GetRecordBatchReader({s.group}, {s.column});
        if (!opened.ok()) {
          damaged(opened.status().message());
          break;
        }
        s.batches = std::move(opened).ValueUnsafe();
      }
      std::shared_ptr<arrow::RecordBatch> batch;
      const arrow::Status read = s.batches->ReadNext(&batch);
      if (!read.ok()) {
        damaged(read.message());
        break;
      }
      if (batch == nullptr) {  // the row group is finished
        s.batches.reset();
        s.group_first += s.group_rows;
        s.group_rows = 0;
        ++s.group;
        continue;
      }
      if (batch->num_rows() == 0) continue;
      s.values = batch->column(0);
      s.next = 0;
      return true;
    } catch (const DataError&) {
      throw;  // damaged()'s own, already naming the file
    } catch (const std::exception& e) {
      damaged(e.what());
    }
  }
  return false;
}

bool ParquetRowReader::next(Row& row) {
  State& s = *state_;
  while (true) {
    if (s.values == nullptr || s.next >= s.values->length()) {
      s.values.reset();
      if (!next_batch()) return false;
    }
    const int64_t i = s.next++;
    const int64_t in_group = s.group_rows++;
    // A null, or a dictionary index that points nowhere (a damaged file): no text here.
    if (s.values->IsNull(i) || !string_at(*s.values, i, row.text)) {
      const std::string message = fmt::format(
          "{}: row group {}, row {}: column '{}' is {}", path_, s.group, in_group,
          options_.text_field, s.values->IsNull(i) ? "null" : "not a string (a damaged file?)");
      if (!options_.skip_bad) {
        throw DataError(message + "; pass --skip-bad to leave such rows out");
      }
      skipped_.add(message, false);
      continue;
    }
    row.index = static_cast<uint64_t>(s.group_first + in_group);
    return true;
  }
}

}  // namespace autoloco
