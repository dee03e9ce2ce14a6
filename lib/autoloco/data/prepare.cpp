// Corpus preparation: plan the documents, make the tokenizer, tokenize on every core, write
// shards, tokenizer.model (or tokenizer.json) and prepare.json.
#include "autoloco/data/prepare.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <future>
#include <limits>
#include <memory>
#include <set>
#include <utility>

#include "autoloco/data/document_source.hpp"
#include "autoloco/data/documents.hpp"
#include "autoloco/data/hf_tokenizer.hpp"
#include "autoloco/data/parallel_encode.hpp"
#include "autoloco/data/sentencepiece_tokenizer.hpp"
#include "autoloco/data/shard.hpp"
#include "autoloco/data/tokenizer.hpp"
#include "autoloco/util/crc32.hpp"
#include "autoloco/util/durable_file.hpp"
#include "autoloco/util/error.hpp"
#include "autoloco/util/json.hpp"
#include "autoloco/util/timer.hpp"

namespace autoloco {
namespace fs = std::filesystem;
namespace {

// Documents are read and tokenized in batches of about this many bytes per thread.
constexpr uint64_t kBatchBytesPerThread = uint64_t{4} << 20;
constexpr const char* kTokenizerModel = "tokenizer.model";
constexpr const char* kTokenizerJson = "tokenizer.json";
constexpr uint64_t kMinDocBytes = 64;

bool is_prepare_output(const std::string& name) {
  const bool shard = (name.rfind("train_", 0) == 0 || name.rfind("val_", 0) == 0) &&
                     has_suffix(name, {".bin", ".bin.tmp"});
  for (const char* own : {"prepare.json", kTokenizerModel, kTokenizerJson}) {
    if (name == own || name == std::string(own) + ".tmp") return true;
  }
  return shard;
}

// Accumulates one split's tokens and cuts them into shards of at most shard_tokens.
class SplitWriter {
 public:
  SplitWriter(fs::path dir, std::string prefix, uint64_t shard_tokens, TokenWidth width,
              int64_t vocab_size)
      : counts(static_cast<size_t>(vocab_size)),
        dir_(std::move(dir)),
        prefix_(std::move(prefix)),
        shard_tokens_(shard_tokens),
        width_(width) {}

  void add(const std::vector<uint32_t>& ids) {
    for (uint32_t id : ids)
      push(id);
  }
  void push(uint32_t token) {
    buffer_.push_back(token);
    ++counts[token];
    ++tokens;
    if (buffer_.size() == shard_tokens_) flush();
  }
  void flush() {
    if (buffer_.empty()) return;
    const fs::path path = dir_ / fmt::format("{}_{:03d}.bin", prefix_, shards.size());
    write_shard(path.string(), buffer_, width_);
    shards.push_back(path.string());
    buffer_.clear();
  }

  std::vector<uint64_t> counts;
  uint64_t tokens = 0;
  uint64_t bytes = 0;
  size_t documents = 0;
  std::vector<std::string> shards;

 private:
  fs::path dir_;
  std::string prefix_;
  uint64_t shard_tokens_;
  TokenWidth width_;
  std::vector<uint32_t> buffer_;
};

// Streams the lines of the training documents, for SentencePiece's trainer.
class TrainingLines {
 public:
  TrainingLines(const DocumentPlan& plan, const PrepareOptions& options)
      : source_(plan, options, skipped_, true) {}
  bool next(std::string& line) {
    while (pos_ >= document_.text.size()) {
      if (!source_.next(document_)) return false;
      pos_ = 0;
    }
    const std::string& text = document_.text;
    const size_t end = std::min(text.find('\n', pos_), text.size());
    line.assign(text, pos_, end - pos_);
    pos_ = end + 1;
    return true;
  }

