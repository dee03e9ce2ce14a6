// Json lines, line by line from a decompressing buffer, each line parsed where it lies.
#include "autoloco/data/json_lines.hpp"

#include <fmt/format.h>
#include <rapidjson/document.h>
#include <rapidjson/error/en.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "autoloco/util/error.hpp"

namespace autoloco {
namespace {

constexpr size_t kInitialBufferBytes = size_t{1} << 20;

const char* type_name(const rapidjson::Value& value) {
  switch (value.GetType()) {
    case rapidjson::kArrayType:
      return "an array";
    case rapidjson::kObjectType:
      return "an object";
    case rapidjson::kNumberType:
      return "a number";
    case rapidjson::kStringType:
      return "a string";
    case rapidjson::kTrueType:
    case rapidjson::kFalseType:
      return "a boolean";
    case rapidjson::kNullType:
      break;
  }
  return "null";
}

bool blank(const char* begin, size_t size) {
  return std::all_of(begin, begin + size,
                     [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; });
}

std::string field_names(const rapidjson::Value& object) {
  std::string names;
  size_t count = 0;
  for (auto field = object.MemberBegin(); field != object.MemberEnd(); ++field) {
    if (count++ == 8) {
      names += ", ...";
      break;
    }
    names += fmt::format("{}'{}'", names.empty() ? "" : ", ",
                         std::string_view(field->name.GetString(), field->name.GetStringLength()));
  }
  return names.empty() ? "none" : names;
}

}  // namespace

// RapidJSON (Debian's rapidjson-dev, header-only). Not simdjson: the pyarrow wheel's
// libparquet exports a simdjson of its own under the same names, and a process that loads both
// calls into whichever came first (a crash); Arrow's bundled RapidJSON is renamed
// (arrow::rapidjson). The values of a line live in `values`, cleared before the next.
struct JsonLinesReader::Parser {
  rapidjson::MemoryPoolAllocator<> values;
  rapidjson::CrtAllocator stack;
};

JsonLinesReader::JsonLinesReader(const std::string& path, const RowOptions& options,
                                 SkippedRows& skipped)
    : path_(path),
      options_(options),
      skipped_(skipped),
      input_(std::make_unique<CompressedInput>(path)),
      parser_(std::make_unique<Parser>()),
      buffer_(kInitialBufferBytes) {}

JsonLinesReader::~JsonLinesReader() = default;

size_t JsonLinesReader::read_more() {
  // Keep the unfinished line, at the front.
  if (begin_ > 0) {
    std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  size_t capacity = buffer_.size();
  size_t kept = end_;  // scanned already: it holds no newline
  if (end_ == capacity && capacity >= kMaxJsonLineBytes) {
    if (!discarding_) {
      bad_line(line_number_ + 1,
               fmt::format("the line is longer than {} MiB", kMaxJsonLineBytes >> 20));
    }
    discarding_ = true;  // skipped: drop it up to its newline
    end_ = 0;
    kept = 0;
  } else if (end_ == capacity) {
    capacity = std::min(capacity * 2, kMaxJsonLineBytes);
    buffer_.resize(capacity);
  }
  try {
    const size_t n = input_->read(buffer_.data() + end_, capacity - end_);
    end_ += n;
    if (n == 0) input_done_ = true;
  } catch (const DataError& e) {
    if (!options_.skip_bad) {
      throw DataError(fmt::format("{} (after line {})", e.what(), line_number_));
    }
    skipped_.add(
        fmt::format("{} (the rest of the file after line {} left out)", e.what(), line_number_),
        true);
    // The damaged tail is dropped with whatever unfinished line it held.
    end_ = begin_;
    input_done_ = true;
  }
  return std::min(kept, end_);
}

bool JsonLinesReader::next_line() {
  size_t scanned = begin_;
  while (true) {
    const void* newline = std::memchr(buffer_.data() + scanned, '\n', end_ - scanned);
    if (newline != nullptr) {
      line_begin_ = begin_;
      line_end_ = static_cast<size_t>(static_cast<const char*>(newline) - buffer_.data());
      begin_ = line_end_ + 1;
      ++line_number_;
      if (!std::exchange(discarding_, false)) return true;
      scanned = begin_;
      continue;
    }
    if (input_done_) {
      if (begin_ == end_ || discarding_) return false;
      line_begin_ = begin_;  // a last line without its newline
      line_end_ = end_;
      begin_ = end_;
      ++line_number_;
      return true;
    }
    scanned = read_more();
  }
}

void JsonLinesReader::bad_line(uint64_t line, const std::string& what) {
  const std::string message = fmt::format("{}: line {}: {}", path_, line, what);
  if (!options_.skip_bad) {
    throw DataError(message +
                    "; fix or remove the line, or pass --skip-bad to leave such rows out");
  }
  skipped_.add(message, false);
}

bool JsonLinesReader::parse_line(Row& row) {
  const char* data = buffer_.data() + line_begin_;
  const size_t size = line_end_ - line_begin_;
  parser_->values.Clear();
  rapidjson::Document document(&parser_->values, 1024, &parser_->stack);
  // Strings are checked to be UTF-8, and a line holds one value and nothing after it.
  document.Parse<rapidjson::kParseValidateEncodingFlag>(data, size);
  if (document.HasParseError()) {
    bad_line(line_number_, fmt::format("not valid JSON ({} at byte {})",
                                       rapidjson::GetParseError_En(document.GetParseError()),
                                       document.GetErrorOffset()));
    return false;
  }
  if (!document.IsObject()) {
    bad_line(line_number_, fmt::format("{}, not a JSON object", type_name(document)));
    return false;
  }
  const rapidjson::Value key(
      rapidjson::StringRef(options_.text_field.data(), options_.text_field.size()));
  const auto field = document.FindMember(key);
  if (field == document.MemberEnd()) {
    bad_line(line_number_, fmt::format("no field '{}' (--text-field; the line has {})",
                                       options_.text_field, field_names(document)));
    return false;
  }
  if (!field->value.IsString()) {
    bad_line(line_number_, fmt::format("field '{}' is {}, not a string", options_.text_field,
                                       type_name(field->value)));
    return false;
  }
  row.text = std::string_view(field->value.GetString(), field->value.GetStringLength());
  row.index = line_number_;
  return true;
}

bool JsonLinesReader::next(Row& row) {
  while (next_line()) {
    const char* data = buffer_.data() + line_begin_;
    if (blank(data, line_end_ - line_begin_)) continue;
    if (parse_line(row)) return true;
  }
  return false;
}

}  // namespace autoloco
