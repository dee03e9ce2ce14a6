// End to end: autoloco-prepare --tokenizer hf with a tokenizer.json trained here by the Python
// tokenizers library (a ByteLevel BPE of 500 tokens, and a word-level one whose ids pass 65,536),
// checked against what that library gives in Python for the same documents: the shards' tokens,
// prepare.json's vocabulary (and the trainer's check of it), tokenizer.json beside the shards,
// the bytes per token; and the errors for a missing file, a missing interpreter, a file that is
// not a tokenizer.json. They need the Python of scripts/hf-env.sh, which scripts/setup.sh
// installs for the test presets, so without it they fail, saying so: they do not skip.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "../support/hf_python.hpp"
#include "../support/run_files.hpp"
#include "../support/split_tokens.hpp"
#include "../support/temp_dir.hpp"
#include "../support/tiny_corpus.hpp"
#include "autoloco/data/documents.hpp"
#include "autoloco/data/hf_tokenizer.hpp"
#include "autoloco/data/prepare.hpp"
#include "autoloco/data/prepared_data.hpp"
#include "autoloco/data/shard.hpp"
#include "autoloco/util/error.hpp"

namespace fs = std::filesystem;
using autoloco::test::contains;
using autoloco::test::hf_python;
using autoloco::test::json_number;
using autoloco::test::read_text;
using autoloco::test::run_command;
using autoloco::test::shell_quote;
using autoloco::test::write_text;

namespace {

// Trains a tokenizer.json on the files named: `bpe` (ByteLevel BPE, GPT-2's kind, 500 tokens)
// or `words` (a word-level vocabulary whose words have ids above 70,000).
constexpr const char* kTrainPy = R"PY(
import sys
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
kind, out, files = sys.argv[1], sys.argv[2], sys.argv[3:]
if kind == "bpe":
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train(files, trainers.BpeTrainer(
        vocab_size=500, show_progress=False, special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
else:
    words = sorted({w for f in files for w in open(f, encoding="utf-8").read().split()})
    vocab = {f"<unused{i}>": i for i in range(70000)}
    vocab["[UNK]"] = 70000
    vocab.update({w: 70001 + k for k, w in enumerate(words)})
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
tok.save(out)
)PY";

// The reference: each document (one file each, listed in DOCLIST) encoded on its own by the
// library, without special tokens; the output holds the vocabulary size, then the ids of "\n",
// then one line of ids per document.
constexpr const char* kEncodePy = R"PY(
import sys
from tokenizers import Tokenizer
tok = Tokenizer.from_file(sys.argv[1])
with open(sys.argv[3], "w") as out:
    print(tok.get_vocab_size(with_added_tokens=True), file=out)
    print(*tok.encode("\n", add_special_tokens=False).ids, file=out)
    for path in open(sys.argv[2], encoding="utf-8").read().splitlines():
        text = open(path, "rb").read().decode("utf-8")
        print(*tok.encode(text, add_special_tokens=False).ids, file=out)
)PY";

std::vector<uint32_t> parse_ids(const std::string& line) {
  std::vector<uint32_t> ids;
  std::istringstream in(line);
  for (uint64_t id = 0; in >> id;)
    ids.push_back(static_cast<uint32_t>(id));
  return ids;
}

// A corpus with multi-byte UTF-8 and words made of random syllables (enough pairs for a BPE of
// 500), in `files` files under dir/text.
void write_corpus(const std::string& dir, int files) {
  static const char* syllables[] = {"ka", "lo",  "mi", "ter", "un",  "ßa", "é",  "東",
                                    "ro", "vin", "qu", "ax",  "pel", "zo", "ün", "dra"};
  uint64_t x = 0x9e3779b97f4a7c15ULL;
  for (int f = 0; f < files; ++f) {
    std::string text = autoloco::test::tiny_text(120, f);
    text += "Ünïcödé: naïve café, Grüße — 東京 " + std::to_string(f * 7919) + " 🚀\n\n";
    for (int line = 0; line < 12; ++line) {
      for (int word = 0; word < 8; ++word) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        for (uint64_t k = 0; k < 1 + x % 4; ++k)
          text += syllables[(x >> (8 + 4 * k)) % 16];
        text += word == 7 ? "\n" : " ";
      }
    }
    text += "\n" + autoloco::test::tiny_text(60, f + 100);
    write_text(dir + "/text/doc" + std::to_string(f) + ".txt", text);
  }
}

