// Every document of a corpus, in input order, one at a time: the planned pieces of text files
// (documents.hpp) and the rows of json lines and parquet files (row_reader.hpp), each with its
// train/val split. Rows are read as the stream goes, so a corpus of any size passes through in
// the memory of one document and a reader's buffer. A row's split is fixed by its file's
// relative name and its line (json lines) or row number (parquet) and the seed, like a text
// document's: the same on every machine, and a row that --skip-bad leaves out moves no other.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "autoloco/data/documents.hpp"
#include "autoloco/data/row_reader.hpp"

namespace autoloco {

struct PrepareOptions;

struct DocumentText {
  std::string text;
  bool val = false;
  size_t file = 0;        // index into DocumentPlan::files
  uint64_t position = 0;  // byte offset (text), line (json lines) or row (parquet)
};

class DocumentSource {
 public:
  // With train_only, val documents are passed over (the tokenizer trains on train only).
  DocumentSource(const DocumentPlan& plan, const PrepareOptions& options, SkippedRows& skipped,
                 bool train_only = false);
  ~DocumentSource();
  DocumentSource(const DocumentSource&) = delete;
  DocumentSource& operator=(const DocumentSource&) = delete;

  // The next document, or false at the end of the corpus. Throws DataError.
  bool next(DocumentText& document);

  // "input 'F' at byte N" or "input 'F', line N" / "row N": where a document came from.
  std::string where(const DocumentText& document) const;

 private:
  bool next_any(DocumentText& document);
  bool next_in_file(DocumentText& document);

  const DocumentPlan& plan_;
  RowOptions row_options_;
  uint64_t seed_;
  double val_fraction_;
  SkippedRows& skipped_;
  bool train_only_;
  size_t file_ = 0;      // the file being read
  size_t document_ = 0;  // the next of plan_.documents (text files)
  std::unique_ptr<RowReader> rows_;
};

// Reads a planned text document from its file. Throws DataError.
std::string read_document(const DocumentPlan& plan, const Document& document);

}  // namespace autoloco
