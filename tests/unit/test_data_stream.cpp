// Unit tests of the per-rank batch streams, evaluation batches and the by_shard partition.
#include <unistd.h>

// LibTorch before Catch: Debian's LibTorch pulls in glog, whose CHECK macro Catch must override.
#include <torch/torch.h>
#include <catch2/catch.hpp>

#include <filesystem>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "../support/temp_dir.hpp"
#include "autoloco/data/dataset.hpp"
#include "autoloco/data/shard.hpp"
#include "autoloco/data/stream.hpp"
#include "autoloco/util/error.hpp"

namespace fs = std::filesystem;
using autoloco::Batch;
using autoloco::BatchStream;
using autoloco::DataError;
using autoloco::StreamCursor;
using autoloco::TokenDataset;
using autoloco::TokenWidth;

namespace {

// Tokens encode their place: shard k, position i -> k * 1'000'000 + i, so a test can tell
// which shard a window came from and whether its tokens are consecutive.
constexpr int64_t kShardStride = 1'000'000;
constexpr int64_t kVocab = 10'000'000;

struct ShardDir {
  autoloco::test::TempDir dir{"stream"};
  fs::path path = dir.path;
  explicit ShardDir(const std::vector<uint32_t>& sizes) {
    for (size_t k = 0; k < sizes.size(); ++k) {
      std::vector<uint32_t> tokens(sizes[k]);
      for (uint32_t i = 0; i < sizes[k]; ++i) {
        tokens[i] = static_cast<uint32_t>(k * kShardStride) + i;
      }
      const std::string name = "train_00" + std::to_string(k) + ".bin";
      autoloco::write_shard((path / name).string(), tokens, TokenWidth::u32);
    }
  }
  TokenDataset open(const std::string& what = "data.train") const {
    return TokenDataset({(path / "train_*.bin").string()}, kVocab, what);
  }
};

bool same(const Batch& a, const Batch& b) {
  return torch::equal(a.inputs, b.inputs) && torch::equal(a.targets, b.targets);
}

std::vector<Batch> draw(BatchStream& stream, int n) {
  std::vector<Batch> batches;
  for (int i = 0; i < n; ++i)
    batches.push_back(stream.next());
  return batches;
}

// Every row must be consecutive tokens of one shard, and targets the inputs shifted by one.
void check_windows(const Batch& batch) {
  const auto windows = torch::cat({batch.inputs, batch.targets.slice(1, -1)}, 1);
  const auto accessor = windows.accessor<int64_t, 2>();
  for (int64_t row = 0; row < windows.size(0); ++row) {
    for (int64_t j = 1; j < windows.size(1); ++j) {
      REQUIRE(accessor[row][j] == accessor[row][j - 1] + 1);
    }
  }
  CHECK(torch::equal(batch.targets.slice(1, 0, -1), batch.inputs.slice(1, 1)));
}

}  // namespace

TEST_CASE("batch stream returns int64 batches of windows with shifted targets", "[data][stream]") {
  const ShardDir dir({500, 300, 1000});
  const TokenDataset data = dir.open();
  BatchStream stream(data, 16, 4, 7, 0, 0, {});
  for (int i = 0; i < 20; ++i) {
    const Batch batch = stream.next();
    REQUIRE(batch.inputs.dtype() == torch::kLong);
    REQUIRE(batch.targets.dtype() == torch::kLong);
    REQUIRE(batch.inputs.sizes() == std::vector<int64_t>{4, 16});
    REQUIRE(batch.targets.sizes() == std::vector<int64_t>{4, 16});
    CHECK(batch.inputs.is_contiguous());
    check_windows(batch);
  }
  CHECK(stream.cursor().samples == 80);
}

TEST_CASE("batch streams with the same seed, dc and member are identical", "[data][stream]") {
  const ShardDir dir({500, 300, 1000});
  const TokenDataset data = dir.open();
  BatchStream a(data, 8, 3, 42, 1, 2, {});
  BatchStream b(data, 8, 3, 42, 1, 2, {});
  for (int i = 0; i < 10; ++i)
    CHECK(same(a.next(), b.next()));
}

TEST_CASE("batch streams differ across member, dc and seed", "[data][stream]") {
  const ShardDir dir({500, 300, 1000});
  const TokenDataset data = dir.open();
  BatchStream base(data, 8, 4, 42, 0, 0, {});
  BatchStream other_member(data, 8, 4, 42, 0, 1, {});
  BatchStream other_dc(data, 8, 4, 42, 1, 0, {});
  BatchStream other_seed(data, 8, 4, 43, 0, 0, {});
  const Batch reference = base.next();
  CHECK_FALSE(same(reference, other_member.next()));
  CHECK_FALSE(same(reference, other_dc.next()));
  CHECK_FALSE(same(reference, other_seed.next()));
}

