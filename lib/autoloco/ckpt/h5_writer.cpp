// H5Writer (h5_file.hpp): checkpoint files written dataset by dataset, each dataset's CRC-32
// recorded for the manifest, the file flushed to the disk when closed.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <hdf5.h>

#include <cstdint>
#include <functional>
#include <future>
#include <numeric>

#include "autoloco/ckpt/h5_access.hpp"
#include "autoloco/ckpt/h5_file.hpp"
#include "autoloco/util/crc32.hpp"
#include "autoloco/util/durable_file.hpp"
#include "autoloco/util/error.hpp"

namespace autoloco {
namespace {

// The type HDF5 stores for H5Writer::declare's element types.
hid_t declared_type(H5Type type) {
  switch (type) {
    case H5Type::f32:
      return H5Tcopy(H5T_NATIVE_FLOAT);
    case H5Type::f64:
      return H5Tcopy(H5T_NATIVE_DOUBLE);
    case H5Type::i64:
      return H5Tcopy(H5T_NATIVE_INT64);
    case H5Type::u8:
      return H5Tcopy(H5T_NATIVE_UINT8);
    case H5Type::text: {
      const hid_t text = H5Tcopy(H5T_C_S1);
      H5Tset_size(text, 8);
      return text;
    }
    case H5Type::other:
      break;
  }
  return H5Tcopy(H5T_STD_I16LE);  // a type no reader of autoloco's reads
}

}  // namespace

H5Writer::H5Writer(const std::string& path) : path_(path) {
  silence_hdf5();
  const Handle fapl{file_access(), H5Pclose};
  file_ = H5Fcreate(path.c_str(), H5F_ACC_EXCL, H5P_DEFAULT, fapl.id);
  if (file_ < 0) {
    throw CheckpointError(fmt::format(
        "cannot create checkpoint file '{}' (it exists, or the directory is not writable)", path));
  }
  lcpl_ = H5Pcreate(H5P_LINK_CREATE);
  H5Pset_create_intermediate_group(lcpl_, 1);
}

H5Writer::~H5Writer() {
  if (lcpl_ >= 0) H5Pclose(lcpl_);
  if (file_ >= 0) H5Fclose(file_);
}

void H5Writer::write_raw(const std::string& name, int64_t type, const void* data, size_t elem_size,
                         const std::vector<int64_t>& shape) {
  std::vector<hsize_t> dims(shape.begin(), shape.end());
  const Handle space{shape.empty()
                         ? H5Screate(H5S_SCALAR)
                         : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
                     H5Sclose};
  const Handle set{H5Dcreate2(file_, name.c_str(), type, space.id, lcpl_, H5P_DEFAULT, H5P_DEFAULT),
                   H5Dclose};
  const size_t bytes = static_cast<size_t>(product(shape)) * elem_size;
  // A large buffer's checksum is computed on another core while HDF5 writes it: the write then
  // costs what the disk costs (autoloco-bench --ckpt measures it).
  constexpr size_t kAsyncBytes = size_t{1} << 20;
  std::future<uint32_t> sum;
  if (bytes >= kAsyncBytes)
    sum = std::async(std::launch::async, [=] { return crc32(data, bytes); });
  const bool ok = space.id >= 0 && set.id >= 0 &&
                  (bytes == 0 || H5Dwrite(set.id, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0);
  const uint32_t crc = sum.valid() ? sum.get() : crc32(data, bytes);
  if (!ok) {
    throw CheckpointError(
        fmt::format("cannot write dataset '{}' of '{}': check disk space", name, path_));
  }
  sums_[name] = DatasetSum{static_cast<int64_t>(bytes), crc};
}

void H5Writer::write(const std::string& name, const float* data,
                     const std::vector<int64_t>& shape) {
  write_raw(name, H5T_NATIVE_FLOAT, data, sizeof(float), shape);
}
void H5Writer::write(const std::string& name, const double* data,
                     const std::vector<int64_t>& shape) {
  write_raw(name, H5T_NATIVE_DOUBLE, data, sizeof(double), shape);
}
void H5Writer::write(const std::string& name, const int64_t* data,
                     const std::vector<int64_t>& shape) {
  write_raw(name, H5T_NATIVE_INT64, data, sizeof(int64_t), shape);
}
void H5Writer::write(const std::string& name, const uint8_t* data,
                     const std::vector<int64_t>& shape) {
  write_raw(name, H5T_NATIVE_UINT8, data, sizeof(uint8_t), shape);
}
void H5Writer::write(const std::string& name, const std::vector<int64_t>& values) {
  write(name, values.data(), {static_cast<int64_t>(values.size())});
}
void H5Writer::write(const std::string& name, const std::vector<double>& values) {
  write(name, values.data(), {static_cast<int64_t>(values.size())});
}

void H5Writer::write(const std::string& name, const std::string& text) {
  // A zero-sized string type is not allowed: an empty string is stored as one NUL.
  const std::string stored = text.empty() ? std::string(1, '\0') : text;
  const Handle type{H5Tcopy(H5T_C_S1), H5Tclose};
  H5Tset_size(type.id, stored.size());
  H5Tset_strpad(type.id, H5T_STR_NULLPAD);
  write_raw(name, type.id, stored.data(), stored.size(), {});
}

void H5Writer::declare(const std::string& name, H5Type type, const std::vector<uint64_t>& dims) {
  const std::vector<hsize_t> extent(dims.begin(), dims.end());
  const Handle space{H5Screate_simple(static_cast<int>(extent.size()), extent.data(), nullptr),
                     H5Sclose};
  const Handle stored{declared_type(type), H5Tclose};
  const Handle set{
      H5Dcreate2(file_, name.c_str(), stored.id, space.id, lcpl_, H5P_DEFAULT, H5P_DEFAULT),
      H5Dclose};
  if (space.id < 0 || set.id < 0) {
    throw CheckpointError(fmt::format("cannot declare dataset '{}' of '{}' with dimensions [{}]",
                                      name, path_, fmt::join(dims, ", ")));
  }
}

DatasetSums H5Writer::close() {
  H5Pclose(lcpl_);
  lcpl_ = -1;
  const herr_t flushed = H5Fflush(file_, H5F_SCOPE_GLOBAL);
  const herr_t closed = H5Fclose(file_);
  file_ = -1;
  if (flushed < 0 || closed < 0) {
    throw CheckpointError(
        fmt::format("cannot close checkpoint file '{}': check disk space", path_));
  }
  try {
    fsync_file(path_);
  } catch (const Error& e) {
    throw CheckpointError(fmt::format("{}; check disk space", e.what()));
  }
  return sums_;
}

}  // namespace autoloco
