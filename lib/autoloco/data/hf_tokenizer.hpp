// A Hugging Face tokenizer (a tokenizer.json: GPT-2's, Llama 3's, Qwen's, or one trained with
// the `tokenizers` library) behind the Tokenizer interface, for autoloco-prepare --tokenizer hf.
//
// C++ has no well-kept binding of the Rust `tokenizers` crate, so the encoding is done by the
// Python package, in one helper process per tokenizer that lives as long as the object: it is
// started with the interpreter of scripts/hf-env.sh (or one named), and talks over a socket on
// its stdin/stdout in a small binary framing (little-endian; hf_tokenizer.cpp spells it out).
// A whole batch of documents goes over in one exchange and comes back as uint32 ids, which the
// helper encodes with encode_batch (parallel in Rust): one process and a few round trips per
// corpus, not one process or one round trip per document. Encoding adds no special tokens and
// ignores any truncation or padding the file configures.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "autoloco/data/tokenizer.hpp"

namespace autoloco {

// The interpreter used when none is named: $AUTOLOCO_HF_PYTHON, else the python of the venv
// that scripts/hf-env.sh makes, ${AUTOLOCO_TORCH_VENV:-$HOME/.cache/autoloco/torch-2.11.0}
// (the path scripts/torch-cuda.sh uses; keep the two in step).
std::string default_hf_python();

class HfTokenizer final : public Tokenizer {
 public:
  // Reads the tokenizer.json at `path`, starts the helper under `python` (default_hf_python()
  // when empty) and has it load the file. `threads` caps the helper's encoding threads (0: every
  // core). Throws DataError that says what to do when the interpreter is missing or lacks the
  // tokenizers package (run scripts/hf-env.sh), or when the file is not a tokenizer.json.
  static std::unique_ptr<HfTokenizer> start(const std::string& path, const std::string& python,
                                            int threads);
  // Asks the helper to exit and waits for it.
  ~HfTokenizer() override;
  HfTokenizer(const HfTokenizer&) = delete;
  HfTokenizer& operator=(const HfTokenizer&) = delete;

  std::string name() const override { return "hf"; }
  // get_vocab_size(with_added_tokens=True), or one past the largest id when that is larger
  // (a vocabulary with holes), so every id the tokenizer gives is below it.
  int64_t vocab_size() const override { return vocab_size_; }
  void encode(std::string_view text, std::vector<uint32_t>& out) const override;
  std::string decode(const std::vector<uint32_t>& tokens) const override;
  bool encodes_in_batches() const override { return true; }
  // Every text of `texts` in one exchange with the helper. The texts must be UTF-8 (Python's
  // strings); a text that is not is a DataError naming its index.
  std::vector<std::vector<uint32_t>> encode_batch(
      const std::vector<std::string>& texts) const override;

  // The tokenizer.json as it was read and handed to the helper (what OUT/tokenizer.json gets).
  const std::string& json() const { return json_; }
  // The version of the Python tokenizers package that encodes.
  const std::string& library_version() const { return library_version_; }

 private:
  HfTokenizer(std::string path, std::string python, std::string json);
  void spawn(int threads);
  void handshake();
  // Sends `bytes` (all of it) to the helper; reads exactly `size` bytes from it.
  void send_all(std::string_view bytes) const;
  void receive(void* data, size_t size) const;
  uint64_t receive_u64() const;
  // Reads the status word of a reply; throws DataError with the helper's message when it is not
  // ok. `what` says what was asked for.
  void receive_status(const std::string& what) const;
  // The error for a helper that went away: its exit status, and what to do.
  [[noreturn]] void helper_gone(const std::string& what) const;
  void stop() const noexcept;

  std::string path_;    // the tokenizer.json, for messages
  std::string python_;  // the interpreter
  std::string json_;
  std::string library_version_;
  int64_t vocab_size_ = 0;
  // Our end of the socket (the helper's stdin and stdout are the other end) and the helper;
  // -1 once it has stopped (a const exchange that finds it gone reaps it).
  mutable int fd_ = -1;
  mutable pid_t pid_ = -1;
  mutable std::mutex mutex_;  // one exchange at a time
};

// Where `text` stops being valid UTF-8: the byte offset of the first bad sequence, or
// text.size() when it is all valid.
size_t utf8_valid_prefix(std::string_view text);

}  // namespace autoloco
