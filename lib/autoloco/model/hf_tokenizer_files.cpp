#include "autoloco/model/hf_tokenizer_files.hpp"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <initializer_list>
#include <optional>
#include <string_view>
#include <utility>

#include "autoloco/util/error.hpp"
#include "autoloco/util/file_bytes.hpp"
#include "autoloco/util/json.hpp"

namespace autoloco {
namespace {

// The byte tokenizer's document separator, "\n": its id and its piece in tokenizer.json.
constexpr int64_t kByteSeparatorId = 10;
constexpr const char* kByteSeparatorPiece = "<0x0A>";

// ---- tokenizer.json: the raw text of one top-level value, without parsing the rest (a Llama 3
// tokenizer.json holds 128k pieces and 280k merges; only its added tokens are read) ----

class JsonScan {
 public:
  JsonScan(std::string_view text, const std::string& what) : text_(text), what_(what) {}

  std::optional<std::string_view> top_level(std::string_view key) {
    space();
    expect('{');
    std::optional<std::string_view> found;
    space();
    if (peek() == '}') return found;
    while (true) {
      space();
      const size_t key_begin = pos_;
      skip_string();
      const std::string_view name = text_.substr(key_begin + 1, pos_ - key_begin - 2);
      space();
      expect(':');
      space();
      const size_t value_begin = pos_;
      skip_value();
      if (name == key) found = text_.substr(value_begin, pos_ - value_begin);
      space();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      expect('}');
      return found;
    }
  }

 private:
  char peek() const {
    if (pos_ >= text_.size()) bad();
    return text_[pos_];
  }
  void expect(char c) {
    if (peek() != c) bad();
    ++pos_;
  }
  void space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n' ||
                                   text_[pos_] == '\r' || text_[pos_] == '\t'))
      ++pos_;
  }
  void skip_string() {
    expect('"');
    while (true) {
      const char c = peek();
      ++pos_;
      if (c == '\\') {
        peek();
        ++pos_;
      } else if (c == '"') {
        return;
      }
    }
  }
  void skip_value() {
    const char c = peek();
    if (c == '"') {
      skip_string();
    } else if (c == '{' || c == '[') {
      int depth = 0;
      do {
        const char d = peek();
        if (d == '"') {
          skip_string();
          continue;
        }
        if (d == '{' || d == '[') ++depth;
        if (d == '}' || d == ']') --depth;
        ++pos_;
      } while (depth > 0);
    } else {
      const size_t begin = pos_;
      while (pos_ < text_.size() && text_[pos_] != ',' && text_[pos_] != '}' &&
             text_[pos_] != ']' && text_[pos_] != ' ' && text_[pos_] != '\n' &&
             text_[pos_] != '\r' && text_[pos_] != '\t')
        ++pos_;
      if (pos_ == begin) bad();
    }
  }
  [[noreturn]] void bad() const {
    throw DataError(fmt::format(
        "{} is not valid JSON (at byte {} of {}); is it a tokenizer.json? Prepare the data again",
        what_, pos_, text_.size()));
  }

  std::string_view text_;
  const std::string& what_;
  size_t pos_ = 0;
};

struct AddedToken {
  int64_t id = -1;
  std::string content;
  bool special = false;
};

std::vector<AddedToken> added_tokens(const std::string& json, const std::string& what) {
  std::vector<AddedToken> out;
  const auto raw = JsonScan(json, what).top_level("added_tokens");
  if (!raw || *raw == "null") return out;
  const auto bad = [&](const std::string& why) {
    return DataError(fmt::format(
        "{}: \"added_tokens\" is not a list of tokens with an id and a content ({}); is it a "
        "tokenizer.json?",
        what, why));
  };
  YAML::Node list;
  try {
    list = YAML::Load(std::string(*raw));  // JSON is YAML's flow style
  } catch (const YAML::Exception& e) {
    throw bad(e.what());
  }
  if (!list.IsSequence()) throw bad("not a list");
  try {
    for (const YAML::Node& t : list) {
      AddedToken token;
      token.id = t["id"].as<int64_t>();
      token.content = t["content"].as<std::string>();
      token.special = t["special"] && t["special"].as<bool>();
      out.push_back(std::move(token));
    }
  } catch (const YAML::Exception& e) {
    throw bad(e.what());
  }
  return out;
}

// The first special added token whose content is one of `names`, in the order of `names`.
const AddedToken* find_special(const std::vector<AddedToken>& tokens,
                               std::initializer_list<const char*> names) {
  for (const char* name : names) {
    for (const AddedToken& t : tokens) {
      if (t.special && t.content == name) return &t;
    }
  }
  return nullptr;
}

