// Unit tests of the row readers behind autoloco-prepare: json lines, plain and gzip or zstd
// compressed, and their errors; parquet files written by pyarrow.
#include <catch2/catch.hpp>

#include <sys/resource.h>

#include <filesystem>
#include <string>
#include <vector>

#include "../support/row_files.hpp"
#include "../support/run_files.hpp"
#include "../support/temp_dir.hpp"
#include "autoloco/data/compressed_input.hpp"
#include "autoloco/data/row_reader.hpp"
#include "autoloco/util/error.hpp"

namespace fs = std::filesystem;
using autoloco::DataError;
using autoloco::InputFormat;
using autoloco::RowOptions;
using autoloco::SkippedRows;
using autoloco::test::TempDir;
using autoloco::test::write_text;
using Catch::Matchers::Contains;

namespace {

struct ReadRows {
  std::vector<std::string> texts;
  std::vector<uint64_t> indices;
  SkippedRows skipped;
};

ReadRows read_rows(const fs::path& path, InputFormat format, RowOptions options = {}) {
  ReadRows out;
  auto reader = autoloco::open_rows(path.string(), format, options, out.skipped);
  autoloco::Row row;
  while (reader->next(row)) {
    out.texts.emplace_back(row.text);
    out.indices.push_back(row.index);
  }
  return out;
}

// Json lines with the cases a real file has: escapes, other fields before and after the text,
// a blank line, CRLF, and a last line without its newline.
const std::string kJsonLines =
    "{\"id\": 1, \"text\": \"first document\\nwith two lines\", \"score\": 0.5}\n"
    "{\"text\": \"caf\\u00e9 \\ud83d\\ude80 \\\"quoted\\\" tab\\tend\", \"meta\": {\"a\": [1, "
    "2]}}\n"
    "\n"
    "{\"url\": \"http://x\", \"text\": \"third\"}\r\n"
    "{\"text\": \"\"}\n"
    "{\"text\": \"last, no newline\"}";
const std::vector<std::string> kJsonTexts = {"first document\nwith two lines",
                                             "caf\xc3\xa9 \xf0\x9f\x9a\x80 \"quoted\" tab\tend",
                                             "third", "", "last, no newline"};
const std::vector<uint64_t> kJsonLineNumbers = {1, 2, 4, 5, 6};

std::string error_of(const fs::path& path, InputFormat format, RowOptions options = {}) {
  try {
    read_rows(path, format, options);
  } catch (const DataError& e) {
    return e.what();
  }
  FAIL("no error reading " << path);
  return {};
}

// The process's peak resident memory so far, in MiB.
long peak_rss_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss / 1024;
}

}  // namespace

TEST_CASE("input formats are told by file names", "[data][rows]") {
  using autoloco::input_format_of;
  CHECK(input_format_of("a.jsonl") == InputFormat::json_lines);
  CHECK(input_format_of("a.json.gz") == InputFormat::json_lines);
  CHECK(input_format_of("a.ndjson.zst") == InputFormat::json_lines);
  CHECK(input_format_of("a.jsonl.zstd") == InputFormat::json_lines);
  CHECK(input_format_of("train-00000-of-00099.parquet") == InputFormat::parquet);
  CHECK(input_format_of("notes.txt") == InputFormat::text);
  CHECK(input_format_of("notes.txt.gz") == InputFormat::text);
  CHECK(input_format_of("jsonl") == InputFormat::text);
}

