// libFuzzer target: token shards (data/shard.hpp). Feeds the input, written to a scratch file,
// to Shard's header and size checks and, when it opens, reads every token through token(),
// copy_tokens() and max_token(), then opens it as a one-shard TokenDataset (the vocabulary
// check). A DataError is a correct refusal; a finding is anything else (another exception, a
// crash, a sanitizer report, a hang), or tokens that differ between the two read paths.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "autoloco/data/dataset.hpp"
#include "autoloco/data/shard.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace autoloco;
  const fuzz::ScratchFile scratch(data, size);
  const std::string& path = scratch.path();
  fuzz::expect_typed_errors([&] {
    const Shard shard(path);
    fuzz::require(kShardHeaderBytes + shard.size() * token_bytes(shard.width()) == size,
                  "an opened shard's header disagrees with its size");
    std::vector<int64_t> tokens(shard.size());
    shard.copy_tokens(0, static_cast<int64_t>(tokens.size()), tokens.data());
    uint32_t largest = 0;
    for (uint64_t i = 0; i < shard.size(); ++i) {
      fuzz::require(static_cast<int64_t>(shard.token(i)) == tokens[i],
                    "token() and copy_tokens() disagree");
      largest = std::max(largest, shard.token(i));
    }
    fuzz::require(shard.max_token() == largest, "max_token() is not the largest token");
    // The vocabulary check of a dataset: just large enough, then one too small.
    const TokenDataset fits({path}, int64_t{largest} + 1, "data.train");
    fuzz::require(fits.num_tokens() == shard.size(), "a dataset miscounts its tokens");
    if (largest > 0) {
      try {
        const TokenDataset small({path}, int64_t{largest}, "data.train");
        fuzz::require(false, "a token beyond model.vocab_size passed the vocabulary check");
      } catch (const DataError&) {
      }
    }
  });
  return 0;
}