std::string read_model_file(const std::string& path) {
  auto bytes = read_file_bytes(path);
  if (!bytes) {
    throw DataError(fmt::format(
        "tokenizer file '{}' cannot be read; prepare the data again or name another prepared "
        "data directory",
        path));
  }
  return std::move(*bytes);
}

void add_token(JsonObject& config, const char* key, const std::optional<std::string>& piece) {
  if (piece) {
    config.add(key, *piece);
  } else {
    config.add_null(key);
  }
}

HfTokenizerFiles sentencepiece_files(const std::string& path, int64_t model_max_length) {
  const std::string model = read_model_file(path);
  const SentencePieceModelInfo info =
      parse_sentencepiece_model(model, fmt::format("tokenizer model '{}'", path));
  HfTokenizerFiles out;
  // transformers 5's LlamaTokenizer is a BPE over the pieces with byte fallback, whitespace as
  // "▁", no normaliser and at most a dummy prefix: SentencePiece's own encoding for such a model.
  const bool llama = info.model_type == 2 && !info.precompiled_charsmap &&
                     !info.remove_extra_whitespaces && info.escape_whitespaces &&
                     !info.treat_whitespace_as_suffix;
  out.tokenizer_class = llama ? "LlamaTokenizer" : "PreTrainedTokenizerFast";
  JsonObject config;
  config.add("tokenizer_class", out.tokenizer_class);
  // autoloco-prepare adds neither.
  config.add("add_bos_token", false);
  config.add("add_eos_token", false);
  if (llama) {
    config.add("add_prefix_space", info.add_dummy_prefix);
    config.add("legacy", false);
  }
  // SentencePiece reads "<s>" in a text as three characters, and so did autoloco-prepare.
  config.add("split_special_tokens", true);
  int64_t bos_id = info.piece(info.bos_id) ? info.bos_id : -1;
  int64_t eos_id = info.piece(info.eos_id) ? info.eos_id : -1;
  if (bos_id < 0 && eos_id < 0) {
    // A model without either (a given --sp-model): the newline's byte piece, the document
    // separator, stands for both, as for the byte tokenizer.
    for (size_t id = 0; id < info.pieces.size(); ++id) {
      if (info.pieces[id].piece == kByteSeparatorPiece) bos_id = eos_id = static_cast<int64_t>(id);
    }
  }
  add_token(config, "bos_token", info.piece(bos_id));
  add_token(config, "eos_token", info.piece(eos_id));
  add_token(config, "unk_token", info.piece(info.unk_id));
  add_token(config, "pad_token", info.piece(info.pad_id));
  config.add("clean_up_tokenization_spaces", false);
  config.add("model_max_length", model_max_length);
  if (bos_id >= 0) out.tokens.bos = bos_id;
  if (eos_id >= 0) out.tokens.eos = eos_id;
  if (!llama) {
    out.notes.push_back(fmt::format(
        "tokenizer.model is a {} model{}: tokenizer_config.json names PreTrainedTokenizerFast, "
        "which transformers builds from the model's own settings{}",
        info.model_type_name(),
        info.precompiled_charsmap
            ? fmt::format(" with normalisation rules ({})", info.normalizer_name)
            : "",
        info.model_type == 1
            ? "; its unigram search gives other ids than SentencePiece's for some texts (it "
              "breaks ties between splits of equal score otherwise, and reads \"<s>\" in a text "
              "as the control token): autoloco-prepare --sp-model-type bpe (the default) matches "
              "exactly"
            : ""));
  }
  if (info.add_dummy_prefix) {
    out.notes.push_back(
        "tokenizer.model adds a dummy prefix (a space before the text): autoloco-prepare encoded "
        "each line with one, transformers gives one to the start of a text only, so ids after a "
        "newline may differ from the shards'");
  }
  out.files.push_back({"tokenizer.model", model});
  out.files.push_back({"tokenizer_config.json", config.pretty()});
  return out;
}

