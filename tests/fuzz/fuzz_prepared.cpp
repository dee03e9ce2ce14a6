// libFuzzer target: the prepare.json that autoloco-prepare writes beside token shards, as the
// trainer reads it (data/prepared_data.hpp): read_prepared_data() on a directory holding the
// input as prepare.json, then the vocabulary check. A DataError or ConfigError is a correct
// refusal; a finding is anything else (another exception, e.g. one of yaml-cpp's, a crash, a
// sanitizer report, a hang on a tokenizer model that is not a regular file).
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "autoloco/data/prepared_data.hpp"
#include "fuzz_support.hpp"

namespace {

// A directory of this process's own, in memory where possible, reused by every input and
// removed at exit; it holds a tokenizer.model that prepare.json may name.
struct ScratchDir {
  std::string path;
  ScratchDir() {
    const std::string base = ::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    path = base + "/autoloco-fuzz-prepared-" + std::to_string(::getpid());
    std::filesystem::create_directories(path);
    std::ofstream(path + "/tokenizer.model") << "not a model";
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

const std::string& scratch_dir() {
  static const ScratchDir dir;
  return dir.path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace autoloco;
  const std::string& dir = scratch_dir();
  {
    std::ofstream out(dir + "/prepare.json", std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  fuzz::expect_typed_errors([&] {
    const auto prepared = read_prepared_data({dir + "/val_000.bin"}, "data.val");
    if (!prepared) return;
    fuzz::require(prepared->vocab_size >= 1, "a vocab_size below 1 was accepted");
    check_same_tokenizer(prepared, prepared);
    bits_per_byte(2.0, prepared->val_bytes_per_token);
    check_prepared_vocab(*prepared, 256, "data.val");
  });
  return 0;
}
