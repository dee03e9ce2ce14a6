// Test support: checkpoints damaged in what their values mean, not in their bytes. One dataset
// of a checkpoint's file is replaced, the file written anew and the manifest's entry of it
// updated, so the quick check, the sizes and every CRC-32 pass: only the reader's own checks
// (sizes, lengths) or the restore itself can find the damage.
#pragma once

#include <filesystem>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "autoloco/ckpt/h5_file.hpp"
#include "autoloco/ckpt/manifest.hpp"

namespace autoloco::test {

// Copies dataset `name` of `from` into `to` as it is, for the types a checkpoint holds.
inline void copy_dataset(const H5Reader& from, H5Writer& to, const std::string& name) {
  const std::vector<int64_t> shape = from.shape(name);
  switch (from.type(name)) {
    case H5Type::f32:
      to.write(name, from.read_f32(name).data(), shape);
      return;
    case H5Type::f64:
      to.write(name, from.read_f64(name).data(), shape);
      return;
    case H5Type::i64:
      to.write(name, from.read_i64(name).data(), shape);
      return;
    case H5Type::u8:
      to.write(name, from.read_u8(name).data(), shape);
      return;
    case H5Type::text:
      to.write(name, from.read_string(name));
      return;
    case H5Type::other:
      break;
  }
  throw std::runtime_error("copy_dataset: '" + name + "' of '" + from.path() +
                           "' has a type no checkpoint holds");
}

// Rewrites `file` of checkpoint directory `ckpt` with every dataset copied but `name`, which
// `replace` writes instead (in the same place of the order), and updates the manifest.
inline void rewrite_dataset(const std::string& ckpt, const std::string& file,
                            const std::string& name,
                            const std::function<void(H5Writer&)>& replace) {
  namespace fs = std::filesystem;
  const std::string path = ckpt + "/" + file;
  const std::string fresh = path + ".rewritten";
  fs::remove(fresh);
  DatasetSums sums;
  {
    const H5Reader from(path);
    H5Writer to(fresh);
    for (const std::string& set : from.datasets()) {
      if (set == name) {
        replace(to);
      } else {
        copy_dataset(from, to, set);
      }
    }
    sums = to.close();
  }
  fs::rename(fresh, path);
  Manifest m = read_manifest(ckpt);
  for (ManifestFile& f : m.files) {
    if (f.name != file) continue;
    f.datasets = sums;
    f.size = static_cast<int64_t>(fs::file_size(path));
  }
  write_manifest(ckpt, m);
}

}  // namespace autoloco::test
