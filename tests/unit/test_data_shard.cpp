// Unit tests of the token shard format, TokenDataset and the byte tokenizer.
#include <unistd.h>

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "../support/temp_dir.hpp"
#include "autoloco/data/dataset.hpp"
#include "autoloco/data/shard.hpp"
#include "autoloco/data/tokenizer.hpp"
#include "autoloco/util/error.hpp"

namespace fs = std::filesystem;
using autoloco::DataError;
using autoloco::Shard;
using autoloco::TokenDataset;
using autoloco::TokenWidth;
using autoloco::write_shard;

namespace {

using autoloco::test::TempDir;

std::vector<unsigned char> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_all(const std::string& path, const std::vector<unsigned char>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

void put_int32(std::vector<unsigned char>& bytes, size_t offset, uint32_t value) {
  for (size_t b = 0; b < 4; ++b)
    bytes[offset + b] = static_cast<unsigned char>(value >> (8 * b));
}

}  // namespace

TEST_CASE("shard u16 write/read round trip keeps tokens, header and size", "[data][shard]") {
  TempDir dir;
  const std::string path = dir.file("train_000.bin");
  const std::vector<uint32_t> tokens = {0, 1, 255, 256, 65535, 42, 7};
  write_shard(path, tokens, TokenWidth::u16);

  CHECK_FALSE(fs::exists(path + ".tmp"));
  CHECK(fs::file_size(path) == 1024 + 2 * tokens.size());
  const auto bytes = read_all(path);
  CHECK(bytes[0] == (20240520 & 0xff));  // little-endian magic
  CHECK(bytes[4] == 1);                  // version
  CHECK(bytes[8] == tokens.size());      // count

  const Shard shard(path);
  REQUIRE(shard.size() == tokens.size());
  CHECK(shard.width() == TokenWidth::u16);
  for (size_t i = 0; i < tokens.size(); ++i)
    CHECK(shard.token(i) == tokens[i]);
  std::vector<int64_t> out(3);
  shard.copy_tokens(2, 3, out.data());
  CHECK(out == std::vector<int64_t>{255, 256, 65535});
  CHECK(shard.max_token() == 65535);
  CHECK_THROWS_AS(shard.token(tokens.size()), std::out_of_range);
  CHECK_THROWS_AS(shard.copy_tokens(5, 3, out.data()), std::out_of_range);
}

TEST_CASE("shard u32 write/read round trip keeps large token ids", "[data][shard]") {
  TempDir dir;
  const std::string path = dir.file("big.bin");
  const std::vector<uint32_t> tokens = {70000, 0, 128255, 4000000000U};
  write_shard(path, tokens, TokenWidth::u32);
  CHECK(fs::file_size(path) == 1024 + 4 * tokens.size());
  CHECK(read_all(path)[4] == 7);

  Shard shard(path);
  CHECK(shard.width() == TokenWidth::u32);
  REQUIRE(shard.size() == tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i)
    CHECK(shard.token(i) == tokens[i]);
  CHECK(shard.max_token() == 4000000000U);

  // Moving hands over the mapping; the moved-to shard still reads.
  Shard moved(std::move(shard));
  CHECK(moved.token(2) == 128255);
  Shard assigned(path);
  assigned = std::move(moved);
  CHECK(assigned.token(0) == 70000);
}

TEST_CASE("shard writer rejects a token that does not fit u16 and leaves no file",
          "[data][shard]") {
  TempDir dir;
  const std::string path = dir.file("bad.bin");
  REQUIRE_THROWS_WITH(write_shard(path, {1, 70000}, TokenWidth::u16),
                      Catch::Contains("70000") && Catch::Contains("bad.bin"));
  CHECK_FALSE(fs::exists(path));
  CHECK_FALSE(fs::exists(path + ".tmp"));
}

TEST_CASE("shard writer replaces an existing shard atomically", "[data][shard]") {
  TempDir dir;
  const std::string path = dir.file("s.bin");
  write_shard(path, {1, 2, 3}, TokenWidth::u16);
  write_shard(path, {9}, TokenWidth::u16);
  const Shard shard(path);
  REQUIRE(shard.size() == 1);
  CHECK(shard.token(0) == 9);
}

TEST_CASE("shard writer that cannot rename names the shard and leaves no temporary file",
          "[data][shard]") {
  // The rename goes through util's rename_durable, which then flushes the directory entry;
  // here, what a failed rename leaves behind.
  TempDir dir;
  const std::string path = dir.file("taken");
  fs::create_directories(path + "/occupied");
  REQUIRE_THROWS_AS(write_shard(path, {1, 2}, TokenWidth::u16), DataError);
  CHECK_THROWS_WITH(write_shard(path, {1, 2}, TokenWidth::u16), Catch::Contains("taken"));
  CHECK(fs::is_directory(path));
  CHECK_FALSE(fs::exists(path + ".tmp"));
}

TEST_CASE("shard reader rejects corrupted files with a message naming the file", "[data][shard]") {
  TempDir dir;
  const std::string path = dir.file("victim_000.bin");
  write_shard(path, {1, 2, 3, 4}, TokenWidth::u16);
  auto bytes = read_all(path);

  SECTION("bad magic") {
    put_int32(bytes, 0, 12345);
    write_all(path, bytes);
    REQUIRE_THROWS_AS(Shard(path), DataError);
    REQUIRE_THROWS_WITH(Shard(path), Catch::Contains("victim_000.bin") &&
                                         Catch::Contains("magic") && Catch::Contains("12345"));
  }
  SECTION("version not matching the magic") {
    put_int32(bytes, 4, 7);
    write_all(path, bytes);
    REQUIRE_THROWS_WITH(Shard(path),
                        Catch::Contains("victim_000.bin") && Catch::Contains("version 7"));
  }
  SECTION("truncated file") {
    bytes.pop_back();
    write_all(path, bytes);
    REQUIRE_THROWS_WITH(Shard(path), Catch::Contains("victim_000.bin") && Catch::Contains("1031") &&
                                         Catch::Contains("1032") &&
                                         Catch::Contains("truncated or corrupted"));
  }
  SECTION("extra bytes after the tokens") {
    bytes.push_back(0);
    write_all(path, bytes);
    REQUIRE_THROWS_WITH(Shard(path), Catch::Contains("victim_000.bin") && Catch::Contains("1033") &&
                                         Catch::Contains("1032"));
  }
  SECTION("file smaller than the header") {
    bytes.resize(100);
    write_all(path, bytes);
    REQUIRE_THROWS_WITH(Shard(path),
                        Catch::Contains("victim_000.bin") && Catch::Contains("header"));
  }
  SECTION("missing file") {
    fs::remove(path);
    REQUIRE_THROWS_AS(Shard(path), DataError);
    REQUIRE_THROWS_WITH(Shard(path),
                        Catch::Contains("victim_000.bin") && Catch::Contains("autoloco-prepare"));
  }
}

TEST_CASE("dataset expands globs sorted and deduplicated and counts tokens", "[data][dataset]") {
  TempDir dir;
  write_shard(dir.file("train_001.bin"), {1, 2, 3}, TokenWidth::u16);
  write_shard(dir.file("train_000.bin"), {4, 5}, TokenWidth::u16);
  write_shard(dir.file("val_000.bin"), {6}, TokenWidth::u16);

  const TokenDataset data({dir.file("train_*.bin"), dir.file("train_000.bin")}, 256, "data.train");
  REQUIRE(data.num_shards() == 2);
  CHECK(data.num_tokens() == 5);
  CHECK(data.shards()[0].path() == dir.file("train_000.bin"));
  CHECK(data.shards()[1].path() == dir.file("train_001.bin"));
  CHECK(data.what() == "data.train");
}

TEST_CASE("dataset glob matching nothing names the pattern and autoloco-prepare",
          "[data][dataset]") {
  TempDir dir;
  const std::string pattern = dir.file("nothing_*.bin");
  REQUIRE_THROWS_WITH(TokenDataset({pattern}, 256, "data.val"),
                      Catch::Contains(pattern) && Catch::Contains("data.val") &&
                          Catch::Contains("autoloco-prepare"));
  REQUIRE_THROWS_AS(TokenDataset({}, 256, "data.val"), DataError);
}

TEST_CASE("dataset rejects a token id at or above the vocabulary size", "[data][dataset]") {
  TempDir dir;
  write_shard(dir.file("wide_000.bin"), {1, 300, 2}, TokenWidth::u16);
  REQUIRE_THROWS_WITH(
      TokenDataset({dir.file("wide_000.bin")}, 256, "data.train"),
      Catch::Contains("wide_000.bin") && Catch::Contains("300") && Catch::Contains("vocab_size"));
  CHECK(TokenDataset({dir.file("wide_000.bin")}, 301, "data.train").num_tokens() == 3);
}

TEST_CASE("byte tokenizer round-trips all 256 byte values", "[data][tokenizer]") {
  std::string text;
  for (int b = 0; b < 256; ++b)
    text.push_back(static_cast<char>(b));
  const auto tokens = autoloco::encode_bytes(text);
  REQUIRE(tokens.size() == 256);
  for (uint32_t b = 0; b < 256; ++b)
    CHECK(tokens[b] == b);
  CHECK(autoloco::decode_bytes(tokens) == text);
}

TEST_CASE("byte tokenizer round-trips UTF-8 text and rejects ids over 255", "[data][tokenizer]") {
  const std::string text = "naïve café — 日本語 🙂\n";
  const auto tokens = autoloco::encode_bytes(text);
  CHECK(tokens.size() == text.size());
  CHECK(tokens[2] == 0xC3);  // first byte of 'ï'
  CHECK(autoloco::decode_bytes(tokens) == text);
  REQUIRE_THROWS_WITH(autoloco::decode_bytes({65, 256}), Catch::Contains("256"));
}