TEST_CASE("json lines give each line's text field, plain, gzip and zstd alike", "[data][rows]") {
  const TempDir tmp;
  const size_t cut = kJsonLines.find("{\"url\"");  // between lines: members end mid-file
  const size_t cut_mid = 37;                       // inside a line
  const std::vector<std::pair<std::string, std::string>> files = {
      {"plain.jsonl", kJsonLines},
      {"one.jsonl.gz", autoloco::test::gzip_member(kJsonLines)},
      {"two.jsonl.gz", autoloco::test::gzip_two_members(kJsonLines, cut)},
      {"mid.json.gz", autoloco::test::gzip_two_members(kJsonLines, cut_mid)},
      {"one.jsonl.zst", autoloco::test::zstd_frame(kJsonLines)},
      {"two.ndjson.zst", autoloco::test::zstd_two_frames(kJsonLines, cut_mid)},
  };
  for (const auto& [name, bytes] : files) {
    INFO(name);
    write_text((tmp.path / name).string(), bytes);
    const ReadRows rows = read_rows(tmp.path / name, InputFormat::json_lines);
    CHECK(rows.texts == kJsonTexts);
    CHECK(rows.indices == kJsonLineNumbers);
    CHECK(rows.skipped.rows == 0);
  }
}

TEST_CASE("compression is told by the stream's first bytes", "[data][rows]") {
  const TempDir tmp;
  write_text((tmp.path / "misnamed.jsonl").string(), autoloco::test::zstd_frame(kJsonLines));
  autoloco::CompressedInput input((tmp.path / "misnamed.jsonl").string());
  CHECK(input.compression() == autoloco::Compression::zstd);
  CHECK(read_rows(tmp.path / "misnamed.jsonl", InputFormat::json_lines).texts == kJsonTexts);
}

TEST_CASE("json lines longer than the reader's buffer are read whole", "[data][rows]") {
  const TempDir tmp;
  const std::string long_text(9u << 20, 'x');  // past the 1 MiB first buffer, several times
  const std::string text =
      "{\"text\": \"a\"}\n{\"text\": \"" + long_text + "\"}\n{\"text\": \"b\"}\n";
  write_text((tmp.path / "long.jsonl.zst").string(), autoloco::test::zstd_frame(text));
  const ReadRows rows = read_rows(tmp.path / "long.jsonl.zst", InputFormat::json_lines);
  REQUIRE(rows.texts.size() == 3);
  CHECK(rows.texts[1] == long_text);
  CHECK(rows.texts[2] == "b");
}

TEST_CASE("bad json lines are errors naming the file and line, or skipped with --skip-bad",
          "[data][rows]") {
  const TempDir tmp;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{\"text\": \"cut short", "line 2: not valid JSON"},
      {"[\"text\", \"an array\"]", "line 2: an array, not a JSON object"},
      {"{\"body\": \"x\", \"id\": 3}",
       "line 2: no field 'text' (--text-field; the line has "
       "'body', 'id')"},
      {"{\"text\": 42}", "line 2: field 'text' is a number, not a string"},
      {"{\"text\": null}", "line 2: field 'text' is null, not a string"},
      {"{\"text\": \"bad \xff byte\"}", "line 2: not valid JSON"},
  };
  for (const auto& [line, expected] : cases) {
    INFO(line);
    const fs::path path = tmp.path / "bad.jsonl";
    write_text(path.string(), "{\"text\": \"one\"}\n" + line + "\n{\"text\": \"three\"}\n");
    const std::string message = error_of(path, InputFormat::json_lines);
    CHECK_THAT(message, Contains(path.string()) && Contains(expected) && Contains("--skip-bad"));
    RowOptions skip;
    skip.skip_bad = true;
    const ReadRows rows = read_rows(path, InputFormat::json_lines, skip);
    CHECK(rows.texts == std::vector<std::string>{"one", "three"});
    CHECK(rows.indices == std::vector<uint64_t>{1, 3});
    CHECK(rows.skipped.rows == 1);
    REQUIRE(rows.skipped.examples.size() == 1);
    CHECK_THAT(rows.skipped.examples[0], Contains(expected));
  }
}

