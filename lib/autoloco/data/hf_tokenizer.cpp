// A Hugging Face tokenizer.json, encoded by the Python `tokenizers` package in a helper process
// (see hf_tokenizer.hpp).
//
// The helper is the Python program kHelper below, run with `python -c`: embedded rather than a
// file under scripts/, so that an installed or copied autoloco-prepare needs nothing found
// beside it. It reads requests on stdin and answers on stdout, a socket whose other end is ours
// (a socket, not two pipes, so that a write to a helper that died fails with EPIPE instead of
// killing us with SIGPIPE). Every integer is little-endian:
//   start:   u64 n, n bytes of tokenizer.json
//            -> u32 status; 0: u64 vocab size, u64 n, n bytes of the tokenizers version
//   encode:  u32 1, u64 count, count x (u64 n, n bytes of UTF-8 text)
//            -> u32 status; 0: count x (u64 n, n x u32 ids)
//   decode:  u32 2, u64 n, n x u32 ids  -> u32 status; 0: u64 n, n bytes of UTF-8 text
//   quit:    u32 0 (no answer)
// A status other than 0 (1: failed, 2: no tokenizers package) is followed by u64 n and n bytes
// of a message, and the helper waits for the next request: it always reads a whole request before
// it answers, so neither side blocks on a full socket. Its stderr is ours, for anything it did not
// expect.
#include "autoloco/data/hf_tokenizer.hpp"

#include <errno.h>
#include <fmt/format.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <utility>

#include "autoloco/util/error.hpp"
#include "autoloco/util/file_bytes.hpp"

extern char** environ;

namespace autoloco {
namespace {

constexpr const char* kHelper = R"PY(
import array, struct, sys

inp, out = sys.stdin.buffer, sys.stdout.buffer

def read(n):
    data = inp.read(n)
    if len(data) != n:
        sys.exit(0)  # autoloco-prepare went away
    return data

def u32():
    return struct.unpack("<I", read(4))[0]

def u64():
    return struct.unpack("<Q", read(8))[0]

def answer(payload):
    out.write(struct.pack("<I", 0) + payload)
    out.flush()

def fail(message, status=1):
    text = message.encode("utf-8", "replace")
    out.write(struct.pack("<IQ", status, len(text)) + text)
    out.flush()

def ids_bytes(ids):
    a = array.array("I", ids)
    assert a.itemsize == 4
    if sys.byteorder != "little":
        a.byteswap()
    return a.tobytes()

config = read(u64())
try:
    import tokenizers
except Exception as e:
    fail(f"{sys.executable} cannot import the Python package tokenizers ({e})", 2)
    sys.exit(0)
try:
    tok = tokenizers.Tokenizer.from_str(config.decode("utf-8"))
    tok.no_truncation()
    tok.no_padding()
    vocab = tok.get_vocab_size(with_added_tokens=True)
    top = max(tok.get_vocab(with_added_tokens=True).values(), default=-1) + 1
except Exception as e:
    fail(f"tokenizers {tokenizers.__version__} cannot load it ({e}); is it a tokenizer.json?")
    sys.exit(0)
# encode_batch_fast (tokenizers 0.20 on) gives the same ids without tracking offsets.
encode_batch = getattr(tok, "encode_batch_fast", tok.encode_batch)
version = tokenizers.__version__.encode()
answer(struct.pack("<QQ", max(vocab, top), len(version)) + version)

while True:
    op = u32()
    if op == 0:
        break
    if op == 1:
        docs = [read(u64()) for _ in range(u64())]
        try:
            texts = []
            for i, d in enumerate(docs):
                try:
                    texts.append(d.decode("utf-8"))
                except UnicodeDecodeError as e:
                    raise ValueError(f"text {i} of the batch is not UTF-8 ({e})") from None
            encodings = encode_batch(texts, add_special_tokens=False)
        except Exception as e:
            fail(f"encoding failed: {e}")
            continue
        parts = []
        for e in encodings:
            # e.ids builds a new list of Python ints at every access: once per document.
            ids = ids_bytes(e.ids)
            parts.append(struct.pack("<Q", len(ids) // 4))
            parts.append(ids)
        answer(b"".join(parts))
    elif op == 2:
        ids = array.array("I", read(4 * u64()))
        if sys.byteorder != "little":
            ids.byteswap()
        try:
            text = tok.decode(ids.tolist(), skip_special_tokens=False).encode("utf-8")
        except Exception as e:
            fail(f"decoding failed: {e}")
            continue
        answer(struct.pack("<Q", len(text)) + text)
    else:
        fail(f"unknown request {op}")
        break
)PY";

constexpr uint32_t kOpQuit = 0;
constexpr uint32_t kOpEncode = 1;
constexpr uint32_t kOpDecode = 2;
constexpr uint64_t kStatusNoLibrary = 2;

void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i)
    out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i)
    out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint64_t get_le(const unsigned char* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i)
    v = (v << 8) | p[i];
  return v;
}

