// ckpt/flat_pieces.hpp: a vector written in pieces by one split reads back exactly into any
// other split, whole files and pieces mix, and a missing piece or a damaged range list is a
// CheckpointError naming the vector.
#include <catch2/catch.hpp>

#include <algorithm>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "../support/temp_dir.hpp"
#include "autoloco/ckpt/flat_pieces.hpp"
#include "autoloco/ckpt/h5_file.hpp"
#include "autoloco/util/error.hpp"

using namespace autoloco;

namespace {

constexpr int64_t kNumel = 11;  // no split below divides it

std::vector<float> vector_values() {
  std::vector<float> v(kNumel);
  std::iota(v.begin(), v.end(), 1.0f);
  return v;
}

// Member m of `members` writes [m S, min(n, (m + 1) S)) with S = ceil(n / members), as the
// sharded modes do, into its own file.
std::vector<std::string> write_split(const test::TempDir& dir, int members) {
  const std::vector<float> v = vector_values();
  const int64_t size = (kNumel + members - 1) / members;
  std::vector<std::string> paths;
  for (int m = 0; m < members; ++m) {
    const int64_t begin = std::min(kNumel, m * size);
    const int64_t count = std::min(kNumel, begin + size) - begin;
    paths.push_back(dir.file("rank_" + std::to_string(m) + ".h5"));
    H5Writer w(paths.back());
    write_flat_piece(w, "adamw/exp_avg", v.data() + begin, {FlatRange{begin, count}});
    w.close();
  }
  return paths;
}

}  // namespace

TEST_CASE("flat pieces written by 3 members read back into 2 and 4 and whole exactly",
          "[unit][ckpt]") {
  const test::TempDir dir("flat-pieces");
  const std::vector<std::string> paths = write_split(dir, 3);
  std::vector<std::unique_ptr<H5Reader>> readers;
  FlatPieces pieces("adamw/exp_avg", kNumel);
  for (const std::string& p : paths) {
    readers.push_back(std::make_unique<H5Reader>(p));
    pieces.add(*readers.back(), {});
  }
  REQUIRE(pieces.found());
  CHECK(pieces.extent() == kNumel);
  const std::vector<float> v = vector_values();
  for (int members : {1, 2, 4}) {
    const int64_t size = (kNumel + members - 1) / members;
    for (int m = 0; m < members; ++m) {
      const int64_t begin = std::min(kNumel, m * size);
      const int64_t end = std::min(kNumel, begin + size);
      std::vector<float> whole(kNumel, -1.0f);
      pieces.read_into(whole.data(), {FlatRange{begin, end - begin}});
      for (int64_t i = 0; i < kNumel; ++i) {
        INFO(members << " members, member " << m << ", element " << i);
        CHECK(whole[static_cast<size_t>(i)] ==
              (i >= begin && i < end ? v[static_cast<size_t>(i)] : -1.0f));
      }
    }
  }
}

TEST_CASE("flat pieces: a whole dataset and pieces of several ranges read alike", "[unit][ckpt]") {
  const test::TempDir dir("flat-whole");
  const std::vector<float> v = vector_values();
  {
    H5Writer w(dir.file("global.h5"));
    w.write("outer/anchor", v.data(), {kNumel});
    w.close();
    // One piece of two ranges, as a member's shards of two fragments.
    H5Writer k(dir.file("rank_0.h5"));
    const std::vector<float> parts = {v[1], v[2], v[7], v[8], v[9]};
    write_flat_piece(k, "outer/anchor", parts.data(), {FlatRange{1, 2}, FlatRange{7, 3}});
    k.close();
  }
  const H5Reader whole_file(dir.file("global.h5"));
  const H5Reader piece_file(dir.file("rank_0.h5"));
  FlatPieces from_whole("outer/anchor", kNumel);
  from_whole.add_whole(whole_file);
  FlatPieces from_piece("outer/anchor", kNumel);
  from_piece.add(piece_file, {});
  const std::vector<FlatRange> want = {FlatRange{2, 1}, FlatRange{7, 3}};
  std::vector<float> a(kNumel, 0.0f), b(kNumel, 0.0f);
  from_whole.read_into(a.data(), want);
  from_piece.read_into(b.data(), want);
  CHECK(a == b);
  CHECK(b[2] == v[2]);
  CHECK(b[9] == v[9]);
  CHECK(b[1] == 0.0f);  // not asked for
}

TEST_CASE("flat pieces: a missing piece and a damaged range list are refused", "[unit][ckpt]") {
  const test::TempDir dir("flat-missing");
  const std::vector<std::string> paths = write_split(dir, 3);
  const H5Reader first(paths[0]), last(paths[2]);
  FlatPieces pieces("adamw/exp_avg", kNumel);
  pieces.add(first, {});
  pieces.add(last, {});  // member 1's file is missing
  std::vector<float> whole(kNumel);
  CHECK_NOTHROW(pieces.read_into(whole.data(), {FlatRange{0, 4}}));
  CHECK_THROWS_WITH(pieces.read_into(whole.data(), {FlatRange{0, kNumel}}),
                    Catch::Contains("adamw/exp_avg") && Catch::Contains("element 4"));
  {
    H5Writer w(dir.file("bad.h5"));
    const std::vector<float> values(3, 1.0f);
    write_flat_piece(w, "outer/anchor", values.data(), {FlatRange{9, 3}});  // past the end
    w.close();
  }
  const H5Reader bad(dir.file("bad.h5"));
  FlatPieces damaged("outer/anchor", kNumel);
  CHECK_THROWS_AS(damaged.add(bad, {}), CheckpointError);
  {
    // Ranges that name more values than the piece holds: refused before anything is read.
    H5Writer w(dir.file("short.h5"));
    const std::vector<float> values(2, 1.0f);
    w.write("outer/anchor", values.data(), {2});
    const std::vector<int64_t> pairs = {0, 3};
    w.write("outer/anchor_ranges", pairs.data(), {1, 2});
    w.close();
  }
  const H5Reader short_piece(dir.file("short.h5"));
  FlatPieces truncated("outer/anchor", kNumel);
  CHECK_THROWS_WITH(truncated.add(short_piece, {}),
                    Catch::Contains("holds 2 values where its ranges name 3"));
}