 private:
  SkippedRows skipped_;  // counted again, and reported, when the documents are tokenized
  DocumentSource source_;
  DocumentText document_;
  size_t pos_ = 0;
};

std::unique_ptr<Tokenizer> make_tokenizer(const PrepareOptions& options, const DocumentPlan& plan,
                                          PrepareReport& report) {
  if (options.tokenizer == "bytes") return std::make_unique<ByteTokenizer>();
  if (options.tokenizer == "hf") {
    auto hf = HfTokenizer::start(options.hf_tokenizer, options.hf_python,
                                 tokenizer_threads(options.threads));
    report.hf_library_version = hf->library_version();
    return hf;
  }
  std::unique_ptr<SentencePieceTokenizer> sp;
  if (!options.sp_model.empty()) {
    sp = SentencePieceTokenizer::from_file(options.sp_model);
    report.sp_model_type = "given";
  } else {
    SentencePieceTrainOptions train;
    train.vocab_size = options.vocab_size;
    train.model_type = options.sp_model_type;
    train.threads = tokenizer_threads(options.threads);
    train.seed = static_cast<uint32_t>(options.seed);
    TrainingLines lines(plan, options);
    const Timer timer;
    const std::string model =
        train_sentencepiece(train, [&lines](std::string& line) { return lines.next(line); });
    report.train_tokenizer_s = timer.seconds();
    sp = SentencePieceTokenizer::from_serialized(model, "the trained tokenizer model");
    report.sp_model_type = options.sp_model_type;
  }
  if (!sp->byte_fallback()) {
    report.warnings.push_back(
        "the tokenizer model has no byte fallback: text outside its pieces (newlines among "
        "them, unless it has a piece for one) becomes <unk>; bits per byte still count the "
        "text's bytes");
  }
  return sp;
}

// The tokens written after each document: a newline, as the byte tokenizer writes it.
std::vector<uint32_t> separator_tokens(const Tokenizer& tokenizer) {
  std::vector<uint32_t> tokens;
  tokenizer.encode("\n", tokens);
  return tokens;
}

// One batch of documents, read while the one before it is tokenized.
struct Batch {
  std::vector<std::string> texts;
  std::vector<DocumentText> documents;  // their split and origin (text moved to texts)
};

Batch read_batch(DocumentSource& source, uint64_t bytes) {
  Batch batch;
  uint64_t size = 0;
  DocumentText document;
  while ((batch.texts.empty() || size < bytes) && source.next(document)) {
    size += document.text.size();
    batch.texts.push_back(std::move(document.text));
    document.text.clear();
    batch.documents.push_back(document);
  }
  return batch;
}

// Encodes every document on `threads` threads, batch by batch, and hands the tokens to the
// writers in document order, so the shards do not depend on the number of threads. The next
// batch is read (decompressed, parsed) on a thread of its own meanwhile.
void tokenize_documents(DocumentSource& source, const Tokenizer& tokenizer, int threads,
                        SplitWriter& train, SplitWriter& val, PrepareReport& report) {
  const std::vector<uint32_t> separator = separator_tokens(tokenizer);
  // The hf tokenizer takes UTF-8 text only (Python strings): name the file that is not.
  const bool utf8_only = dynamic_cast<const HfTokenizer*>(&tokenizer) != nullptr;
  const uint64_t batch_bytes = kBatchBytesPerThread * static_cast<uint64_t>(threads);
  auto read_next = [&source, batch_bytes] {
    return std::async(std::launch::async, read_batch, std::ref(source), batch_bytes);
  };
  std::future<Batch> pending = read_next();
  while (true) {
    const Batch batch = pending.get();
    if (batch.texts.empty()) break;
    pending = read_next();
    for (size_t i = 0; i < batch.texts.size() && utf8_only; ++i) {
      const size_t valid = utf8_valid_prefix(batch.texts[i]);
      if (valid != batch.texts[i].size()) {
        throw DataError(fmt::format(
            "{} is not UTF-8 text (a bad byte {} bytes into the document), which the hf "
            "tokenizer needs; convert it (iconv) or leave it out (--ext)",
            source.where(batch.documents[i]), valid));
      }
    }
    const Timer timer;
    const auto tokens = encode_documents(tokenizer, batch.texts, threads);
    report.tokenize_s += timer.seconds();
    for (size_t i = 0; i < batch.texts.size(); ++i) {
      SplitWriter& writer = batch.documents[i].val ? val : train;
      writer.add(tokens[i]);
      writer.add(separator);
      writer.bytes += batch.texts[i].size() + 1;
      ++writer.documents;
    }
  }
}

// Text documents are assigned so that both splits get one; rows are split as they stream, and
// a corpus of few rows can leave a split empty, which the trainer could not use.
void check_splits(bool rows, const SplitWriter& train, const SplitWriter& val) {
  if (!rows || (val.documents > 0 && train.documents > 0)) return;
  throw DataError(fmt::format(
      "the {} split got none of the {} documents: too few rows for --val-fraction; give more "
      "rows or a {} --val-fraction",
      val.documents == 0 ? "validation" : "training", train.documents + val.documents,
      val.documents == 0 ? "larger" : "smaller"));
}

std::vector<fs::path> existing_outputs(const fs::path& out_dir) {
  std::vector<fs::path> found;
  if (!fs::is_directory(out_dir)) return found;
  for (const auto& entry : fs::directory_iterator(out_dir)) {
    if (is_prepare_output(entry.path().filename().string())) found.push_back(entry.path());
  }
  return found;
}

void check_options(const PrepareOptions& options) {
  if (options.inputs.empty()) throw DataError("no input files or directories given");
  if (!(options.val_fraction > 0.0 && options.val_fraction < 1.0)) {
    throw DataError(fmt::format("val fraction {} must be in (0, 1)", options.val_fraction));
  }
  if (options.shard_tokens == 0) throw DataError("shard tokens must be positive");
  if (options.text_field.empty()) throw DataError("the text field (--text-field) is empty");
  if (options.shard_tokens > static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) {
    throw DataError(
        fmt::format("shard tokens {} exceed the shard format's int32 count", options.shard_tokens));
  }
  if (options.doc_bytes != 0 && options.doc_bytes < kMinDocBytes) {
    throw DataError(fmt::format("document bytes {} must be 0 (auto) or at least {}",
                                options.doc_bytes, kMinDocBytes));
  }
  if (options.tokenizer != "hf" && (!options.hf_tokenizer.empty() || !options.hf_python.empty())) {
    throw DataError("a Hugging Face tokenizer.json or its Python needs --tokenizer hf");
  }
  if (options.tokenizer == "bytes" || options.tokenizer == "hf") {
    if (options.vocab_size != 0 || !options.sp_model.empty()) {
      throw DataError("a vocabulary size or a SentencePiece model needs --tokenizer sentencepiece");
    }
    if (options.tokenizer == "hf" && options.hf_tokenizer.empty()) {
      throw DataError("--tokenizer hf needs --hf-tokenizer FILE (a tokenizer.json)");
    }
    return;
  }
  if (options.tokenizer != "sentencepiece") {
    throw DataError(
        fmt::format("tokenizer '{}' is not bytes, sentencepiece or hf", options.tokenizer));
  }
  if (options.sp_model.empty() == (options.vocab_size == 0)) {
    throw DataError(
        "--tokenizer sentencepiece needs either --vocab-size N (train a model on the training "
        "split) or --sp-model FILE (use a given one), not both");
  }
  if (options.sp_model.empty() && (options.vocab_size < 260 || options.vocab_size > 1000000)) {
    throw DataError(
        fmt::format("vocabulary size {} (--vocab-size) must be in [260, 1000000] (the 256 byte "
                    "pieces and a few special ones come first)",
                    options.vocab_size));
  }
  if (options.sp_model_type != "bpe" && options.sp_model_type != "unigram") {
    throw DataError(
        fmt::format("SentencePiece model type '{}' is not bpe or unigram", options.sp_model_type));
  }
}

void write_json(const fs::path& path, const PrepareReport& report, const PrepareOptions& options,
                uint32_t model_crc) {
  JsonObject json;
  json.add("files", static_cast<int64_t>(report.files))
      .add("documents", static_cast<int64_t>(report.documents))
      .add("train_documents", static_cast<int64_t>(report.train_documents))
      .add("val_documents", static_cast<int64_t>(report.val_documents))
      .add("row_files", static_cast<int64_t>(report.row_files))
      .add("skipped_rows", static_cast<int64_t>(report.skipped_rows))
      .add("skipped_tails", static_cast<int64_t>(report.skipped_tails))
      .add("doc_bytes", report.whole_files ? int64_t{0} : static_cast<int64_t>(report.doc_bytes))
      .add("bytes", static_cast<int64_t>(report.bytes))
      .add("train_bytes", static_cast<int64_t>(report.train_bytes))
      .add("val_bytes", static_cast<int64_t>(report.val_bytes))
      .add("train_tokens", static_cast<int64_t>(report.train_tokens))
      .add("val_tokens", static_cast<int64_t>(report.val_tokens))
      .add("val_bytes_per_token", report.val_bytes_per_token())
      .add("train_shards", static_cast<int64_t>(report.train_shards.size()))
      .add("val_shards", static_cast<int64_t>(report.val_shards.size()))
      .add("val_unigram_entropy_nats", report.val_unigram_entropy_nats)
      .add("vocab_size", report.vocab_size)
      .add("tokenizer", report.tokenizer)
      .add("token_bits", static_cast<int64_t>(report.token_bits));
  if (!report.tokenizer_model.empty()) {
    json.add("tokenizer_model", report.tokenizer_model)
        .add("tokenizer_model_crc32", static_cast<int64_t>(model_crc));
  }
  if (!report.sp_model_type.empty()) json.add("sp_model_type", report.sp_model_type);
  if (!report.hf_library_version.empty()) {
    json.add("hf_tokenizer", options.hf_tokenizer)
        .add("hf_tokenizers_version", report.hf_library_version);
  }
  if (report.row_files > 0) json.add("text_field", options.text_field);
  json.add("document_separator", "\n")
      .add("val_fraction", options.val_fraction)
      .add("seed", static_cast<int64_t>(options.seed))
      .add("shard_tokens", static_cast<int64_t>(options.shard_tokens));
  write_file_durable(path.string(), json.str() + "\n");
}

// With --overwrite, shards of an earlier, larger run would still match train_*.bin.
void remove_stale(const std::vector<fs::path>& before, const PrepareReport& report) {
  std::set<std::string> fresh{"prepare.json"};
  if (!report.tokenizer_model.empty()) fresh.insert(report.tokenizer_model);
  for (const auto* list : {&report.train_shards, &report.val_shards}) {
    for (const auto& shard : *list)
      fresh.insert(fs::path(shard).filename().string());
  }
  for (const auto& old : before) {
    if (fresh.count(old.filename().string()) == 0) fs::remove(old);
  }
}

PrepareReport run(const PrepareOptions& options) {
  check_options(options);
  const fs::path out_dir(options.out_dir);
  const std::vector<fs::path> before = existing_outputs(out_dir);
  if (!before.empty() && !options.overwrite) {
    throw DataError(
        fmt::format("output directory '{}' already holds prepared data ('{}'); pass "
                    "--overwrite to replace it or choose another directory",
                    out_dir.string(), before.front().filename().string()));
  }
  const DocumentPlan plan = plan_documents(options, fs::weakly_canonical(out_dir));
  PrepareReport report;
  report.files = plan.files.size();
  report.row_files = static_cast<size_t>(
      std::count_if(plan.files.begin(), plan.files.end(),
                    [](const InputFile& file) { return file.format != InputFormat::text; }));
  report.skipped_files = plan.skipped_files;
  report.doc_bytes = plan.doc_bytes;
  report.whole_files = plan.whole_files;
  // A bad model or a failed training must not cost the shards already in out_dir.
  const std::unique_ptr<Tokenizer> tokenizer = make_tokenizer(options, plan, report);
  report.tokenizer = tokenizer->name();
  report.vocab_size = tokenizer->vocab_size();
  const TokenWidth width = report.vocab_size > 65536 ? TokenWidth::u32 : TokenWidth::u16;
  report.token_bits = width == TokenWidth::u16 ? 16 : 32;
  fs::create_directories(out_dir);

  SplitWriter train(out_dir, "train", options.shard_tokens, width, report.vocab_size);
  SplitWriter val(out_dir, "val", options.shard_tokens, width, report.vocab_size);
  SkippedRows skipped;
  DocumentSource source(plan, options, skipped);
  tokenize_documents(source, *tokenizer, tokenizer_threads(options.threads), train, val, report);
  train.flush();
  val.flush();
  report.documents = train.documents + val.documents;
  report.bytes = train.bytes + val.bytes - report.documents;  // less one separator each
  report.skipped_rows = skipped.rows;
  report.skipped_tails = skipped.files;
  report.skipped_examples = skipped.examples;
  check_splits(report.row_files > 0, train, val);
  report.train_documents = train.documents;
  report.val_documents = val.documents;
  report.train_bytes = train.bytes;
  report.val_bytes = val.bytes;
  report.train_tokens = train.tokens;
  report.val_tokens = val.tokens;
  report.train_shards = train.shards;
  report.val_shards = val.shards;
  report.val_unigram_entropy_nats = unigram_entropy_nats(val.counts);
  // The tokenizer's file beside the shards (for the trainer, and for an HF export to ship), with
  // its CRC-32, so that the trainer can tell a damaged copy.
  uint32_t model_crc = 0;
  std::string model;
  if (const auto* sp = dynamic_cast<const SentencePieceTokenizer*>(tokenizer.get())) {
    model = sp->serialized();
    report.tokenizer_model = kTokenizerModel;
  } else if (const auto* hf = dynamic_cast<const HfTokenizer*>(tokenizer.get())) {
    model = hf->json();  // the bytes that were encoded with, not the file as it is now
    report.tokenizer_model = kTokenizerJson;
  }
  if (!report.tokenizer_model.empty()) {
    model_crc = crc32(model.data(), model.size());
    write_file_durable((out_dir / report.tokenizer_model).string(), model);
  }
  remove_stale(before, report);
  // Last, so a prepare.json always describes a complete set of shards.
  write_json(out_dir / "prepare.json", report, options, model_crc);
  return report;
}

}  // namespace

double unigram_entropy_nats(const std::vector<uint64_t>& counts) {
  uint64_t total = 0;
  for (uint64_t c : counts)
    total += c;
  if (total == 0) return 0.0;
  double entropy = 0.0;
  for (uint64_t c : counts) {
    if (c == 0) continue;
    const double p = static_cast<double>(c) / static_cast<double>(total);
    entropy -= p * std::log(p);
  }
  return entropy;
}

double unigram_entropy_nats(const std::array<uint64_t, 256>& counts) {
  return unigram_entropy_nats(std::vector<uint64_t>(counts.begin(), counts.end()));
}

PrepareReport prepare_corpus(const PrepareOptions& options) {
  try {
    return run(options);
  } catch (const fs::filesystem_error& e) {
    throw DataError(fmt::format("autoloco-prepare: {}; check the paths and permissions", e.what()));
  }
}

}  // namespace autoloco
