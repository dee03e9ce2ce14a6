// libFuzzer target: a checkpoint's manifest.json (ckpt/manifest.hpp). Feeds the input as text
// to parse_manifest() and parse_manifest_file(); a manifest that parses is written back with
// to_json() and must parse again to the same values. A CheckpointError is a correct refusal; a
// finding is anything else (another exception, e.g. one of yaml-cpp's, a crash, a sanitizer
// report, a hang), or a manifest that does not survive its own round trip.
#include <cstddef>
#include <cstdint>
#include <string>

#include "autoloco/ckpt/manifest.hpp"
#include "fuzz_support.hpp"

namespace {

bool same(const autoloco::ManifestFile& a, const autoloco::ManifestFile& b) {
  if (a.name != b.name || a.size != b.size || a.datasets.size() != b.datasets.size()) return false;
  for (const auto& [name, sum] : a.datasets) {
    const auto it = b.datasets.find(name);
    if (it == b.datasets.end() || it->second.bytes != sum.bytes || it->second.crc != sum.crc) {
      return false;
    }
  }
  return true;
}

bool same(const autoloco::Manifest& a, const autoloco::Manifest& b) {
  if (a.format_version != b.format_version || a.step != b.step || a.round != b.round ||
      a.reason != b.reason || a.created != b.created || a.files.size() != b.files.size()) {
    return false;
  }
  for (size_t i = 0; i < a.files.size(); ++i) {
    if (!same(a.files[i], b.files[i])) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace autoloco;
  const std::string text(reinterpret_cast<const char*>(data), size);
  fuzz::expect_typed_errors([&] {
    const Manifest m = parse_manifest(text, "fuzz/manifest.json");
    m.total_bytes();
    for (const ManifestFile& f : m.files)
      fuzz::require(m.find(f.name) != nullptr, "find() misses a listed file");
    const Manifest back = parse_manifest(m.to_json(), "fuzz/round-trip.json");
    fuzz::require(same(m, back), "a parsed manifest changes through to_json() and back");
  });
  fuzz::expect_typed_errors([&] {
    const ManifestFile f = parse_manifest_file(text, "fuzz/file.json");
    const ManifestFile back = parse_manifest_file(f.to_json(), "fuzz/round-trip.json");
    fuzz::require(same(f, back), "a parsed manifest entry changes through to_json() and back");
  });
  return 0;
}
