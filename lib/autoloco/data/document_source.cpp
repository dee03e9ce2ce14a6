// Documents in input order across text, json lines and parquet files.
#include "autoloco/data/document_source.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "autoloco/data/prepare.hpp"
#include "autoloco/util/error.hpp"

namespace autoloco {

std::string read_document(const DocumentPlan& plan, const Document& document) {
  const auto& path = plan.files[document.file].path;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw DataError(fmt::format("cannot read input '{}': {}; check permissions", path.string(),
                                std::strerror(errno)));
  }
  std::string text(static_cast<size_t>(document.size), '\0');
  in.seekg(static_cast<std::streamoff>(document.offset));
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (static_cast<uint64_t>(in.gcount()) != document.size) {
    throw DataError(
        fmt::format("input '{}' changed while it was prepared (read {} of {} bytes "
                    "at offset {}); prepare again once it is stable",
                    path.string(), in.gcount(), document.size, document.offset));
  }
  return text;
}

DocumentSource::DocumentSource(const DocumentPlan& plan, const PrepareOptions& options,
                               SkippedRows& skipped, bool train_only)
    : plan_(plan),
      row_options_{options.text_field, options.skip_bad},
      seed_(options.seed),
      val_fraction_(options.val_fraction),
      skipped_(skipped),
      train_only_(train_only) {}

DocumentSource::~DocumentSource() = default;

bool DocumentSource::next(DocumentText& document) {
  while (next_any(document)) {
    if (!(train_only_ && document.val)) return true;
  }
  return false;
}

bool DocumentSource::next_any(DocumentText& document) {
  while (file_ < plan_.files.size()) {
    if (next_in_file(document)) return true;
    rows_.reset();
    ++file_;
  }
  return false;
}

bool DocumentSource::next_in_file(DocumentText& document) {
  const InputFile& file = plan_.files[file_];
  document.file = file_;
  if (file.format == InputFormat::text) {
    if (document_ >= plan_.documents.size() || plan_.documents[document_].file != file_) {
      return false;
    }
    const Document& planned = plan_.documents[document_++];
    document.text = read_document(plan_, planned);
    document.val = planned.val;
    document.position = planned.offset;
    return true;
  }
  if (rows_ == nullptr) rows_ = open_rows(file.path.string(), file.format, row_options_, skipped_);
  Row row;
  if (!rows_->next(row)) return false;
  document.text.assign(row.text);
  document.position = row.index;
  document.val = in_val_split(fmt::format("{}:{}", file.rel, row.index), seed_, val_fraction_);
  return true;
}

std::string DocumentSource::where(const DocumentText& document) const {
  const InputFile& file = plan_.files[document.file];
  switch (file.format) {
    case InputFormat::json_lines:
      return fmt::format("input '{}', line {}", file.path.string(), document.position);
    case InputFormat::parquet:
      return fmt::format("input '{}', row {}", file.path.string(), document.position);
    case InputFormat::text:
      break;
  }
  return fmt::format("input '{}' at byte {}", file.path.string(), document.position);
}

}  // namespace autoloco
