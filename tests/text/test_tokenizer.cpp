// Unit tests of the SentencePiece tokenizer in autoloco-prepare, of prepare.json as the trainer
// reads it (the vocabulary check, the tokenizer model's integrity) and of bits per byte.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "../support/run_files.hpp"
#include "../support/split_tokens.hpp"
#include "../support/temp_dir.hpp"
#include "autoloco/data/dataset.hpp"
#include "autoloco/data/prepare.hpp"
#include "autoloco/data/prepared_data.hpp"
#include "autoloco/data/sentencepiece_tokenizer.hpp"
#include "autoloco/util/error.hpp"

namespace fs = std::filesystem;
using autoloco::ConfigError;
using autoloco::DataError;
using autoloco::PrepareOptions;
using autoloco::SentencePieceTokenizer;
using autoloco::TokenDataset;
using autoloco::test::TempDir;

using autoloco::test::read_text;
using autoloco::test::write_text;

namespace {

constexpr int64_t kVocab = 320;

// Sixteen small files of English-like text with indentation, digits and non-ASCII letters.
std::vector<std::string> make_corpus(const fs::path& root) {
  const std::vector<std::string> words = {"the",     "model",  "trains", "across", "data",
                                          "centres", "with",   "slow",   "links",  "über",
                                          "naïve",   "rounds", "of",     "inner",  "steps"};
  std::vector<std::string> docs;
  for (int f = 0; f < 16; ++f) {
    std::string text;
    for (int line = 0; line < 30; ++line) {
      text += (line % 4 == 0 ? "    " : "");
      for (int w = 0; w < 8; ++w)
        text += words[static_cast<size_t>((f * 31 + line * 7 + w * 3) % 15)] + " ";
      text += std::to_string(f * 100 + line) + "\n";
    }
    docs.push_back(text);
    write_text(root / ("doc" + std::to_string(10 + f) + ".txt"), text);
  }
  return docs;
}

PrepareOptions sp_options(const fs::path& input, const fs::path& out) {
  PrepareOptions options;
  options.inputs = {input.string()};
  options.out_dir = out.string();
  options.val_fraction = 0.2;
  options.tokenizer = "sentencepiece";
  options.vocab_size = kVocab;
  options.threads = 2;
  options.doc_bytes = 1 << 20;  // whole files, so that the checks below can find them
  return options;
}

#define REQUIRE_SENTENCEPIECE()                                                            \
  if (!autoloco::sentencepiece_available()) {                                              \
    WARN("AUTOLOCO_TEST_SKIPPED: this build has no SentencePiece (libsentencepiece-dev)"); \
    return;                                                                                \
  }

}  // namespace

TEST_CASE("a SentencePiece model trained here round-trips any text", "[data][tokenizer]") {
  REQUIRE_SENTENCEPIECE();
  TempDir tmp;
  const auto docs = make_corpus(tmp.path);
  size_t next = 0;
  std::istringstream lines(docs[0] + docs[1] + docs[2]);
  autoloco::SentencePieceTrainOptions options;
  options.vocab_size = kVocab;
  const std::string model = autoloco::train_sentencepiece(options, [&](std::string& line) {
    ++next;
    return static_cast<bool>(std::getline(lines, line));
  });
  CHECK(next > 90);
  const auto sp = SentencePieceTokenizer::from_serialized(model, "the test model");
  CHECK(sp->vocab_size() == kVocab);
  CHECK(sp->byte_fallback());
  // Text it never saw, with tabs, runs of spaces, newlines, emoji and a leading space.
  for (const std::string& text :
       {docs[5], std::string(" \tleading  and  double\n\nspaces \xf0\x9f\x98\x80"),
        std::string("")}) {
    std::vector<uint32_t> tokens;
    sp->encode(text, tokens);
    CHECK(sp->decode(tokens) == text);
  }
  // Subwords: fewer tokens than bytes on text like the training text (only 61 pieces beyond the
  // bytes and special ones here, so not many fewer).
  std::vector<uint32_t> tokens;
  sp->encode(docs[5], tokens);
  CHECK(tokens.size() * 5 < docs[5].size() * 4);
}