TEST_CASE("the json field is chosen by --text-field", "[data][rows]") {
  const TempDir tmp;
  write_text((tmp.path / "a.jsonl").string(),
             "{\"text\": \"no\", \"content\": \"yes\"}\n{\"content\": \"also\"}\n");
  RowOptions options;
  options.text_field = "content";
  CHECK(read_rows(tmp.path / "a.jsonl", InputFormat::json_lines, options).texts ==
        std::vector<std::string>{"yes", "also"});
}

TEST_CASE("damaged gzip and zstd streams are errors, or end the file with --skip-bad",
          "[data][rows]") {
  const TempDir tmp;
  std::string text;
  for (int i = 0; i < 2000; ++i)
    text += "{\"text\": \"row " + std::to_string(i) + " of a compressed file\"}\n";
  const std::string gz = autoloco::test::gzip_member(text);
  const std::string zst = autoloco::test::zstd_frame(text);
  struct Case {
    std::string name, bytes, expected;
  };
  std::string gz_flipped = gz;
  gz_flipped[gz.size() / 2] = static_cast<char>(gz_flipped[gz.size() / 2] ^ 0x55);
  std::string zst_flipped = zst;
  zst_flipped[zst.size() / 2] = static_cast<char>(zst_flipped[zst.size() / 2] ^ 0x55);
  const std::vector<Case> cases = {
      {"cut.jsonl.gz", gz.substr(0, gz.size() / 2), "ends inside a member (truncated)"},
      {"cut.jsonl.zst", zst.substr(0, zst.size() / 2), "ends inside a frame (truncated)"},
      {"flipped.jsonl.gz", gz_flipped, "not a valid gzip stream"},
      {"flipped.jsonl.zst", zst_flipped, "not a valid zstd stream"},
      {"trailing.jsonl.gz", gz + "garbage after the member", "not a valid gzip stream"},
  };
  for (const auto& c : cases) {
    INFO(c.name);
    const fs::path path = tmp.path / c.name;
    write_text(path.string(), c.bytes);
    CHECK_THAT(error_of(path, InputFormat::json_lines),
               Contains(path.string()) && Contains(c.expected));
    RowOptions skip;
    skip.skip_bad = true;
    const ReadRows rows = read_rows(path, InputFormat::json_lines, skip);
    CHECK(rows.skipped.files == 1);
    CHECK(rows.texts.size() < 2001);
    for (size_t i = 0; i < rows.texts.size(); ++i)  // what came before the damage is intact
      CHECK(rows.texts[i] == "row " + std::to_string(i) + " of a compressed file");
  }
}

TEST_CASE("parquet files give a string column's values, row group by row group",
          "[data][rows][parquet]") {
  if (autoloco::test::without_parquet()) return;
  const TempDir tmp;
  autoloco::test::run_pyarrow(tmp.path, R"(
texts = ['row %d: caf\u00e9 \U0001F680' % i for i in range(2500)]
table = pa.table({'id': list(range(2500)), 'text': texts})
pq.write_table(table, d + '/groups.parquet', row_group_size=1000)
pq.write_table(pa.table({'text': pa.array(texts[:10], pa.large_string())}), d + '/large.parquet')
pq.write_table(pa.table({'text': ['a', None, 'c']}), d + '/null.parquet')
pq.write_table(pa.table({'text': [1, 2]}), d + '/ints.parquet')
pq.write_table(pa.table({'text': pa.array(texts, pa.dictionary(pa.int32(), pa.string()))}),
               d + '/dict.parquet', row_group_size=700)
)");
  const ReadRows rows = read_rows(tmp.path / "groups.parquet", InputFormat::parquet);
  REQUIRE(rows.texts.size() == 2500);
  CHECK(rows.texts[0] == "row 0: caf\xc3\xa9 \xf0\x9f\x9a\x80");
  CHECK(rows.texts[2499] == "row 2499: caf\xc3\xa9 \xf0\x9f\x9a\x80");
  CHECK(rows.indices[1234] == 1234);
  CHECK(read_rows(tmp.path / "dict.parquet", InputFormat::parquet).texts == rows.texts);
  CHECK(read_rows(tmp.path / "large.parquet", InputFormat::parquet).texts.size() == 10);

  CHECK_THAT(error_of(tmp.path / "null.parquet", InputFormat::parquet),
             Contains("row group 0, row 1: column 'text' is null"));
  RowOptions skip;
  skip.skip_bad = true;
  const ReadRows skipped = read_rows(tmp.path / "null.parquet", InputFormat::parquet, skip);
  CHECK(skipped.texts == std::vector<std::string>{"a", "c"});
  CHECK(skipped.indices == std::vector<uint64_t>{0, 2});
  CHECK(skipped.skipped.rows == 1);

  CHECK_THAT(error_of(tmp.path / "ints.parquet", InputFormat::parquet),
             Contains("column 'text' holds int64, not strings"));
  RowOptions other;
  other.text_field = "body";
  CHECK_THAT(error_of(tmp.path / "groups.parquet", InputFormat::parquet, other),
             Contains("no column 'body'") && Contains("'id' (int64), 'text' (string)"));
}

