// Unit tests of corpus preparation (the library side of autoloco-prepare).
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "../support/run_files.hpp"
#include "../support/split_tokens.hpp"
#include "../support/temp_dir.hpp"
#include "autoloco/data/dataset.hpp"
#include "autoloco/data/prepare.hpp"
#include "autoloco/data/tokenizer.hpp"
#include "autoloco/util/error.hpp"

namespace fs = std::filesystem;
using autoloco::DataError;
using autoloco::PrepareOptions;
using autoloco::PrepareReport;
using autoloco::TokenDataset;

using autoloco::test::decode_split;

using autoloco::test::read_text;
using autoloco::test::write_text;

namespace {

using autoloco::test::TempDir;

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    lines.push_back(line);
  return lines;
}

// A small corpus: one-line documents (so lines are documents) and one binary file.
std::map<std::string, std::string> make_corpus(const fs::path& root) {
  std::map<std::string, std::string> docs;
  for (int i = 0; i < 12; ++i) {
    const std::string rel = (i % 3 == 0 ? "sub/" : "") + std::string("doc") + std::to_string(i) +
                            (i % 2 == 0 ? ".rst" : ".txt");
    docs[rel] = "document number " + std::to_string(i) + " says hello";
    write_text(root / rel, docs[rel]);
  }
  write_text(root / "image.bin", std::string("PNG\0\0\1binary", 13));
  return docs;
}

PrepareOptions options_for(const fs::path& input, const fs::path& out) {
  PrepareOptions options;
  options.inputs = {input.string()};
  options.out_dir = out.string();
  options.val_fraction = 0.25;
  return options;
}

}  // namespace

TEST_CASE("prepare writes shards whose tokens are the documents plus separators",
          "[data][prepare]") {
  TempDir tmp;
  const auto docs = make_corpus(tmp.path / "corpus");
  uint64_t bytes = 0;
  for (const auto& doc : docs)
    bytes += doc.second.size();

  const PrepareReport report =
      autoloco::prepare_corpus(options_for(tmp.path / "corpus", tmp.path / "out"));
  CHECK(report.files == docs.size());
  CHECK(report.skipped_files == 1);  // the binary file
  CHECK(report.bytes == bytes);
  CHECK(report.train_tokens + report.val_tokens == bytes + docs.size());
  CHECK(report.train_documents + report.val_documents == docs.size());
  CHECK(report.val_documents >= 1);
  CHECK(report.train_documents >= 1);
  CHECK(report.vocab_size == 256);
  CHECK(fs::exists(tmp.path / "out" / "train_000.bin"));
  CHECK(fs::exists(tmp.path / "out" / "val_000.bin"));
  const std::string json = read_text(tmp.path / "out" / "prepare.json");
  CHECK_THAT(json, Catch::Contains("\"val_unigram_entropy_nats\":") &&
                       Catch::Contains("\"vocab_size\":256") &&
                       Catch::Contains("\"train_tokens\":" + std::to_string(report.train_tokens)));

  // Every document lands whole in exactly one split, train in sorted path order.
  const auto train = lines_of(decode_split(tmp.path / "out", "train"));
  const auto val = lines_of(decode_split(tmp.path / "out", "val"));
  CHECK(train.size() == report.train_documents);
  CHECK(val.size() == report.val_documents);
  std::multiset<std::string> all(train.begin(), train.end());
  all.insert(val.begin(), val.end());
  std::multiset<std::string> expected;
  for (const auto& doc : docs)
    expected.insert(doc.second);
  CHECK(all == expected);
  const std::set<std::string> in_train(train.begin(), train.end());
  std::vector<std::string> sorted_train;
  for (const auto& doc : docs) {
    if (in_train.count(doc.second) > 0) sorted_train.push_back(doc.second);
  }
  CHECK(train == sorted_train);
}

TEST_CASE("prepare splits deterministically for a seed", "[data][prepare]") {
  TempDir tmp;
  make_corpus(tmp.path / "corpus");
  autoloco::prepare_corpus(options_for(tmp.path / "corpus", tmp.path / "a"));
  autoloco::prepare_corpus(options_for(tmp.path / "corpus", tmp.path / "b"));
  CHECK(read_text(tmp.path / "a" / "train_000.bin") == read_text(tmp.path / "b" / "train_000.bin"));
  CHECK(read_text(tmp.path / "a" / "val_000.bin") == read_text(tmp.path / "b" / "val_000.bin"));
}