TEST_CASE("prepare with sentencepiece writes shards that decode to the documents",
          "[data][tokenizer][prepare]") {
  REQUIRE_SENTENCEPIECE();
  TempDir tmp;
  const auto docs = make_corpus(tmp.path / "corpus");
  const auto report = autoloco::prepare_corpus(sp_options(tmp.path / "corpus", tmp.path / "out"));
  CHECK(report.tokenizer == "sentencepiece");
  CHECK(report.vocab_size == kVocab);
  CHECK(report.token_bits == 16);
  CHECK(report.sp_model_type == "bpe");
  REQUIRE(report.val_documents >= 1);
  REQUIRE(fs::exists(tmp.path / "out" / "tokenizer.model"));

  const auto sp =
      SentencePieceTokenizer::from_file((tmp.path / "out" / "tokenizer.model").string());
  const std::string train =
      sp->decode(autoloco::test::split_tokens(tmp.path / "out", "train", kVocab));
  const std::string val = sp->decode(autoloco::test::split_tokens(tmp.path / "out", "val", kVocab));
  // Each document whole in one split, followed by its newline; train in file order.
  std::string all_train;
  size_t val_docs = 0;
  for (const auto& doc : docs) {
    const bool in_train = train.find(doc + "\n") != std::string::npos;
    const bool in_val = val.find(doc + "\n") != std::string::npos;
    CHECK(in_train != in_val);
    if (in_train) all_train += doc + "\n";
    val_docs += in_val ? 1 : 0;
  }
  CHECK(train == all_train);
  CHECK(val_docs == report.val_documents);

  // Bytes per token by hand: the val text's bytes over its tokens.
  const auto val_tokens = autoloco::test::split_tokens(tmp.path / "out", "val", kVocab);
  CHECK(report.val_bytes == val.size());
  CHECK(report.val_bytes_per_token() ==
        Approx(static_cast<double>(val.size()) / static_cast<double>(val_tokens.size())));
  const std::string json = read_text(tmp.path / "out" / "prepare.json");
  CHECK_THAT(json, Catch::Contains("\"tokenizer\":\"sentencepiece\"") &&
                       Catch::Contains("\"vocab_size\":320") &&
                       Catch::Contains("\"tokenizer_model\":\"tokenizer.model\"") &&
                       Catch::Contains("\"val_bytes_per_token\":"));

  // The same model given back, on one thread, writes the same shards.
  PrepareOptions given = sp_options(tmp.path / "corpus", tmp.path / "given");
  given.vocab_size = 0;
  given.sp_model = (tmp.path / "out" / "tokenizer.model").string();
  given.threads = 1;
  const auto again = autoloco::prepare_corpus(given);
  CHECK(again.sp_model_type == "given");
  CHECK(read_text(tmp.path / "given" / "train_000.bin") ==
        read_text(tmp.path / "out" / "train_000.bin"));
  CHECK(read_text(tmp.path / "given" / "tokenizer.model") ==
        read_text(tmp.path / "out" / "tokenizer.model"));
}

TEST_CASE("the trainer's datasets refuse a vocabulary that is not the tokenizer's",
          "[data][tokenizer]") {
  REQUIRE_SENTENCEPIECE();
  TempDir tmp;
  make_corpus(tmp.path / "corpus");
  autoloco::prepare_corpus(sp_options(tmp.path / "corpus", tmp.path / "out"));
  const std::string pattern = (tmp.path / "out" / "train_*.bin").string();
  CHECK_NOTHROW(TokenDataset({pattern}, kVocab, "data.train"));
  // Even a larger vocabulary, which every token would fit: it is another tokenizer's model.
  for (const int64_t wrong : {int64_t{256}, int64_t{512}}) {
    REQUIRE_THROWS_AS(TokenDataset({pattern}, wrong, "data.train"), ConfigError);
    REQUIRE_THROWS_WITH(TokenDataset({pattern}, wrong, "data.train"),
                        Catch::Contains("model.vocab_size is " + std::to_string(wrong)) &&
                            Catch::Contains("vocabulary 320") && Catch::Contains("prepare.json") &&
                            Catch::Contains("data.train"));
  }
}

