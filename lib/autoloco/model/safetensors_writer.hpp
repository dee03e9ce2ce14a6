// Writing one .safetensors file, without LibTorch: the tensors' descriptions and bytes go out in
// the order given, under the header of safetensors_format.hpp, as a new file that never
// replaces an existing one (util/new_file.hpp). safetensors.hpp writes LibTorch tensors
// through it; safetensors_dir.hpp shards a model over several such files.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "autoloco/model/safetensors_format.hpp"

namespace autoloco {

// One tensor to write. Its bytes (numel × dtype_bytes, little-endian, row-major) come from
// `data` when it is set; otherwise `fill` is called with a buffer of that size just before the
// tensor is written, so that tensors held elsewhere (a GPU, a strided view) are copied one at a
// time instead of all at once.
struct SafetensorsBlob {
  std::string name;
  SafetensorsDtype dtype = SafetensorsDtype::F32;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  std::function<void(void* out)> fill;
};

// The metadata transformers writes and expects in the weights it loads.
inline std::map<std::string, std::string> pt_metadata() {
  return {{"format", "pt"}};
}

// The entries (byte ranges laid end to end, in the order given) of `tensors`. Throws
// CheckpointError naming `path` and the tensor for a repeated or reserved name, a negative
// dimension or a size that overflows.
std::vector<SafetensorsEntry> layout_safetensors(const std::vector<SafetensorsBlob>& tensors,
                                                 const std::string& path);

// Writes `tensors` to the new file `path`: written under a temporary name beside it, flushed,
// then given its name. Throws CheckpointError naming the file when it already exists (which stays
// as it was) or cannot be written.
void write_safetensors_file(const std::string& path, const std::vector<SafetensorsBlob>& tensors,
                            const std::map<std::string, std::string>& metadata = pt_metadata());

}  // namespace autoloco