struct Expected {
  int64_t vocab_size = 0;
  std::vector<uint32_t> train, val;
  uint64_t train_bytes = 0, val_bytes = 0;
  std::string val_text;  // the val documents, each followed by "\n"
};

// What autoloco-prepare should write for these options: its own document plan (the same split),
// each document encoded by the library in Python and followed by the ids of "\n".
Expected expected_tokens(const std::string& python, const std::string& tokenizer_json,
                         const autoloco::PrepareOptions& options, const std::string& work) {
  const autoloco::DocumentPlan plan =
      autoloco::plan_documents(options, fs::weakly_canonical(options.out_dir));
  REQUIRE(plan.documents.size() >= 5);
  std::string list;
  std::vector<std::string> texts;
  for (size_t i = 0; i < plan.documents.size(); ++i) {
    const auto& doc = plan.documents[i];
    const std::string whole = read_text(plan.files[doc.file].path.string());
    texts.push_back(whole.substr(doc.offset, doc.size));
    const std::string path = work + "/docs/" + std::to_string(i) + ".txt";
    write_text(path, texts.back());
    list += path + "\n";
  }
  write_text(work + "/docs.list", list);
  write_text(work + "/encode.py", kEncodePy);
  REQUIRE(run_command(shell_quote(python) + " " + shell_quote(work + "/encode.py") + " " +
                      shell_quote(tokenizer_json) + " " + shell_quote(work + "/docs.list") + " " +
                      shell_quote(work + "/ids.txt")) == 0);
  const std::vector<std::string> lines = autoloco::test::read_lines(work + "/ids.txt");
  REQUIRE(lines.size() == plan.documents.size() + 2);
  Expected e;
  e.vocab_size = std::stoll(lines[0]);
  const std::vector<uint32_t> separator = parse_ids(lines[1]);
  for (size_t i = 0; i < plan.documents.size(); ++i) {
    const bool val = plan.documents[i].val;
    auto& tokens = val ? e.val : e.train;
    const auto ids = parse_ids(lines[i + 2]);
    tokens.insert(tokens.end(), ids.begin(), ids.end());
    tokens.insert(tokens.end(), separator.begin(), separator.end());
    (val ? e.val_bytes : e.train_bytes) += plan.documents[i].size + 1;
    if (val) e.val_text += texts[i] + "\n";
  }
  REQUIRE_FALSE(e.val.empty());
  return e;
}

std::string prepare_command(const std::string& args, const std::string& log) {
  return std::string(AUTOLOCO_PREPARE_EXE) + " " + args + " > " + shell_quote(log) + " 2>&1";
}

}  // namespace

