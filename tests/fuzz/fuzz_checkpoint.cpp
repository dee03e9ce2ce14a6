// libFuzzer target: HDF5 checkpoint files (ckpt/h5_file.hpp), as verify and resume read them.
// Feeds the input, written to a scratch file, to H5Reader: it lists the datasets, takes every
// dataset's sum (what verify_checkpoint compares with the manifest), then reads each dataset by
// its type, once unchecked and once against those sums (what a resume does with the manifest's).
// Every dataset NAME_ranges is then taken as a piece of vector NAME (ckpt/flat_pieces.hpp) and
// assembled into a vector of 2^16 values, as a resume of a sharded run reads its members' shards.
// A CheckpointError is a correct refusal; a finding is anything else (another exception such as
// std::bad_alloc, a crash, a sanitizer report, a hang or an allocation over the fuzzer's limit).
// Crashes inside libhdf5 itself are findings too, though not ours to fix (docs in
// tests/fuzz/README.md).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "autoloco/ckpt/flat_pieces.hpp"
#include "autoloco/ckpt/h5_file.hpp"
#include "fuzz_support.hpp"

namespace {

// Reads one dataset the way the trainer and autoloco-ckpt do for its type.
void read_by_type(const autoloco::H5Reader& r, const std::string& name) {
  using autoloco::H5Type;
  r.shape(name);
  const int64_t n = r.numel(name);
  switch (r.type(name)) {
    case H5Type::f32:
      autoloco::fuzz::require(static_cast<int64_t>(r.read_f32(name).size()) == n, "f32 count");
      break;
    case H5Type::f64:
      autoloco::fuzz::require(static_cast<int64_t>(r.read_f64(name).size()) == n, "f64 count");
      if (n == 1) r.read_double(name);
      break;
    case H5Type::i64:
      autoloco::fuzz::require(static_cast<int64_t>(r.read_i64(name).size()) == n, "i64 count");
      if (n == 1) r.read_int(name);
      break;
    case H5Type::u8:
      autoloco::fuzz::require(static_cast<int64_t>(r.read_u8(name).size()) == n, "u8 count");
      break;
    case H5Type::text:
      r.read_string(name);
      break;
    case H5Type::other:
      break;
  }
}

// The file as one member's pieces of every vector it holds pieces of.
void read_pieces(const autoloco::H5Reader& r, const std::vector<std::string>& names) {
  constexpr int64_t kNumel = int64_t{1} << 16;
  const std::string tail = autoloco::piece_ranges_name("");
  std::vector<float> whole(static_cast<size_t>(kNumel));
  for (const std::string& name : names) {
    if (name.size() <= tail.size() || name.compare(name.size() - tail.size(), tail.size(), tail)) {
      continue;
    }
    autoloco::fuzz::expect_typed_errors([&] {
      autoloco::FlatPieces pieces(name.substr(0, name.size() - tail.size()), kNumel);
      pieces.add(r, {});
      pieces.read_into(whole.data(), {autoloco::FlatRange{0, pieces.extent()}});
    });
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace autoloco;
  const fuzz::ScratchFile scratch(data, size);
  const std::string& path = scratch.path();
  fuzz::expect_typed_errors([&] {
    DatasetSums sums;
    std::vector<std::string> names;
    {
      const H5Reader r(path);
      names = r.datasets();
      for (const std::string& name : names) {
        fuzz::require(r.has(name), "has() misses a dataset that datasets() lists");
        fuzz::expect_typed_errors([&] { read_by_type(r, name); });
      }
      sums = r.sums();
    }
    const H5Reader checked(path, &sums);
    for (const std::string& name : names) {
      fuzz::expect_typed_errors([&] { read_by_type(checked, name); });
    }
    read_pieces(checked, names);
  });
  return 0;
}
