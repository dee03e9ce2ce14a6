// Unit tests of mixtures in the batch stream: shares by weight, resume, fewer dcs, and one
// source drawing exactly the windows a plain stream drew before mixtures existed.
#include <unistd.h>

// LibTorch before Catch: Debian's LibTorch pulls in glog, whose CHECK macro Catch must override.
#include <torch/torch.h>
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
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
using autoloco::StreamCursor;
using autoloco::StreamSource;
using autoloco::TokenDataset;
using autoloco::TokenWidth;

namespace {

// Source s's tokens are s * 10'000'000 + shard * 1'000'000 + position: a window tells where it
// came from.
constexpr int64_t kSourceStride = 10'000'000;
constexpr int64_t kShardStride = 1'000'000;
constexpr int64_t kVocab = 40'000'000;

struct SourceDir {
  autoloco::test::TempDir dir{"mixture"};
  SourceDir(int source, const std::vector<uint32_t>& sizes) {
    for (size_t k = 0; k < sizes.size(); ++k) {
      std::vector<uint32_t> tokens(sizes[k]);
      for (uint32_t i = 0; i < sizes[k]; ++i)
        tokens[i] = static_cast<uint32_t>(source * kSourceStride + k * kShardStride + i);
      autoloco::write_shard((dir.path / ("train_00" + std::to_string(k) + ".bin")).string(), tokens,
                            TokenWidth::u32);
    }
  }
  TokenDataset open() const {
    return TokenDataset({(dir.path / "train_*.bin").string()}, kVocab, "data.train");
  }
};

int source_of(const Batch& batch, int64_t row) {
  return static_cast<int>(batch.inputs[row][0].item<int64_t>() / kSourceStride);
}

// Samples of each source in the stream's next `samples` draws, counted from the windows.
std::vector<int64_t> count_windows(BatchStream& stream, int64_t samples, size_t sources) {
  std::vector<int64_t> counts(sources, 0);
  for (int64_t done = 0; done < samples; done += stream.batch_size()) {
    const Batch b = stream.next();
    for (int64_t row = 0; row < b.inputs.size(0); ++row)
      ++counts[static_cast<size_t>(source_of(b, row))];
  }
  return counts;
}

bool same(const Batch& a, const Batch& b) {
  return torch::equal(a.inputs, b.inputs) && torch::equal(a.targets, b.targets);
}

}  // namespace

TEST_CASE("a single-source stream draws the windows plain streams drew before mixtures",
          "[data][stream][mixture]") {
  // Starts of the first eight windows for seed 42, dc 1, member 2 over shards of 500, 300 and
  // 1000 tokens at seq_len 8, as the stream computed them before data.sources existed: runs
  // with one data.train continue to see the same data.
  const SourceDir dir(0, {500, 300, 1000});
  const TokenDataset data = dir.open();
  const std::vector<int64_t> expected = {2000068, 2000219, 2000824, 92,
                                         100,     2000189, 1000109, 2000089};
  BatchStream plain(data, 8, 8, 42, 1, 2, {});
  BatchStream one({StreamSource{&data, 3.0, {}}}, 8, 8, 42, 1, 2);
  const Batch a = plain.next();
  const Batch b = one.next();
  for (int64_t row = 0; row < 8; ++row)
    CHECK(a.inputs[row][0].item<int64_t>() == expected[static_cast<size_t>(row)]);
  CHECK(same(a, b));
  CHECK(one.samples_by_source() == std::vector<uint64_t>{8});
}

TEST_CASE("mixture shares are within 1% of the weights on every rank's stream",
          "[data][stream][mixture]") {
  const SourceDir web(0, {4000, 3000});
  const SourceDir code(1, {2500});
  const SourceDir books(2, {900, 900, 900});
  const TokenDataset w = web.open(), c = code.open(), k = books.open();
  // Weights need not sum to 1: 0.6, 0.3, 0.1 of the samples.
  const std::vector<StreamSource> sources = {{&w, 6.0, {}}, {&c, 3.0, {}}, {&k, 1.0, {}}};
  const std::vector<double> share = {0.6, 0.3, 0.1};
  for (int dc = 0; dc < 3; ++dc) {
    for (int member = 0; member < 2; ++member) {
      BatchStream stream(sources, 16, 8, 1234, dc, member);
      const int64_t samples = 4000;  // 500 steps of 8 sequences
      const std::vector<int64_t> counts = count_windows(stream, samples, 3);
      for (size_t s = 0; s < 3; ++s) {
        const double realised = static_cast<double>(counts[s]) / samples;
        INFO("dc " << dc << " member " << member << " source " << s << ": " << realised);
        CHECK(std::abs(realised - share[s]) < 0.01);
        CHECK(stream.samples_by_source()[s] == static_cast<uint64_t>(counts[s]));
      }
    }
  }
}