TEST_CASE("e2e: a tokenizer.json trained in Python gives the same tokens through autoloco-prepare",
          "[e2e]") {
  const autoloco::test::TempDir tmp("e2e-hf");
  const std::string dir = tmp.str();
  const std::string python = hf_python("tokenizers", dir + "/python-check.log");
  write_corpus(dir, 8);
  std::string files;
  for (int f = 0; f < 8; ++f)
    files += " " + shell_quote(dir + "/text/doc" + std::to_string(f) + ".txt");
  write_text(dir + "/train.py", kTrainPy);
  const std::string tokenizer_json = dir + "/tokenizer-bpe.json";
  REQUIRE(run_command(shell_quote(python) + " " + shell_quote(dir + "/train.py") + " bpe " +
                      shell_quote(tokenizer_json) + files) == 0);

  autoloco::PrepareOptions options;
  options.inputs = {dir + "/text"};
  options.out_dir = dir + "/data";
  options.val_fraction = 0.2;
  // By default: the interpreter of hf-env.sh, as the test found it.
  const std::string log = dir + "/prepare.log";
  const int prepared =
      run_command(prepare_command("--tokenizer hf --hf-tokenizer " + shell_quote(tokenizer_json) +
                                      " --val-fraction 0.2 --out " + shell_quote(options.out_dir) +
                                      " " + shell_quote(dir + "/text"),
                                  log));
  INFO(read_text(log));
  REQUIRE(prepared == 0);

  const Expected e = expected_tokens(python, tokenizer_json, options, dir);
  const std::string json = read_text(options.out_dir + "/prepare.json");
  INFO(json);
  CHECK(e.vocab_size == 500);
  CHECK(json_number(json, "vocab_size") == e.vocab_size);
  CHECK(contains(json, "\"tokenizer\":\"hf\""));
  CHECK(contains(json, "\"tokenizer_model\":\"tokenizer.json\""));
  CHECK(json_number(json, "token_bits") == 16);
  // OUT/tokenizer.json is the file, byte for byte (an HF export ships it).
  CHECK(read_text(options.out_dir + "/tokenizer.json") == read_text(tokenizer_json));

  // The shards hold what the library gives, document by document, in the split's order.
  CHECK(autoloco::Shard(options.out_dir + "/train_000.bin").width() == autoloco::TokenWidth::u16);
  const auto train = autoloco::test::split_tokens(options.out_dir, "train", e.vocab_size);
  const auto val = autoloco::test::split_tokens(options.out_dir, "val", e.vocab_size);
  CHECK(train.size() == e.train.size());
  CHECK(val.size() == e.val.size());
  CHECK(train == e.train);
  CHECK(val == e.val);

  // Bits per byte: the val split's bytes (documents and separators) over its tokens.
  CHECK(json_number(json, "val_bytes") == static_cast<double>(e.val_bytes));
  CHECK(json_number(json, "train_bytes") == static_cast<double>(e.train_bytes));
  CHECK(json_number(json, "val_tokens") == static_cast<double>(e.val.size()));
  CHECK(json_number(json, "val_bytes_per_token") ==
        Approx(static_cast<double>(e.val_bytes) / static_cast<double>(e.val.size())));
  CHECK(json_number(json, "val_bytes_per_token") > 1.5);  // subwords, not bytes

  // The trainer's vocabulary check reads it like the other tokenizers'.
  const auto prepared_data =
      autoloco::read_prepared_data({options.out_dir + "/train_000.bin"}, "data.train");
  REQUIRE(prepared_data.has_value());
  CHECK(prepared_data->tokenizer == "hf");
  CHECK(prepared_data->vocab_size == e.vocab_size);
  CHECK_NOTHROW(autoloco::check_prepared_vocab(*prepared_data, e.vocab_size, "data.train"));
  CHECK_THROWS_AS(autoloco::check_prepared_vocab(*prepared_data, 50257, "data.train"),
                  autoloco::ConfigError);
  CHECK_THROWS_WITH(autoloco::check_prepared_vocab(*prepared_data, 50257, "data.train"),
                    Catch::Contains("model.vocab_size is 50257") &&
                        Catch::Contains("hf tokenizer of vocabulary 500"));
  // A damaged copy of tokenizer.json is caught, as a damaged tokenizer.model is.
  write_text(options.out_dir + "/tokenizer.json", read_text(tokenizer_json) + " ");
  CHECK_THROWS_WITH(
      autoloco::read_prepared_data({options.out_dir + "/train_000.bin"}, "data.train"),
      Catch::Contains("tokenizer.json") && Catch::Contains("damaged"));
  write_text(options.out_dir + "/tokenizer.json", read_text(tokenizer_json));

  // The tokens decode back to the text (ByteLevel BPE round-trips), through the same helper.
  const auto tokenizer = autoloco::HfTokenizer::start(tokenizer_json, python, 1);
  CHECK(tokenizer->vocab_size() == e.vocab_size);
  CHECK(tokenizer->decode(val) == e.val_text);

  // Prepared again with the byte tokenizer over it (--overwrite): tokenizer.json goes.
  REQUIRE(run_command(prepare_command("--overwrite --val-fraction 0.2 --out " +
                                          shell_quote(options.out_dir) + " " +
                                          shell_quote(dir + "/text"),
                                      log)) == 0);
  CHECK_FALSE(fs::exists(options.out_dir + "/tokenizer.json"));
}