TEST_CASE("prepare cuts splits into shards of at most shard_tokens", "[data][prepare]") {
  TempDir tmp;
  make_corpus(tmp.path / "corpus");
  PrepareOptions options = options_for(tmp.path / "corpus", tmp.path / "out");
  options.shard_tokens = 64;
  const PrepareReport report = autoloco::prepare_corpus(options);
  REQUIRE(report.train_shards.size() == (report.train_tokens + 63) / 64);
  CHECK(fs::path(report.train_shards[1]).filename() == "train_001.bin");
  const TokenDataset train({(tmp.path / "out" / "train_*.bin").string()}, 256, "data.train");
  CHECK(train.num_tokens() == report.train_tokens);
  for (const auto& shard : train.shards())
    CHECK(shard.size() <= 64);
}

TEST_CASE("prepare keeps only the listed extensions", "[data][prepare]") {
  TempDir tmp;
  make_corpus(tmp.path / "corpus");
  PrepareOptions options = options_for(tmp.path / "corpus", tmp.path / "out");
  options.extensions = {".rst"};
  const PrepareReport report = autoloco::prepare_corpus(options);
  CHECK(report.files == 6);
  CHECK(report.skipped_files == 7);
  for (const auto& doc : lines_of(decode_split(tmp.path / "out", "train"))) {
    const int number = std::stoi(doc.substr(doc.find("number ") + 7));
    CHECK(number % 2 == 0);
  }
}

TEST_CASE("prepare val entropy matches a hand computation", "[data][prepare]") {
  TempDir tmp;
  // Two identical files: one must go to val, which then holds "aab\n".
  write_text(tmp.path / "corpus" / "one.txt", "aab");
  write_text(tmp.path / "corpus" / "two.txt", "aab");
  const PrepareReport report =
      autoloco::prepare_corpus(options_for(tmp.path / "corpus", tmp.path / "out"));
  REQUIRE(report.val_documents == 1);
  REQUIRE(report.val_tokens == 4);
  // p(a) = 1/2, p(b) = p(\n) = 1/4: H = 1.5 ln 2.
  CHECK(report.val_unigram_entropy_nats == Approx(1.5 * std::log(2.0)));

  std::array<uint64_t, 256> uniform{};
  uniform.fill(3);
  CHECK(autoloco::unigram_entropy_nats(uniform) == Approx(std::log(256.0)));
  CHECK(autoloco::unigram_entropy_nats(std::array<uint64_t, 256>{}) == 0.0);
}

TEST_CASE("prepare refuses to overwrite prepared data unless asked", "[data][prepare]") {
  TempDir tmp;
  make_corpus(tmp.path / "corpus");
  PrepareOptions options = options_for(tmp.path / "corpus", tmp.path / "out");
  options.shard_tokens = 64;
  const PrepareReport first = autoloco::prepare_corpus(options);
  const std::string before = read_text(tmp.path / "out" / "train_000.bin");

  options.shard_tokens = 1 << 20;
  REQUIRE_THROWS_AS(autoloco::prepare_corpus(options), DataError);
  REQUIRE_THROWS_WITH(autoloco::prepare_corpus(options),
                      Catch::Contains("--overwrite") && Catch::Contains("out"));
  CHECK(read_text(tmp.path / "out" / "train_000.bin") == before);

  // With overwrite, the shards of the earlier, finer run must not linger.
  options.overwrite = true;
  const PrepareReport second = autoloco::prepare_corpus(options);
  CHECK(second.train_shards.size() == 1);
  CHECK(first.train_shards.size() > 1);
  CHECK_FALSE(fs::exists(tmp.path / "out" / "train_001.bin"));
  const TokenDataset train({(tmp.path / "out" / "train_*.bin").string()}, 256, "data.train");
  CHECK(train.num_tokens() == second.train_tokens);
}

TEST_CASE("prepare rejects missing inputs and empty corpora", "[data][prepare]") {
  TempDir tmp;
  PrepareOptions options = options_for(tmp.path / "nowhere", tmp.path / "out");
  REQUIRE_THROWS_WITH(autoloco::prepare_corpus(options), Catch::Contains("nowhere"));
  fs::create_directories(tmp.path / "empty");
  options.inputs = {(tmp.path / "empty").string()};
  REQUIRE_THROWS_WITH(autoloco::prepare_corpus(options), Catch::Contains("no input files"));
  CHECK_FALSE(fs::exists(tmp.path / "out"));
}