TEST_CASE("damaged parquet files are errors naming the file", "[data][rows][parquet]") {
  if (autoloco::test::without_parquet()) return;
  const TempDir tmp;
  autoloco::test::run_pyarrow(tmp.path, R"(
texts = ['row %d of a parquet file that compresses' % i for i in range(5000)]
pq.write_table(pa.table({'text': texts}), d + '/good.parquet', row_group_size=1000,
               compression='zstd', write_page_checksum=True)
)");
  const std::string good = autoloco::test::read_text((tmp.path / "good.parquet").string());
  const fs::path cut = tmp.path / "cut.parquet";
  write_text(cut.string(), good.substr(0, good.size() / 2));
  CHECK_THAT(error_of(cut, InputFormat::parquet),
             Contains(cut.string()) && Contains("not a readable parquet file"));
  write_text(cut.string(), "PAR1 is not enough");
  CHECK_THAT(error_of(cut, InputFormat::parquet), Contains("not a readable parquet file"));
  // The footer intact, a data page overwritten: found when its row group is read (by the pages'
  // CRCs, which the file has).
  std::string damaged = good;
  for (size_t i = 0; i < 200; ++i)
    damaged[good.size() / 3 + i] = static_cast<char>(0xA5);
  const fs::path bad = tmp.path / "damaged.parquet";
  write_text(bad.string(), damaged);
  CHECK_THAT(error_of(bad, InputFormat::parquet),
             Contains(bad.string()) && Contains("cannot be read"));
  RowOptions skip;
  skip.skip_bad = true;
  const ReadRows rows = read_rows(bad, InputFormat::parquet, skip);
  CHECK(rows.skipped.files == 1);
  CHECK(rows.texts.size() < 5000);
}

TEST_CASE("a parquet page that claims 2 GiB in a small file is refused without taking it",
          "[data][rows][parquet]") {
  if (autoloco::test::without_parquet()) return;
  // Written by tests/fuzz/make_parquet_seeds.py: a 1.5 kB file whose page header claims
  // 2^31 - 64 bytes. Arrow allocates a page's declared size before reading it; the reader's
  // memory limit refuses it (it took 2 GiB and the fuzz run's memory limit before).
  const fs::path huge =
      fs::path(AUTOLOCO_SOURCE_DIR) / "tests/fuzz/corpus/parquet/huge_page.parquet";
  const long before = peak_rss_mib();
  CHECK_THAT(error_of(huge, InputFormat::parquet),
             Contains("row group 0 of 1 cannot be read") && Contains("asks for 2147483584 bytes"));
  RowOptions skip;
  skip.skip_bad = true;
  const ReadRows rows = read_rows(huge, InputFormat::parquet, skip);
  CHECK(rows.texts.empty());
  CHECK(rows.skipped.files == 1);
  CHECK(peak_rss_mib() - before < 512);
}