TEST_CASE("e2e: a tokenizer.json whose ids pass 65,536 writes uint32 shards of its ids", "[e2e]") {
  const autoloco::test::TempDir tmp("e2e-hf32");
  const std::string dir = tmp.str();
  const std::string python = hf_python("tokenizers", dir + "/python-check.log");
  write_corpus(dir, 30);
  std::string files;
  for (int f = 0; f < 30; ++f)
    files += " " + shell_quote(dir + "/text/doc" + std::to_string(f) + ".txt");
  write_text(dir + "/train.py", kTrainPy);
  const std::string tokenizer_json = dir + "/tokenizer-words.json";
  REQUIRE(run_command(shell_quote(python) + " " + shell_quote(dir + "/train.py") + " words " +
                      shell_quote(tokenizer_json) + files) == 0);

  autoloco::PrepareOptions options;
  options.inputs = {dir + "/text"};
  options.out_dir = dir + "/data";
  options.val_fraction = 0.2;
  const std::string log = dir + "/prepare.log";
  // The interpreter named, with more than one encoding thread and small shards.
  const int prepared = run_command(prepare_command(
      "--tokenizer hf --hf-tokenizer " + shell_quote(tokenizer_json) + " --hf-python " +
          shell_quote(python) + " --threads 2 --shard-tokens 1000 --val-fraction 0.2 --out " +
          shell_quote(options.out_dir) + " " + shell_quote(dir + "/text"),
      log));
  INFO(read_text(log));
  REQUIRE(prepared == 0);

  const Expected e = expected_tokens(python, tokenizer_json, options, dir);
  const std::string json = read_text(options.out_dir + "/prepare.json");
  INFO(json);
  CHECK(e.vocab_size > 70001);
  CHECK(json_number(json, "vocab_size") == e.vocab_size);
  CHECK(json_number(json, "token_bits") == 32);
  CHECK(json_number(json, "train_shards") > 1);
  CHECK(autoloco::Shard(options.out_dir + "/train_000.bin").width() == autoloco::TokenWidth::u32);
  const auto train = autoloco::test::split_tokens(options.out_dir, "train", e.vocab_size);
  const auto val = autoloco::test::split_tokens(options.out_dir, "val", e.vocab_size);
  CHECK(train == e.train);
  CHECK(val == e.val);
  CHECK(*std::min_element(train.begin(), train.end()) >= 70000);  // all above 65,535
  CHECK(json_number(json, "val_bytes_per_token") ==
        Approx(static_cast<double>(e.val_bytes) / static_cast<double>(e.val.size())));
}

