// Unit tests of corpus preparation from json lines and parquet files: every row becomes one
// document, whole, in one split; the split is fixed per row; bad rows are reported.
#include <catch2/catch.hpp>

#include <filesystem>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "../support/row_files.hpp"
#include "../support/run_files.hpp"
#include "../support/split_tokens.hpp"
#include "../support/temp_dir.hpp"
#include "autoloco/data/prepare.hpp"
#include "autoloco/data/row_reader.hpp"
#include "autoloco/util/error.hpp"

namespace fs = std::filesystem;
using autoloco::PrepareOptions;
using autoloco::PrepareReport;
using autoloco::test::decode_split;
using autoloco::test::read_text;
using autoloco::test::TempDir;
using autoloco::test::write_text;
using Catch::Matchers::Contains;

namespace {

std::multiset<std::string> lines_of(const std::string& text) {
  std::multiset<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    lines.insert(line);
  return lines;
}

// `rows` json lines of one-line documents tagged with `tag`, and the documents.
std::string json_rows(const std::string& tag, int rows, std::multiset<std::string>& documents) {
  std::string text;
  for (int i = 0; i < rows; ++i) {
    const std::string document = tag + " row " + std::to_string(i);
    text += "{\"id\": " + std::to_string(i) + ", \"text\": \"" + document + "\"}\n";
    documents.insert(document);
  }
  return text;
}

PrepareOptions options_for(const fs::path& input, const fs::path& out) {
  PrepareOptions options;
  options.inputs = {input.string()};
  options.out_dir = out.string();
  options.val_fraction = 0.1;
  options.threads = 2;
  return options;
}

}  // namespace

TEST_CASE("prepare makes a document of every row of json lines, compressed or not, beside text",
          "[data][prepare][rows]") {
  const TempDir tmp;
  const fs::path corpus = tmp.path / "corpus";
  std::multiset<std::string> documents;
  write_text((corpus / "a.jsonl").string(), json_rows("plain", 120, documents));
  write_text((corpus / "b.jsonl.gz").string(),
             autoloco::test::gzip_member(json_rows("gzip", 150, documents)));
  write_text((corpus / "c" / "d.json.zst").string(),
             autoloco::test::zstd_frame(json_rows("zstd", 130, documents)));
  write_text((corpus / "notes.txt").string(), "a text file, one document");
  documents.insert("a text file, one document");
  write_text((corpus / "image.bin").string(), std::string("\x89PNG\0\0", 6));

  const PrepareReport report = autoloco::prepare_corpus(options_for(corpus, tmp.path / "out"));
  CHECK(report.files == 4);
  CHECK(report.row_files == 3);
  CHECK(report.skipped_files == 1);
  CHECK(report.documents == documents.size());
  CHECK(report.val_documents > 10);
  CHECK(report.val_documents < 80);
  std::multiset<std::string> all = lines_of(decode_split(tmp.path / "out", "train"));
  const auto val = lines_of(decode_split(tmp.path / "out", "val"));
  CHECK(val.size() == report.val_documents);
  all.insert(val.begin(), val.end());
  CHECK(all == documents);
  CHECK_THAT(read_text((tmp.path / "out" / "prepare.json").string()),
             Contains("\"row_files\":3") && Contains("\"text_field\":\"text\""));

  // The same rows split the same way on another run and with another number of threads.
  PrepareOptions again = options_for(corpus, tmp.path / "again");
  again.threads = 1;
  autoloco::prepare_corpus(again);
  CHECK(read_text((tmp.path / "again" / "val_000.bin").string()) ==
        read_text((tmp.path / "out" / "val_000.bin").string()));
  CHECK(read_text((tmp.path / "again" / "train_000.bin").string()) ==
        read_text((tmp.path / "out" / "train_000.bin").string()));
}

TEST_CASE("prepare stops at a bad row, naming file and line, or counts it with --skip-bad",
          "[data][prepare][rows]") {
  const TempDir tmp;
  const fs::path corpus = tmp.path / "corpus";
  std::multiset<std::string> documents;
  write_text((corpus / "a.jsonl").string(),
             json_rows("good", 200, documents) + "{\"text\": 7}\n{\"txt\": \"x\"}\nnot json\n");
  try {
    autoloco::prepare_corpus(options_for(corpus, tmp.path / "out"));
    FAIL("a bad row was accepted");
  } catch (const autoloco::DataError& e) {
    CHECK_THAT(std::string(e.what()), Contains("a.jsonl: line 201: field 'text' is a number"));
  }
  CHECK_FALSE(fs::exists(tmp.path / "out" / "prepare.json"));
  PrepareOptions skip = options_for(corpus, tmp.path / "skip");
  skip.skip_bad = true;
  const PrepareReport report = autoloco::prepare_corpus(skip);
  CHECK(report.documents == 200);
  CHECK(report.skipped_rows == 3);
  REQUIRE(report.skipped_examples.size() == 3);
  CHECK_THAT(report.skipped_examples[2], Contains("line 203: not valid JSON"));
  CHECK_THAT(read_text((tmp.path / "skip" / "prepare.json").string()),
             Contains("\"skipped_rows\":3"));
}

TEST_CASE("prepare refuses rows that leave a split empty", "[data][prepare][rows]") {
  const TempDir tmp;
  std::multiset<std::string> documents;
  write_text((tmp.path / "few.jsonl").string(), json_rows("few", 3, documents));
  PrepareOptions options = options_for(tmp.path / "few.jsonl", tmp.path / "out");
  options.val_fraction = 0.001;
  CHECK_THROWS_WITH(autoloco::prepare_corpus(options),
                    Contains("the validation split got none of the 3 documents"));
}

TEST_CASE("prepare reads parquet files' text column", "[data][prepare][rows][parquet]") {
  if (autoloco::test::without_parquet()) return;
  const TempDir tmp;
  const fs::path corpus = tmp.path / "corpus";
  fs::create_directories(corpus);
  autoloco::test::run_pyarrow(corpus, R"(
rows = ['parquet row %d' % i for i in range(400)]
pq.write_table(pa.table({'text': rows, 'url': ['u'] * 400}), d + '/000_00000.parquet',
               row_group_size=128)
)");
  fs::remove(corpus / "make_parquet.py");
  fs::remove(corpus / "pyarrow.log");
  const PrepareReport report = autoloco::prepare_corpus(options_for(corpus, tmp.path / "out"));
  CHECK(report.row_files == 1);
  CHECK(report.documents == 400);
  std::multiset<std::string> all = lines_of(decode_split(tmp.path / "out", "train"));
  const auto val = lines_of(decode_split(tmp.path / "out", "val"));
  all.insert(val.begin(), val.end());
  std::multiset<std::string> expected;
  for (int i = 0; i < 400; ++i)
    expected.insert("parquet row " + std::to_string(i));
  CHECK(all == expected);
}
