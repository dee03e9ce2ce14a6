// The tokenizer files of an HF export without Python: tokenizer.model read as the protobuf it is
// (defaults, negative ids, damage), BOS and EOS found among a tokenizer.json's added tokens
// without parsing its vocabulary, and the byte tokenizer's tokenizer.json. transformers itself
// loads them in tests/e2e/test_hf_tokenizer_export.cpp.
#include <yaml-cpp/yaml.h>
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>

#include "../support/run_files.hpp"
#include "../support/temp_dir.hpp"
#include "autoloco/model/hf_tokenizer_files.hpp"
#include "autoloco/util/error.hpp"

namespace {

std::string varint(uint64_t v) {
  std::string out;
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  return out + static_cast<char>(v);
}
std::string field_varint(uint32_t field, int64_t value) {
  return varint(uint64_t{field} << 3) + varint(static_cast<uint64_t>(value));
}
std::string field_bytes(uint32_t field, const std::string& bytes) {
  return varint((uint64_t{field} << 3) | 2) + varint(bytes.size()) + bytes;
}
std::string piece(const std::string& text, int type) {
  // score (field 2, fixed32) is skipped by the reader, as is any unknown field.
  return field_bytes(1, text) + varint((2 << 3) | 5) + std::string(4, '\0') + field_varint(3, type);
}

}  // namespace

TEST_CASE("HF tokenizer files: tokenizer.model read as protobuf, defaults and negative ids",
          "[hf]") {
  const std::string pieces = field_bytes(1, piece("<unk>", 2)) + field_bytes(1, piece("<s>", 3)) +
                             field_bytes(1, piece("</s>", 3)) + field_bytes(1, piece("▁a", 1));
  SECTION("protobuf's defaults where the file leaves fields out") {
    const auto info = autoloco::parse_sentencepiece_model(pieces, "m");
    REQUIRE(info.pieces.size() == 4);
    CHECK(info.pieces[3].piece == "▁a");
    CHECK(info.pieces[1].type == 3);
    CHECK(info.model_type_name() == "unigram");
    CHECK(info.bos_id == 1);
    CHECK(info.eos_id == 2);
    CHECK(info.pad_id == -1);
    CHECK(info.add_dummy_prefix);
    CHECK(info.remove_extra_whitespaces);
    CHECK(*info.piece(1) == "<s>");
    CHECK_FALSE(info.piece(-1));
    CHECK_FALSE(info.piece(4));
  }
  SECTION("autoloco-prepare's settings, a BOS of -1 (ten bytes on the wire)") {
    const std::string trainer = field_varint(3, 2) + field_varint(35, 1) + field_varint(41, -1) +
                                field_varint(42, 3) + field_bytes(53, "unknown field");
    const std::string normalizer =
        field_bytes(1, "identity") + field_varint(3, 0) + field_varint(4, 0);
    const auto info = autoloco::parse_sentencepiece_model(
        pieces + field_bytes(2, trainer) + field_bytes(3, normalizer), "m");
    CHECK(info.model_type_name() == "bpe");
    CHECK(info.byte_fallback);
    CHECK(info.bos_id == -1);
    CHECK_FALSE(info.piece(info.bos_id));
    CHECK(info.eos_id == 3);
    CHECK(info.normalizer_name == "identity");
    CHECK_FALSE(info.precompiled_charsmap);
    CHECK_FALSE(info.add_dummy_prefix);
    CHECK_FALSE(info.remove_extra_whitespaces);
    CHECK(info.escape_whitespaces);
  }
  SECTION("damaged or another file") {
    CHECK_THROWS_AS(autoloco::parse_sentencepiece_model(pieces.substr(0, pieces.size() - 3), "m"),
                    autoloco::DataError);
    CHECK_THROWS_WITH(autoloco::parse_sentencepiece_model("{\"model\": 1}", "'x.model'"),
                      Catch::Contains("'x.model' is not a SentencePiece model"));
    CHECK_THROWS_WITH(autoloco::parse_sentencepiece_model("", "m"), Catch::Contains("no pieces"));
  }
}