TEST_CASE("e2e: autoloco-prepare --tokenizer hf refuses a missing file or interpreter clearly",
          "[e2e]") {
  const autoloco::test::TempDir tmp("e2e-hf-errors");
  const std::string dir = tmp.str();
  const std::string python = hf_python("tokenizers", dir + "/python-check.log");
  write_corpus(dir, 3);
  const std::string out = dir + "/data";
  const std::string log = dir + "/prepare.log";
  const std::string input = " --out " + shell_quote(out) + " " + shell_quote(dir + "/text");
  write_text(dir + "/train.py", kTrainPy);
  const std::string tokenizer_json = dir + "/tokenizer.json";
  REQUIRE(run_command(shell_quote(python) + " " + shell_quote(dir + "/train.py") + " bpe " +
                      shell_quote(tokenizer_json) + " " + shell_quote(dir + "/text/doc0.txt")) ==
          0);

  SECTION("the tokenizer.json is missing") {
    CHECK(run_command(prepare_command(
              "--tokenizer hf --hf-tokenizer " + shell_quote(dir + "/nope/tokenizer.json") + input,
              log)) == 1);
    const std::string text = read_text(log);
    INFO(text);
    CHECK(contains(text, dir + "/nope/tokenizer.json"));
    CHECK(contains(text, "cannot be read"));
  }
  SECTION("the file is not a tokenizer.json") {
    write_text(dir + "/other.json", "{\"model\": 3}");
    CHECK(run_command(prepare_command(
              "--tokenizer hf --hf-tokenizer " + shell_quote(dir + "/other.json") + input, log)) ==
          1);
    const std::string text = read_text(log);
    INFO(text);
    CHECK(contains(text, dir + "/other.json"));
    CHECK(contains(text, "is it a tokenizer.json?"));
  }
  SECTION("the interpreter named is missing") {
    CHECK(run_command(prepare_command("--tokenizer hf --hf-tokenizer " +
                                          shell_quote(tokenizer_json) + " --hf-python " +
                                          shell_quote(dir + "/venv/bin/python") + input,
                                      log)) == 1);
    const std::string text = read_text(log);
    INFO(text);
    CHECK(contains(text, dir + "/venv/bin/python"));
    CHECK(contains(text, "is missing"));
    CHECK(contains(text, "run scripts/hf-env.sh"));
  }
  SECTION("the default interpreter is missing (no venv of hf-env.sh)") {
    CHECK(
        run_command(
            "env -u AUTOLOCO_HF_PYTHON AUTOLOCO_TORCH_VENV=" + shell_quote(dir + "/no-venv") + " " +
            prepare_command("--tokenizer hf --hf-tokenizer " + shell_quote(tokenizer_json) + input,
                            log)) == 1);
    const std::string text = read_text(log);
    INFO(text);
    CHECK(contains(text, dir + "/no-venv/bin/python"));
    CHECK(contains(text, "run scripts/hf-env.sh"));
  }
  SECTION("the interpreter is not Python") {
    CHECK(
        run_command(prepare_command("--tokenizer hf --hf-tokenizer " + shell_quote(tokenizer_json) +
                                        " --hf-python /bin/false" + input,
                                    log)) == 1);
    const std::string text = read_text(log);
    INFO(text);
    CHECK(contains(text, "exited with status 1"));
    CHECK(contains(text, "run scripts/hf-env.sh"));
  }
  SECTION("an input that is not UTF-8") {
    write_text(dir + "/text/latin1.txt", "caf\xe9 cr\xe8me\n");
    CHECK(run_command(prepare_command(
              "--tokenizer hf --hf-tokenizer " + shell_quote(tokenizer_json) + input, log)) == 1);
    const std::string text = read_text(log);
    INFO(text);
    CHECK(contains(text, dir + "/text/latin1.txt"));
    CHECK(contains(text, "not UTF-8"));
  }
  SECTION("--hf-tokenizer without --tokenizer hf, and hf without a file, are usage errors") {
    CHECK(run_command(
              prepare_command("--hf-tokenizer " + shell_quote(tokenizer_json) + input, log)) == 2);
    CHECK(contains(read_text(log), "need --tokenizer hf"));
    CHECK(run_command(prepare_command("--tokenizer hf" + input, log)) == 2);
    CHECK(contains(read_text(log), "--tokenizer hf needs --hf-tokenizer"));
  }
  // Nothing was written by a refused run.
  CHECK_FALSE(fs::exists(out + "/prepare.json"));
}