TEST_CASE("batch stream set_cursor replays the stream exactly", "[data][stream]") {
  const ShardDir dir({500, 300, 1000});
  const TokenDataset data = dir.open();
  BatchStream stream(data, 8, 4, 5, 0, 1, {});
  draw(stream, 3);
  const StreamCursor saved = stream.cursor();
  const auto first = draw(stream, 4);
  stream.set_cursor(saved);
  const auto again = draw(stream, 4);
  for (size_t i = 0; i < first.size(); ++i)
    CHECK(same(first[i], again[i]));

  // A new stream (a resumed run) with the saved cursor continues the same way.
  BatchStream resumed(data, 8, 4, 5, 0, 1, {});
  resumed.set_cursor(saved);
  CHECK(same(resumed.next(), first[0]));
}

TEST_CASE("batch stream draws only from its shard subset and skips short shards",
          "[data][stream]") {
  const ShardDir dir({500, 5, 1000});
  const TokenDataset data = dir.open();
  BatchStream stream(data, 16, 8, 1, 0, 0, {1, 2});  // shard 1 is too short for 17 tokens
  for (int i = 0; i < 20; ++i) {
    const auto shard = stream.next().inputs.div(kShardStride, "floor");
    CHECK(torch::all(shard == 2).item<bool>());
  }
}

TEST_CASE("batch stream picks shards in proportion to their windows", "[data][stream]") {
  const ShardDir dir({110, 1010});  // 100 and 1000 windows of 11 tokens
  const TokenDataset data = dir.open();
  BatchStream stream(data, 10, 100, 3, 0, 0, {});
  int64_t from_large = 0;
  int64_t total = 0;
  for (int i = 0; i < 50; ++i) {
    const auto first = stream.next().inputs.select(1, 0);
    from_large += (first >= kShardStride).sum().item<int64_t>();
    total += first.size(0);
  }
  const double share = static_cast<double>(from_large) / static_cast<double>(total);
  CHECK(share == Approx(1000.0 / 1100.0).margin(0.02));
}

TEST_CASE("batch stream without a long enough shard names the files and seq_len",
          "[data][stream]") {
  const ShardDir dir({10, 12});
  const TokenDataset data = dir.open();
  REQUIRE_THROWS_AS(BatchStream(data, 16, 2, 1, 0, 0, {}), DataError);
  REQUIRE_THROWS_WITH(BatchStream(data, 16, 2, 1, 0, 0, {}),
                      Catch::Contains("train_000.bin") && Catch::Contains("train_001.bin") &&
                          Catch::Contains("17") && Catch::Contains("seq_len"));
}

TEST_CASE("eval batches are deterministic, non-overlapping and wrap around", "[data][stream]") {
  const ShardDir dir({101, 41});  // windows of 11 tokens at stride 10: 10 + 4 = 14
  const TokenDataset val = dir.open("data.val");
  const int64_t seq_len = 10;
  const int64_t batch = 2;
  CHECK(same(autoloco::eval_batch(val, 3, batch, seq_len),
             autoloco::eval_batch(val, 3, batch, seq_len)));

  // One pass over the 14 windows (7 batches) visits every window start exactly once.
  std::set<int64_t> starts;
  for (int64_t index = 0; index < 7; ++index) {
    const Batch b = autoloco::eval_batch(val, index, batch, seq_len);
    check_windows(b);
    for (int64_t row = 0; row < batch; ++row) {
      const int64_t first = b.inputs[row][0].item<int64_t>();
      CHECK(first % kShardStride % seq_len == 0);
      starts.insert(first);
    }
  }
  CHECK(starts.size() == 14);
  CHECK(same(autoloco::eval_batch(val, 7, batch, seq_len),
             autoloco::eval_batch(val, 0, batch, seq_len)));
  REQUIRE_THROWS_WITH(autoloco::eval_batch(val, 0, batch, 200), Catch::Contains("data.val"));
}

TEST_CASE("shards_for_dc deals shards round-robin and rejects a dc without shards",
          "[data][stream]") {
  CHECK(autoloco::shards_for_dc(5, 0, 2) == std::vector<size_t>{0, 2, 4});
  CHECK(autoloco::shards_for_dc(5, 1, 2) == std::vector<size_t>{1, 3});
  CHECK(autoloco::shards_for_dc(3, 2, 3) == std::vector<size_t>{2});
  REQUIRE_THROWS_WITH(autoloco::shards_for_dc(2, 2, 4),
                      Catch::Contains("2 train shards") && Catch::Contains("4 datacenters"));
  REQUIRE_THROWS_AS(autoloco::shards_for_dc(4, 4, 4), DataError);
}
