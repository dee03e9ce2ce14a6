// Unit tests of cutting a corpus into documents and of the one-file train/val split.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "../support/split_tokens.hpp"
#include "../support/temp_dir.hpp"
#include "autoloco/data/dataset.hpp"
#include "autoloco/data/documents.hpp"
#include "autoloco/data/prepare.hpp"
#include "autoloco/data/tokenizer.hpp"

namespace fs = std::filesystem;
using autoloco::cut_documents;
using autoloco::PrepareOptions;
using autoloco::test::TempDir;

using autoloco::test::decode_split;

namespace {

// The text the documents stand for: each followed by the newline the shards separate them with.
std::string rejoin(const std::string& text,
                   const std::vector<std::pair<uint64_t, uint64_t>>& docs) {
  std::string out;
  for (const auto& [offset, size] : docs)
    out += text.substr(offset, size) + "\n";
  return out;
}

std::string paragraphs(int n) {
  std::string text;
  for (int i = 0; i < n; ++i) {
    text += "Paragraph " + std::to_string(i) + " begins here.\nIt has a second line, number " +
            std::to_string(i * 7) + ".\n\n";
  }
  return text;
}

}  // namespace

TEST_CASE("documents are cut at the end of a blank line and read back as the text",
          "[data][documents]") {
  const std::string text = paragraphs(40);
  const auto docs = cut_documents(text, 200);
  REQUIRE(docs.size() > 5);
  for (size_t i = 0; i < docs.size(); ++i) {
    CHECK(docs[i].second <= 200);
    if (i + 1 < docs.size()) CHECK(docs[i].second >= 100);  // cut in the window's second half
  }
  // Every cut but the last lands on a blank line: the piece ends with its paragraph's newline.
  for (size_t i = 0; i + 1 < docs.size(); ++i) {
    const auto [offset, size] = docs[i];
    CHECK(text.substr(offset + size - 1, 2) == "\n\n");
  }
  // The dropped newline is the separator's: the text reads exactly as before, plus the final
  // separator.
  CHECK(rejoin(text, docs) == text + "\n");
}

TEST_CASE("documents fall back to a line end, then to a character boundary", "[data][documents]") {
  std::string lines;
  for (int i = 0; i < 50; ++i)
    lines += "line " + std::to_string(i) + " without any blank line after it\n";
  const auto by_line = cut_documents(lines, 256);
  for (size_t i = 0; i + 1 < by_line.size(); ++i)
    CHECK(lines[by_line[i].first + by_line[i].second] == '\n');
  CHECK(rejoin(lines, by_line) == lines + "\n");

  // One line of three-byte characters: a cut never splits one.
  std::string wide;
  for (int i = 0; i < 400; ++i)
    wide += "\xe2\x82\xac";  // the euro sign
  const auto by_char = cut_documents(wide, 100);
  uint64_t total = 0;
  for (const auto& [offset, size] : by_char) {
    CHECK(offset % 3 == 0);
    CHECK(size <= 100);
    total += size;
  }
  CHECK(total == wide.size());  // nothing dropped where no newline was cut
}

TEST_CASE("documents: the auto rule keeps many files whole and cuts a few", "[data][documents]") {
  // The default corpus (497 Python doc files, 11 MB) stays one document per file, as before.
  CHECK(autoloco::auto_document_bytes(497, 11048275, 0.05) == 0);
  CHECK(autoloco::auto_document_bytes(400, 1 << 20, 0.05) == 0);
  // One 4 MB novel at 5% val: about 400 documents, so val gets about 20.
  CHECK(autoloco::auto_document_bytes(1, 4000000, 0.05) == 10000);
  CHECK(autoloco::auto_document_bytes(3, 100000, 0.05) == autoloco::kMinDocumentBytes);
  CHECK(autoloco::auto_document_bytes(1, uint64_t{1} << 40, 0.05) == autoloco::kMaxDocumentBytes);
}

TEST_CASE("prepare gives one input file a validation split of its share", "[data][documents]") {
  TempDir tmp;
  const std::string text = paragraphs(8000);  // about 530 KB
  {
    std::ofstream out(tmp.path / "novel.txt", std::ios::binary);
    out << text;
  }
  PrepareOptions options;
  options.inputs = {(tmp.path / "novel.txt").string()};
  options.out_dir = (tmp.path / "out").string();
  const auto report = autoloco::prepare_corpus(options);
  CHECK_FALSE(report.whole_files);
  CHECK(report.documents >= 350);
  // About 5% of the text, give or take the luck of the hash.
  const double val_share = static_cast<double>(report.val_bytes) /
                           static_cast<double>(report.val_bytes + report.train_bytes);
  CHECK(val_share > 0.02);
  CHECK(val_share < 0.10);
  // Every cut dropped a newline that the separator puts back; the last separator is new.
  CHECK(report.train_bytes + report.val_bytes == text.size() + 1);

  // Every paragraph is in exactly one split, whole.
  const std::string train = decode_split(tmp.path / "out", "train");
  const std::string val = decode_split(tmp.path / "out", "val");
  for (int i = 0; i < 8000; i += 97) {
    const std::string p = "Paragraph " + std::to_string(i) + " begins here.";
    CHECK((train.find(p) != std::string::npos) != (val.find(p) != std::string::npos));
  }

  // Deterministic by seed; another seed draws another split.
  options.out_dir = (tmp.path / "again").string();
  autoloco::prepare_corpus(options);
  CHECK(decode_split(tmp.path / "again", "val") == val);
  options.out_dir = (tmp.path / "other").string();
  options.seed = 7;
  autoloco::prepare_corpus(options);
  CHECK(decode_split(tmp.path / "other", "val") != val);
}
