// libFuzzer target: Hugging Face weights (model/safetensors_*.hpp). Feeds the input, written to
// a scratch file, to SafetensorsReader's header checks and, when it opens, reads every tensor's
// bytes; an opened file's header must survive encode_safetensors_header() and parsing again, and
// its tensors written again with write_safetensors_file() must read back the same. The input
// as text also goes to parse_safetensors_index() (model.safetensors.index.json), whose accepted
// indexes must survive encode_safetensors_index() and parsing again. A CheckpointError is a
// correct refusal; a finding is anything else (another exception, e.g. one of yaml-cpp's, a
// crash, a sanitizer report, a hang), or a property above that does not hold.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "autoloco/model/safetensors_dir.hpp"
#include "autoloco/model/safetensors_format.hpp"
#include "autoloco/model/safetensors_reader.hpp"
#include "autoloco/model/safetensors_writer.hpp"
#include "fuzz_support.hpp"

namespace {

using namespace autoloco;

// Every tensor's bytes, in the order of entries().
std::vector<std::string> read_all(const SafetensorsReader& file) {
  std::vector<std::string> bytes;
  uint64_t covered = 0;
  for (const SafetensorsEntry& e : file.entries()) {
    fuzz::require(e.begin == covered, "an opened file's tensors do not tile its data");
    covered = e.end;
    fuzz::require(file.find(e.name) == &e, "find() misses a listed tensor");
    std::string data(e.bytes(), '\0');
    file.read_bytes(e, data.data());
    bytes.push_back(std::move(data));
  }
  return bytes;
}

// The tensors written to a new file beside the input and read again.
void rewrite(const SafetensorsReader& file, const std::vector<std::string>& bytes) {
  std::vector<SafetensorsBlob> blobs;
  for (size_t i = 0; i < file.entries().size(); ++i) {
    const SafetensorsEntry& e = file.entries()[i];
    blobs.push_back(SafetensorsBlob{e.name, e.dtype, e.shape, bytes[i].data(), {}});
  }
  const std::string copy = file.path() + ".copy";
  ::unlink(copy.c_str());
  write_safetensors_file(copy, blobs, file.metadata());
  const SafetensorsReader back(copy);
  const bool same_header = back.entries() == file.entries() && back.metadata() == file.metadata();
  const bool same_bytes = same_header && read_all(back) == bytes;
  ::unlink(copy.c_str());
  fuzz::require(same_header, "a file written again from an opened one has another header");
  fuzz::require(same_bytes, "a file written again from an opened one has other bytes");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const fuzz::ScratchFile scratch(data, size);
  fuzz::expect_typed_errors([&] {
    const SafetensorsReader file(scratch.path());
    const std::vector<std::string> bytes = read_all(file);
    uint64_t data_bytes = 0;
    for (const std::string& b : bytes)
      data_bytes += b.size();
    const SafetensorsHeader again = parse_safetensors_header(
        encode_safetensors_header(file.entries(), file.metadata()), data_bytes, "fuzz/again");
    fuzz::require(again.entries == file.entries() && again.metadata == file.metadata(),
                  "an opened header changes through encode_safetensors_header() and back");
    rewrite(file, bytes);
  });
  const std::string text(reinterpret_cast<const char*>(data), size);
  fuzz::expect_typed_errors([&] {
    const SafetensorsIndex index = parse_safetensors_index(text, "fuzz/index.json");
    const SafetensorsIndex back =
        parse_safetensors_index(encode_safetensors_index(index), "fuzz/round-trip.json");
    fuzz::require(back.total_size == index.total_size && back.weight_map == index.weight_map,
                  "a parsed index changes through encode_safetensors_index() and back");
  });
  return 0;
}