std::string how_to_get_python() {
  return "run scripts/hf-env.sh (it makes the venv with the pinned tokenizers package), or name "
         "an interpreter that has it with --hf-python or AUTOLOCO_HF_PYTHON";
}

// Above this many bytes a batch goes out in pieces, so it is not copied whole once more.
constexpr size_t kSendChunk = size_t{1} << 20;

}  // namespace

std::string default_hf_python() {
  if (const char* python = std::getenv("AUTOLOCO_HF_PYTHON"); python && *python) return python;
  std::string venv;
  if (const char* dir = std::getenv("AUTOLOCO_TORCH_VENV"); dir && *dir) {
    venv = dir;
  } else {
    const char* home = std::getenv("HOME");
    venv = std::string(home && *home ? home : ".") + "/.cache/autoloco/torch-2.11.0";
  }
  return venv + "/bin/python";
}

size_t utf8_valid_prefix(std::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char c = s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len = 0;
    unsigned char lo = 0x80, hi = 0xbf;  // the allowed range of the second byte
    if (c >= 0xc2 && c <= 0xdf) {
      len = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
      len = 3;
      if (c == 0xe0) lo = 0xa0;  // no overlong forms
      if (c == 0xed) hi = 0x9f;  // no surrogates
    } else if (c >= 0xf0 && c <= 0xf4) {
      len = 4;
      if (c == 0xf0) lo = 0x90;
      if (c == 0xf4) hi = 0x8f;  // nothing above U+10FFFF
    } else {
      return i;
    }
    if (i + len > n || s[i + 1] < lo || s[i + 1] > hi) return i;
    for (size_t k = 2; k < len; ++k) {
      if (s[i + k] < 0x80 || s[i + k] > 0xbf) return i;
    }
    i += len;
  }
  return n;
}

HfTokenizer::HfTokenizer(std::string path, std::string python, std::string json)
    : path_(std::move(path)), python_(std::move(python)), json_(std::move(json)) {}

std::unique_ptr<HfTokenizer> HfTokenizer::start(const std::string& path, const std::string& python,
                                                int threads) {
  auto json = read_file_bytes(path);
  if (!json || json->empty()) {
    throw DataError(fmt::format(
        "Hugging Face tokenizer '{}' {}; give the path of a tokenizer.json (--hf-tokenizer), "
        "as shipped beside a model on the Hub or saved by the tokenizers library",
        path, json ? "is empty" : "cannot be read"));
  }
  std::unique_ptr<HfTokenizer> tokenizer(
      new HfTokenizer(path, python.empty() ? default_hf_python() : python, std::move(*json)));
  tokenizer->spawn(threads);
  tokenizer->handshake();
  return tokenizer;
}