TEST_CASE("a missing or damaged tokenizer model is a clear error", "[data][tokenizer]") {
  REQUIRE_SENTENCEPIECE();
  TempDir tmp;
  make_corpus(tmp.path / "corpus");
  autoloco::prepare_corpus(sp_options(tmp.path / "corpus", tmp.path / "out"));
  const fs::path model = tmp.path / "out" / "tokenizer.model";
  const std::string pattern = (tmp.path / "out" / "val_*.bin").string();
  std::string bytes = read_text(model);

  bytes[bytes.size() / 2] ^= 0x5a;
  write_text(model, bytes);
  REQUIRE_THROWS_AS(TokenDataset({pattern}, kVocab, "data.val"), DataError);
  REQUIRE_THROWS_WITH(TokenDataset({pattern}, kVocab, "data.val"),
                      Catch::Contains("tokenizer.model") && Catch::Contains("damaged"));

  fs::remove(model);
  REQUIRE_THROWS_WITH(TokenDataset({pattern}, kVocab, "data.val"),
                      Catch::Contains("tokenizer.model") && Catch::Contains("missing"));

  // prepare --sp-model with a file that is not a model, or no file.
  write_text(model, "this is not a protobuf");
  PrepareOptions given = sp_options(tmp.path / "corpus", tmp.path / "given");
  given.vocab_size = 0;
  given.sp_model = model.string();
  REQUIRE_THROWS_WITH(autoloco::prepare_corpus(given),
                      Catch::Contains("tokenizer.model") && Catch::Contains("not a SentencePiece"));
  given.sp_model = (tmp.path / "nowhere.model").string();
  REQUIRE_THROWS_WITH(autoloco::prepare_corpus(given), Catch::Contains("nowhere.model"));
  CHECK_FALSE(fs::exists(tmp.path / "given"));
}

TEST_CASE("train and val of different tokenizers are refused", "[data][tokenizer]") {
  autoloco::PreparedData bytes{"a/prepare.json", "bytes", 256, 1.0, "", -1};
  autoloco::PreparedData sp{"b/prepare.json", "sentencepiece", 4096, 3.5, "b/tokenizer.model", 7};
  CHECK_NOTHROW(autoloco::check_same_tokenizer(bytes, bytes));
  CHECK_NOTHROW(autoloco::check_same_tokenizer(bytes, std::nullopt));
  REQUIRE_THROWS_WITH(autoloco::check_same_tokenizer(bytes, sp),
                      Catch::Contains("a/prepare.json") && Catch::Contains("b/prepare.json"));
  autoloco::PreparedData other_model = sp;
  other_model.tokenizer_model_crc32 = 8;
  CHECK_THROWS_AS(autoloco::check_same_tokenizer(sp, other_model), DataError);
}

TEST_CASE("bits per byte match a hand computation", "[data][tokenizer]") {
  // 2 nats per token at 2.5 bytes per token: 2 / ln 2 / 2.5 bits per byte.
  CHECK(autoloco::bits_per_byte(2.0, 2.5) == Approx(2.0 / 0.6931471805599453 / 2.5));
  CHECK(autoloco::bits_per_byte(std::log(256.0), 1.0) == Approx(8.0));  // uniform bytes
  CHECK(std::isnan(autoloco::bits_per_byte(2.0, NAN)));

  // Byte shards: one byte per token, also for a prepare.json written before the field existed.
  TempDir tmp;
  write_text(tmp.path / "d" / "prepare.json", "{\"vocab_size\":256,\"tokenizer\":\"bytes\"}\n");
  const auto old = autoloco::read_prepared_data({(tmp.path / "d" / "val_000.bin").string()}, "v");
  REQUIRE(old);
  CHECK(old->val_bytes_per_token == 1.0);
  CHECK(!autoloco::read_prepared_data({(tmp.path / "none" / "x.bin").string()}, "v"));

  // A damaged prepare.json is named, not guessed around.
  write_text(tmp.path / "d" / "prepare.json", "{\"vocab_size\": \"many\"");
  CHECK_THROWS_WITH(autoloco::read_prepared_data({(tmp.path / "d" / "val_000.bin").string()}, "v"),
                    Catch::Contains("prepare.json"));
  // A model named anywhere but beside the file is not one autoloco-prepare wrote.
  write_text(tmp.path / "d" / "prepare.json",
             "{\"vocab_size\": 300, \"tokenizer\": \"sentencepiece\", "
             "\"tokenizer_model\": \"../../etc/passwd\"}");
  CHECK_THROWS_WITH(autoloco::read_prepared_data({(tmp.path / "d" / "val_000.bin").string()}, "v"),
                    Catch::Contains("not a file name"));
  write_text(tmp.path / "d" / "prepare.json", "{\"vocab_size\": \"many\"}");
  CHECK_THROWS_WITH(autoloco::read_prepared_data({(tmp.path / "d" / "val_000.bin").string()}, "v"),
                    Catch::Contains("vocab_size") && Catch::Contains("prepare.json"));
}
