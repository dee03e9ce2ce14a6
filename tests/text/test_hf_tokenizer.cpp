// Unit tests of the parts of the Hugging Face tokenizer path that need no Python: the UTF-8
// check that names a bad input file, and the options prepare refuses before any work. The
// encoding itself is checked against the Python library in tests/e2e/test_hf_tokenizer.cpp.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>

#include "../support/run_files.hpp"
#include "../support/temp_dir.hpp"
#include "autoloco/data/hf_tokenizer.hpp"
#include "autoloco/data/prepare.hpp"
#include "autoloco/util/error.hpp"

namespace fs = std::filesystem;
using autoloco::utf8_valid_prefix;

TEST_CASE("utf8_valid_prefix finds the first byte that is not UTF-8", "[data][hf]") {
  CHECK(utf8_valid_prefix("") == 0);
  CHECK(utf8_valid_prefix("plain ascii\n") == 12);
  const std::string mixed = "caf\xc3\xa9 \xe6\x9d\xb1 \xf0\x9f\x9a\x80";  // é, 東, 🚀
  CHECK(utf8_valid_prefix(mixed) == mixed.size());
  CHECK(utf8_valid_prefix("caf\xe9 latin-1") == 3);       // a lone lead byte
  CHECK(utf8_valid_prefix("ab\x80") == 2);                // a lone continuation byte
  CHECK(utf8_valid_prefix("ab\xc3") == 2);                // cut short at the end
  CHECK(utf8_valid_prefix("a\xc0\xaf") == 1);             // overlong '/'
  CHECK(utf8_valid_prefix("a\xe0\x80\xaf") == 1);         // overlong, three bytes
  CHECK(utf8_valid_prefix("a\xed\xa0\x80") == 1);         // a surrogate
  CHECK(utf8_valid_prefix("a\xf4\x90\x80\x80") == 1);     // above U+10FFFF
  CHECK(utf8_valid_prefix("a\xf0\x9f\x9a") == 1);         // four bytes, cut short
  CHECK(utf8_valid_prefix("\xef\xbb\xbfok") == 5);        // a BOM is a character
  CHECK(utf8_valid_prefix(std::string("a\0b", 3)) == 3);  // NUL is valid UTF-8
}

TEST_CASE("prepare refuses hf options that do not fit, before any work", "[data][hf]") {
  const autoloco::test::TempDir tmp;
  autoloco::test::write_text((tmp.path / "in" / "a.txt").string(), "some text\n");
  autoloco::PrepareOptions options;
  options.inputs = {(tmp.path / "in").string()};
  options.out_dir = (tmp.path / "out").string();
  options.tokenizer = "hf";
  CHECK_THROWS_WITH(autoloco::prepare_corpus(options), Catch::Contains("--hf-tokenizer"));
  options.hf_tokenizer = (tmp.path / "missing.json").string();
  options.vocab_size = 300;
  CHECK_THROWS_WITH(autoloco::prepare_corpus(options),
                    Catch::Contains("--tokenizer sentencepiece"));
  options.vocab_size = 0;
  CHECK_THROWS_WITH(autoloco::prepare_corpus(options),
                    Catch::Contains("missing.json") && Catch::Contains("cannot be read"));
  options.tokenizer = "bytes";
  CHECK_THROWS_WITH(autoloco::prepare_corpus(options), Catch::Contains("--tokenizer hf"));
  options.tokenizer = "tiktoken";
  options.hf_tokenizer.clear();
  CHECK_THROWS_WITH(autoloco::prepare_corpus(options),
                    Catch::Contains("bytes, sentencepiece or hf"));
  CHECK_FALSE(fs::exists(tmp.path / "out"));
}