void HfTokenizer::spawn(int threads) {
  if (python_.find('/') != std::string::npos && ::access(python_.c_str(), X_OK) != 0) {
    const int error = errno;
    throw DataError(fmt::format("the Python interpreter for --tokenizer hf, '{}', is {}; {}",
                                python_, error == ENOENT ? "missing" : std::strerror(error),
                                how_to_get_python()));
  }
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    throw DataError(
        fmt::format("cannot make a socket for the tokenizer helper: {}", std::strerror(errno)));
  }
  // The helper's end becomes its stdin and stdout (dup2 clears close-on-exec on the copies).
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  // The environment, with the helper's encoding threads (Rust's rayon pool) capped unless the
  // caller set them.
  std::vector<std::string> env_strings;
  bool has_rayon = false;
  for (char** e = environ; *e != nullptr; ++e) {
    env_strings.emplace_back(*e);
    if (env_strings.back().rfind("RAYON_NUM_THREADS=", 0) == 0) has_rayon = true;
  }
  if (!has_rayon && threads > 0) {
    env_strings.push_back(fmt::format("RAYON_NUM_THREADS={}", threads));
  }
  std::vector<char*> env;
  for (auto& s : env_strings)
    env.push_back(s.data());
  env.push_back(nullptr);
  std::string arg0 = python_, flag = "-c", code = kHelper;
  char* argv[] = {arg0.data(), flag.data(), code.data(), nullptr};
  const int rc = ::posix_spawnp(&pid_, python_.c_str(), &actions, nullptr, argv, env.data());
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    pid_ = -1;
    throw DataError(
        fmt::format("cannot start the Python interpreter for --tokenizer hf, '{}': "
                    "{}; {}",
                    python_, std::strerror(rc), how_to_get_python()));
  }
  fd_ = fds[0];
}

void HfTokenizer::handshake() {
  std::string request;
  put_u64(request, json_.size());
  try {
    send_all(request);
    send_all(json_);
    receive_status("to load it");
  } catch (const DataError&) {
    stop();
    throw;
  }
  vocab_size_ = static_cast<int64_t>(receive_u64());
  library_version_.resize(receive_u64());
  receive(library_version_.data(), library_version_.size());
  if (vocab_size_ <= 0 || vocab_size_ > (int64_t{1} << 32)) {
    stop();
    throw DataError(
        fmt::format("Hugging Face tokenizer '{}' has a vocabulary of {}, not in "
                    "[1, 2^32]; it cannot be written as uint32 tokens",
                    path_, vocab_size_));
  }
}

HfTokenizer::~HfTokenizer() {
  stop();
}

void HfTokenizer::stop() const noexcept {
  if (fd_ >= 0) {
    std::string quit;
    put_u32(quit, kOpQuit);
    (void)::send(fd_, quit.data(), quit.size(), MSG_NOSIGNAL);
    ::close(fd_);
    fd_ = -1;
  }
  if (pid_ > 0) {
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
  }
}

void HfTokenizer::send_all(std::string_view bytes) const {
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      helper_gone("while text was sent to it");
    }
    bytes.remove_prefix(static_cast<size_t>(n));
  }
}

void HfTokenizer::receive(void* data, size_t size) const {
  auto* p = static_cast<char*>(data);
  while (size > 0) {
    const ssize_t n = ::read(fd_, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) helper_gone("before it answered");
    p += n;
    size -= static_cast<size_t>(n);
  }
}

uint64_t HfTokenizer::receive_u64() const {
  unsigned char bytes[8];
  receive(bytes, sizeof(bytes));
  return get_le(bytes, 8);
}

void HfTokenizer::receive_status(const std::string& what) const {
  unsigned char bytes[4];
  receive(bytes, sizeof(bytes));
  const uint64_t status = get_le(bytes, 4);
  if (status == 0) return;
  std::string message(receive_u64(), '\0');
  receive(message.data(), message.size());
  throw DataError(fmt::format("Hugging Face tokenizer '{}': its helper failed {}: {}{}", path_,
                              what, message,
                              status == kStatusNoLibrary ? "; " + how_to_get_python() : ""));
}