HfTokenizerFiles tokenizer_json_files(const std::string& path, int64_t model_max_length) {
  const std::string json = read_model_file(path);
  const std::vector<AddedToken> tokens =
      added_tokens(json, fmt::format("tokenizer file '{}'", path));
  HfTokenizerFiles out;
  out.tokenizer_class = "PreTrainedTokenizerFast";
  const AddedToken* bos =
      find_special(tokens, {"<|begin_of_text|>", "<s>", "<bos>", "<|startoftext|>"});
  const AddedToken* eos =
      find_special(tokens, {"<|end_of_text|>", "</s>", "<eos>", "<|endoftext|>"});
  // GPT-2 (and Qwen) mark both ends with <|endoftext|>.
  if (!bos && eos && eos->content == "<|endoftext|>") bos = eos;
  JsonObject config;
  config.add("tokenizer_class", out.tokenizer_class);
  // autoloco-prepare encodes without special tokens; a post-processor of tokenizer.json that adds
  // some (Llama 3's BOS) is replaced by one that adds none.
  config.add("add_bos_token", false);
  config.add("add_eos_token", false);
  add_token(config, "bos_token", bos ? std::optional(bos->content) : std::nullopt);
  add_token(config, "eos_token", eos ? std::optional(eos->content) : std::nullopt);
  config.add("clean_up_tokenization_spaces", false);
  config.add("model_max_length", model_max_length);
  if (bos) out.tokens.bos = bos->id;
  if (eos) out.tokens.eos = eos->id;
  if (!bos && !eos) {
    out.notes.push_back(
        "tokenizer.json declares no BOS or EOS token: tools that need one (lm-evaluation-harness's "
        "prefix token) must be given it, e.g. lm_eval --model_args ...,prefix_token_id=ID with "
        "the id of a newline");
  }
  out.files.push_back({"tokenizer.json", json});
  out.files.push_back({"tokenizer_config.json", config.pretty()});
  return out;
}

HfTokenizerFiles byte_files(int64_t model_max_length) {
  HfTokenizerFiles out;
  out.tokenizer_class = "PreTrainedTokenizerFast";
  JsonObject config;
  config.add("tokenizer_class", out.tokenizer_class);
  config.add("add_bos_token", false);
  config.add("add_eos_token", false);
  // The document separator, a newline, is what began and ended every document the model saw:
  // it is the BOS and the EOS (tools need one: lm-evaluation-harness's prefix token is the BOS,
  // else the EOS). "<0x0A>" in a text stays text, as autoloco-prepare read it.
  config.add("bos_token", kByteSeparatorPiece);
  config.add("eos_token", kByteSeparatorPiece);
  config.add("split_special_tokens", true);
  out.tokens.bos = kByteSeparatorId;
  out.tokens.eos = kByteSeparatorId;
  config.add("clean_up_tokenization_spaces", false);
  config.add("model_max_length", model_max_length);
  out.files.push_back({"tokenizer.json", byte_level_tokenizer_json()});
  out.files.push_back({"tokenizer_config.json", config.pretty()});
  return out;
}

}  // namespace

HfTokenizerFiles hf_tokenizer_files(const std::string& kind, const std::string& model_file,
                                    int64_t model_max_length) {
  if (kind == "sentencepiece") return sentencepiece_files(model_file, model_max_length);
  if (kind == "hf") return tokenizer_json_files(model_file, model_max_length);
  if (kind == "bytes") return byte_files(model_max_length);
  throw Error(fmt::format("HF export: unknown tokenizer '{}' (bytes, sentencepiece or hf)", kind));
}

std::string byte_level_tokenizer_json() {
  JsonObject vocab;
  for (int64_t b = 0; b < 256; ++b)
    vocab.add(fmt::format("<0x{:02X}>", b), b);
  JsonObject model;
  model.add("type", "BPE");
  model.add_null("dropout");
  model.add_null("unk_token");
  model.add_null("continuing_subword_prefix");
  model.add_null("end_of_word_suffix");
  model.add("fuse_unk", false);
  model.add("byte_fallback", true);
  model.add("ignore_merges", false);
  model.add("vocab", vocab);
  model.add("merges", std::vector<std::string>{});
  JsonObject decoder;
  decoder.add("type", "Sequence");
  decoder.add("decoders", std::vector<JsonObject>{JsonObject().add("type", "ByteFallback"),
                                                  JsonObject().add("type", "Fuse")});
  JsonObject tokenizer;
  tokenizer.add("version", "1.0");
  tokenizer.add_null("truncation");
  tokenizer.add_null("padding");
  tokenizer.add("added_tokens", std::vector<JsonObject>{});
  tokenizer.add_null("normalizer");
  tokenizer.add_null("pre_tokenizer");
  tokenizer.add_null("post_processor");
  tokenizer.add("decoder", decoder);
  tokenizer.add("model", model);
  return tokenizer.pretty();
}

}  // namespace autoloco