TEST_CASE("HF tokenizer files: BOS and EOS of a tokenizer.json, tokenizer_config.json", "[hf]") {
  const autoloco::test::TempDir tmp("hf-tok-files");
  const std::string path = tmp.file("tokenizer.json");
  // A vocabulary with braces, brackets and quotes in its pieces: skipped, not parsed.
  const std::string vocab = R"("model": {"type": "BPE", "vocab": {"{": 0, "]\"[": 1, "\\": 2}})";
  SECTION("Llama 3's names") {
    autoloco::test::write_text(
        path, "{\"version\": \"1.0\", " + vocab +
                  R"(, "added_tokens": [{"id": 7, "content": "<|begin_of_text|>", "special": true},
                 {"id": 8, "content": "<|end_of_text|>", "special": true}], "decoder": null})");
    const auto files = autoloco::hf_tokenizer_files("hf", path, 64);
    CHECK(files.tokenizer_class == "PreTrainedTokenizerFast");
    CHECK(*files.tokens.bos == 7);
    CHECK(*files.tokens.eos == 8);
    REQUIRE(files.files.size() == 2);
    CHECK(files.files[0].name == "tokenizer.json");
    CHECK(files.files[0].contents == autoloco::test::read_text(path));
    CHECK(files.files[1].name == "tokenizer_config.json");
    const YAML::Node config = YAML::Load(files.files[1].contents);
    CHECK(config["bos_token"].as<std::string>() == "<|begin_of_text|>");
    CHECK_FALSE(config["add_bos_token"].as<bool>());
    CHECK(config["model_max_length"].as<int>() == 64);
  }
  SECTION("GPT-2's <|endoftext|> is both; a token that is not special is neither") {
    autoloco::test::write_text(
        path, "{" + vocab + R"(, "added_tokens": [{"id": 3, "content": "<s>", "special": false},
                 {"id": 50256, "content": "<|endoftext|>", "special": true}]})");
    const auto files = autoloco::hf_tokenizer_files("hf", path, 1024);
    CHECK(*files.tokens.bos == 50256);
    CHECK(*files.tokens.eos == 50256);
  }
  SECTION("none") {
    autoloco::test::write_text(path, "{" + vocab + R"(, "added_tokens": []})");
    const auto files = autoloco::hf_tokenizer_files("hf", path, 8);
    CHECK_FALSE(files.tokens.bos);
    CHECK_FALSE(files.tokens.eos);
  }
  SECTION("not a tokenizer.json, or missing") {
    autoloco::test::write_text(path, "{\"added_tokens\": [1, 2");
    CHECK_THROWS_WITH(autoloco::hf_tokenizer_files("hf", path, 8),
                      Catch::Contains(path) && Catch::Contains("not valid JSON"));
    CHECK_THROWS_WITH(autoloco::hf_tokenizer_files("hf", tmp.file("nope.json"), 8),
                      Catch::Contains("cannot be read"));
  }
}

TEST_CASE("HF tokenizer files: the byte tokenizer's tokenizer.json", "[hf]") {
  const auto files = autoloco::hf_tokenizer_files("bytes", "", 128);
  REQUIRE(files.files.size() == 2);
  // The document separator (a newline) is the BOS and the EOS, which lm-evaluation-harness needs.
  CHECK(files.tokens.bos == 10);
  CHECK(files.tokens.eos == 10);
  const YAML::Node config = YAML::Load(files.files[1].contents);
  CHECK(config["bos_token"].as<std::string>() == "<0x0A>");
  CHECK(config["eos_token"].as<std::string>() == "<0x0A>");
  CHECK(config["split_special_tokens"].as<bool>());
  const YAML::Node json = YAML::Load(files.files[0].contents);
  const YAML::Node vocab = json["model"]["vocab"];
  REQUIRE(vocab.size() == 256);
  CHECK(vocab["<0x00>"].as<int>() == 0);
  CHECK(vocab["<0x0A>"].as<int>() == 10);
  CHECK(vocab["<0xFF>"].as<int>() == 255);
  CHECK(json["model"]["byte_fallback"].as<bool>());
  CHECK(json["model"]["merges"].size() == 0);
  CHECK_THROWS_AS(autoloco::hf_tokenizer_files("words", "", 8), autoloco::Error);
}