void HfTokenizer::helper_gone(const std::string& what) const {
  // Our end closed, so a helper that is still running sees the end of its input and exits.
  ::close(fd_);
  fd_ = -1;
  int status = 0;
  const pid_t pid = pid_;
  while (pid > 0 && ::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
  std::string how = "went away";
  if (pid > 0 && WIFEXITED(status)) {
    how = fmt::format("exited with status {}", WEXITSTATUS(status));
  } else if (pid > 0 && WIFSIGNALED(status)) {
    how = fmt::format("was killed by signal {}", WTERMSIG(status));
  }
  throw DataError(
      fmt::format("the tokenizer helper for '{}' under '{}' {} {} (its own error, if any, is "
                  "above); is '{}' a Python 3 interpreter? {}",
                  path_, python_, how, what, python_, how_to_get_python()));
}

void HfTokenizer::encode(std::string_view text, std::vector<uint32_t>& out) const {
  const auto tokens = encode_batch({std::string(text)});
  out.insert(out.end(), tokens[0].begin(), tokens[0].end());
}

std::vector<std::vector<uint32_t>> HfTokenizer::encode_batch(
    const std::vector<std::string>& texts) const {
  for (size_t i = 0; i < texts.size(); ++i) {
    const size_t valid = utf8_valid_prefix(texts[i]);
    if (valid != texts[i].size()) {
      throw DataError(
          fmt::format("text {} of a batch for Hugging Face tokenizer '{}' is not "
                      "UTF-8 at byte {}; the hf tokenizer takes UTF-8 text only",
                      i, path_, valid));
    }
  }
  const std::lock_guard<std::mutex> lock(mutex_);
  if (fd_ < 0) throw DataError(fmt::format("the tokenizer helper for '{}' has stopped", path_));
  std::string buffer;
  put_u32(buffer, kOpEncode);
  put_u64(buffer, texts.size());
  for (const auto& text : texts) {
    put_u64(buffer, text.size());
    if (text.size() >= kSendChunk) {
      send_all(buffer);
      buffer.clear();
      send_all(text);
    } else {
      buffer += text;
      if (buffer.size() >= kSendChunk) {
        send_all(buffer);
        buffer.clear();
      }
    }
  }
  send_all(buffer);
  receive_status(fmt::format("to encode {} texts", texts.size()));
  std::vector<std::vector<uint32_t>> tokens(texts.size());
  std::vector<unsigned char> bytes;
  for (auto& ids : tokens) {
    const uint64_t n = receive_u64();
    bytes.resize(n * 4);
    receive(bytes.data(), bytes.size());
    ids.resize(n);
    for (uint64_t k = 0; k < n; ++k)
      ids[k] = static_cast<uint32_t>(get_le(&bytes[4 * k], 4));
  }
  // Checked once the whole answer is read, so that the helper stays in step.
  for (const auto& ids : tokens) {
    for (const uint32_t id : ids) {
      if (id >= static_cast<uint64_t>(vocab_size_)) {
        throw DataError(
            fmt::format("Hugging Face tokenizer '{}' gave id {}, outside its vocabulary of {}",
                        path_, id, vocab_size_));
      }
    }
  }
  return tokens;
}

std::string HfTokenizer::decode(const std::vector<uint32_t>& tokens) const {
  std::string request;
  put_u32(request, kOpDecode);
  put_u64(request, tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] >= static_cast<uint64_t>(vocab_size_)) {
      throw DataError(
          fmt::format("token {} at position {} is outside the vocabulary of "
                      "Hugging Face tokenizer '{}' ({})",
                      tokens[i], i, path_, vocab_size_));
    }
    put_u32(request, tokens[i]);
  }
  const std::lock_guard<std::mutex> lock(mutex_);
  if (fd_ < 0) throw DataError(fmt::format("the tokenizer helper for '{}' has stopped", path_));
  send_all(request);
  receive_status("to decode");
  std::string text(receive_u64(), '\0');
  receive(text.data(), text.size());
  return text;
}

}  // namespace autoloco