TEST_CASE("mixture shares hold in every short stretch of the stream, not only on average",
          "[data][stream][mixture]") {
  const SourceDir a(0, {3000});
  const SourceDir b(1, {3000});
  const TokenDataset da = a.open(), db = b.open();
  BatchStream stream({{&da, 0.7, {}}, {&db, 0.3, {}}}, 8, 100, 9, 0, 0);
  // Every batch of 100 holds 70 +- 3 samples of the first source: the low-discrepancy choice,
  // where independent draws would stray by +- 9 (two standard deviations) in one batch in 20.
  for (int i = 0; i < 50; ++i) {
    const std::vector<int64_t> counts = count_windows(stream, 100, 2);
    INFO("batch " << i);
    CHECK(std::abs(counts[0] - 70) <= 3);
  }
}

TEST_CASE("a resumed mixture stream continues every source's stream and counts",
          "[data][stream][mixture]") {
  const SourceDir a(0, {2000, 700});
  const SourceDir b(1, {1500});
  const TokenDataset da = a.open(), db = b.open();
  const std::vector<StreamSource> sources = {{&da, 0.5, {}}, {&db, 0.5, {}}};
  BatchStream run(sources, 8, 4, 77, 1, 0);
  for (int i = 0; i < 25; ++i)
    run.next();
  const StreamCursor saved = run.cursor();
  const std::vector<uint64_t> counts = run.samples_by_source();
  std::vector<Batch> after;
  for (int i = 0; i < 10; ++i)
    after.push_back(run.next());

  BatchStream resumed(sources, 8, 4, 77, 1, 0);
  resumed.set_cursor(saved);
  CHECK(resumed.samples_by_source() == counts);
  for (const Batch& expected : after)
    CHECK(same(resumed.next(), expected));
  CHECK(resumed.samples_by_source() == run.samples_by_source());
}

TEST_CASE("mixture sources draw independently: a source's windows do not follow another's",
          "[data][stream][mixture]") {
  // The same corpus twice under two names: were their draws keyed alike, every window of one
  // would repeat in the other.
  const SourceDir a(0, {5000});
  const TokenDataset da = a.open();
  BatchStream stream({{&da, 1.0, {}}, {&da, 1.0, {}}}, 8, 64, 5, 0, 0);
  BatchStream plain(da, 8, 64, 5, 0, 0, {});
  const Batch mixed = stream.next();
  CHECK_FALSE(same(mixed, plain.next()));
}

TEST_CASE("an elastic restart onto fewer dcs keeps the mixture's shares",
          "[data][stream][mixture]") {
  const SourceDir a(0, {3000});
  const SourceDir b(1, {3000});
  const TokenDataset da = a.open(), db = b.open();
  const std::vector<StreamSource> sources = {{&da, 0.25, {}}, {&db, 0.75, {}}};
  // Four dcs train 200 steps of 8 samples each, then two of them go on from their cursors for
  // 300 more: every source's share of all samples drawn stays at its weight.
  std::vector<int64_t> total(2, 0);
  std::vector<StreamCursor> cursors;
  for (int dc = 0; dc < 4; ++dc) {
    BatchStream s(sources, 8, 8, 3, dc, 0);
    const auto c = count_windows(s, 1600, 2);
    total[0] += c[0];
    total[1] += c[1];
    cursors.push_back(s.cursor());
  }
  for (int dc = 0; dc < 2; ++dc) {
    BatchStream s(sources, 8, 8, 3, dc, 0);
    s.set_cursor(cursors[static_cast<size_t>(dc)]);
    const auto c = count_windows(s, 2400, 2);
    total[0] += c[0];
    total[1] += c[1];
  }
  const double share = static_cast<double>(total[0]) / static_cast<double>(total[0] + total[1]);
  CHECK(std::abs(share - 0.25) < 0.01);
}

TEST_CASE("a mixture stream refuses a weight that is not positive", "[data][stream][mixture]") {
  const SourceDir a(0, {100});
  const TokenDataset da = a.open();
  CHECK_THROWS_AS(BatchStream({{&da, 0.0, {}}}, 8, 2, 1, 0, 0), autoloco::DataError);
  CHECK_THROWS_AS(BatchStream({{&da, -1.0, {}}}, 8, 2, 1, 0, 0), autoloco::DataError);
  CHECK_THROWS_AS(BatchStream(std::vector<StreamSource>{}, 8, 2, 1, 0, 0), autoloco::DataError);
}
