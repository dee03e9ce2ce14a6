// What the checkpoint file's writer and reader (h5_writer.cpp, h5_file.cpp) share: how HDF5 is
// opened, handles closed on scope exit, and a shape's element count.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <functional>
#include <numeric>
#include <vector>

namespace autoloco {

// HDF5 prints its error stack to stderr by default; our messages say what went wrong instead.
inline void silence_hdf5() {
  static const bool done = [] {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    return true;
  }();
  (void)done;
}

// Pinned to the 1.10 file format: readable by h5py and by every HDF5 since 1.10, and its object
// headers carry checksums, so a damaged header fails to open instead of reading garbage.
inline hid_t file_access() {
  hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  H5Pset_libver_bounds(fapl, H5F_LIBVER_V110, H5F_LIBVER_V110);
  return fapl;
}

// Closes an HDF5 handle when it goes out of scope.
struct Handle {
  hid_t id;
  herr_t (*closer)(hid_t);
  ~Handle() {
    if (id >= 0) closer(id);
  }
};

// The element count of a shape whose product is known to fit (written or checked).
inline int64_t product(const std::vector<int64_t>& shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
}

}  // namespace autoloco
