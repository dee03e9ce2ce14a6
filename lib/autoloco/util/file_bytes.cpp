// Whole-file reads (see file_bytes.hpp).
#include "autoloco/util/file_bytes.hpp"

#include <fstream>

namespace autoloco {

std::optional<std::string> read_file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return std::nullopt;
  const std::streamoff size = in.tellg();
  if (size < 0) return std::nullopt;
  std::string bytes(static_cast<size_t>(size), '\0');
  in.seekg(0);
  in.read(bytes.data(), size);
  if (in.gcount() != size) return std::nullopt;
  return bytes;
}

}  // namespace autoloco
