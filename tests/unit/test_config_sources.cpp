// data.sources: reading a mixture, its defaults, its round trip and the errors that name the key.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "../support/temp_dir.hpp"
#include "autoloco/config/config.hpp"
#include "autoloco/data/mixture.hpp"
#include "autoloco/data/shard.hpp"
#include "autoloco/util/error.hpp"

using namespace autoloco;
using Catch::Matchers::Contains;

namespace {

const char* kMixture = R"(data:
  sources:
    - train: data/web
      weight: 0.7
    - name: code
      train: [data/code/train_*.bin]
      val: data/code/val_*.bin
      weight: 0.3
    - train: data/books/train_00*.bin
      val: data/books/val_*.bin
)";

std::string error_of(const std::string& yaml, const std::vector<std::string>& sets = {}) {
  try {
    parse_config(yaml, sets);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("config: data.sources reads names, globs, vals and weights with defaults",
          "[config][mixture]") {
  const Config c = parse_config(kMixture);
  REQUIRE(c.data.sources.size() == 3);
  CHECK(c.data.sources[0].name == "web");  // the directory's name
  CHECK(c.data.sources[0].train == std::vector<std::string>{"data/web"});
  CHECK(c.data.sources[0].val.empty());
  CHECK(c.data.sources[0].weight == Approx(0.7));
  CHECK(c.data.sources[1].name == "code");
  CHECK(c.data.sources[1].val == std::vector<std::string>{"data/code/val_*.bin"});
  CHECK(c.data.sources[2].name == "books");  // the glob's directory
  CHECK(c.data.sources[2].weight == 1.0);
  // The single-split keys give way: their defaults are not a second corpus.
  CHECK(c.data.train.empty());
  CHECK(c.data.val.empty());
}

TEST_CASE("config: a mixture printed as YAML loads back to the same config", "[config][mixture]") {
  const Config a = parse_config(kMixture);
  const std::string yaml = to_yaml(a);
  const Config b = parse_config(yaml);
  CHECK(to_yaml(b) == yaml);
  REQUIRE(b.data.sources.size() == 3);
  CHECK(b.data.sources[1].train == a.data.sources[1].train);
  // --set replaces the list as a whole.
  const Config c = parse_config("", {"data.sources=[{train: d/a, weight: 2}, {train: d/b}]"});
  REQUIRE(c.data.sources.size() == 2);
  CHECK(c.data.sources[1].name == "b");
  // --set of one form replaces the other form of the file: a mixture over a one-corpus config,
  // and back.
  const std::string one_corpus = "data:\n  train: x/train_*.bin\n  val: x/val_*.bin\n";
  const Config mixed = parse_config(one_corpus, {"data.sources=[{train: d/a}]"});
  CHECK(mixed.data.sources.size() == 1);
  CHECK(mixed.data.train.empty());
  const Config single = parse_config(kMixture, {"data.train=y/train_*.bin", "data.val=y/v.bin"});
  CHECK(single.data.sources.empty());
  CHECK(single.data.train == std::vector<std::string>{"y/train_*.bin"});
}

TEST_CASE("config: data.sources errors name the source's key and say what to do",
          "[config][mixture]") {
  CHECK_THAT(error_of(std::string(kMixture) + "  train: x.bin\n"),
             Contains("data.train") && Contains("not both"));
  CHECK_THAT(error_of("data:\n  sources:\n    - weight: 1\n"),
             Contains("data.sources[0].train is missing"));
  CHECK_THAT(error_of("data:\n  sources:\n    - train: a\n      wieght: 2\n"),
             Contains("data.sources[0]") && Contains("'wieght'") && Contains("weight"));
  CHECK_THAT(error_of("data:\n  sources:\n    - train: a\n      weight: 0\n"),
             Contains("data.sources[0].weight") && Contains("positive"));
  CHECK_THAT(error_of("data:\n  sources:\n    - train: d/a\n    - train: e/a\n"),
             Contains("data.sources[1].name") && Contains("'a' names two sources"));
  CHECK_THAT(error_of("data:\n  sources:\n    - name: 'web text'\n      train: d\n"),
             Contains("data.sources[0].name"));
  CHECK_THAT(error_of("data:\n  sources: data/web\n"), Contains("expected a list of sources"));
}

TEST_CASE("mixture: a prepared directory stands for its train and val shards",
          "[config][mixture]") {
  test::TempDir dir("sources");
  const std::string web = dir.path.string();
  DataSource s;
  s.name = "web";
  s.train = {web};
  SourcePatterns p = source_patterns(s, "data.sources[0]");
  CHECK(p.train == std::vector<std::string>{web + "/train_*.bin"});
  CHECK(p.val == std::vector<std::string>{web + "/val_*.bin"});
  // Shard globs leave the val split to be named.
  s.train = {web + "/train_00*.bin"};
  CHECK_THROWS_WITH(source_patterns(s, "data.sources[0]"),
                    Contains("data.sources[0].val is missing") && Contains("'web'"));
  s.val = {web};
  p = source_patterns(s, "data.sources[0]");
  CHECK(p.val == std::vector<std::string>{web + "/val_*.bin"});
}

namespace {

// A prepared directory of one train and one val shard of byte tokens, and its prepare.json.
void write_prepared(const std::filesystem::path& dir, const std::string& prepare_json) {
  std::filesystem::create_directories(dir);
  const std::vector<uint32_t> tokens(200, 65);
  write_shard((dir / "train_000.bin").string(), tokens, TokenWidth::u16);
  write_shard((dir / "val_000.bin").string(), tokens, TokenWidth::u16);
  std::ofstream(dir / "prepare.json") << prepare_json;
}

}  // namespace

TEST_CASE("mixture: sources open with normalised weights, and one tokenizer for all",
          "[config][mixture]") {
  test::TempDir dir("mixture-open");
  write_prepared(dir.path / "web",
                 R"({"vocab_size":256,"tokenizer":"bytes","val_bytes_per_token":1.0})");
  write_prepared(dir.path / "code",
                 R"({"vocab_size":256,"tokenizer":"bytes","val_bytes_per_token":1.0})");
  DataConfig data;
  data.train.clear();
  data.val.clear();
  data.sources = {DataSource{"web", {(dir.path / "web").string()}, {}, 3.0},
                  DataSource{"code", {(dir.path / "code").string()}, {}, 1.0}};
  const Mixture m(data, 256);
  REQUIRE(m.size() == 2);
  CHECK(m.mixed());
  CHECK(m[0].weight == 0.75);
  CHECK(m[1].weight == 0.25);
  CHECK(m.train_tokens() == 400);
  CHECK(m.mean_loss({2.0, 4.0}) == Approx(2.5));
  // Bits over bytes: (0.75 x 2 + 0.25 x 4) / ln 2 over 1 byte per token.
  CHECK(m.bits_per_byte({2.0, 4.0}) == Approx(2.5 / std::log(2.0)));

  // A source prepared with another tokenizer is refused, naming both.
  write_prepared(dir.path / "other",
                 R"({"vocab_size":256,"tokenizer":"hf","tokenizer_model":"tokenizer.json"})");
  std::ofstream(dir.path / "other" / "tokenizer.json") << "{}";
  data.sources[1].train = {(dir.path / "other").string()};
  CHECK_THROWS_WITH(Mixture(data, 256), Contains("data.sources[0].train (web)") &&
                                            Contains("data.sources[1].train (code)") &&
                                            Contains("different tokenizers"));
}
