#include "autoloco/ckpt/h5_file.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <hdf5.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <future>
#include <iterator>
#include <numeric>
#include <type_traits>

#include "autoloco/ckpt/h5_access.hpp"
#include "autoloco/util/crc32.hpp"
#include "autoloco/util/durable_file.hpp"
#include "autoloco/util/error.hpp"

namespace autoloco {
namespace {

static_assert(std::is_same_v<hid_t, int64_t>, "HDF5 >= 1.10 has 64-bit hid_t");

// Reads of at least kOverlapBytes go in slices of kSliceBytes, each slice's checksum computed on
// another core while the next is read (autoloco-bench --ckpt measures it).
constexpr size_t kOverlapBytes = size_t{8} << 20;
constexpr size_t kSliceBytes = size_t{32} << 20;

// The element count of a file's dimensions, or -1 when a dimension or their product does not
// fit in int64: HDF5 itself lets the product wrap around (dims {2^32, 2^32} count 0 values).
int64_t checked_product(const std::vector<hsize_t>& dims) {
  int64_t n = 1;
  for (const hsize_t d : dims) {
    if (d > static_cast<hsize_t>(INT64_MAX) ||
        __builtin_mul_overflow(n, static_cast<int64_t>(d), &n)) {
      return -1;
    }
  }
  return n;
}

int64_t file_size(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_size) : 0;
}

// Checkpoints are written in the 1.10 format (superblock version 3), whose metadata carries
// checksums, so a damaged header fails its checksum. HDF5's earliest formats (superblock 0 and 1)
// have none, and libhdf5 1.10 crashes on some damaged ones (tests/fuzz): refuse them before
// libhdf5 parses anything.
void check_superblock(const std::string& path) {
  static constexpr unsigned char kSignature[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
  unsigned char head[9] = {};
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  const ssize_t n = fd < 0 ? -1 : ::pread(fd, head, sizeof(head), 0);
  if (fd >= 0) ::close(fd);
  if (n != static_cast<ssize_t>(sizeof(head)) ||
      !std::equal(std::begin(kSignature), std::end(kSignature), head)) {
    throw CheckpointError(fmt::format(
        "cannot open checkpoint file '{}': missing, truncated or not an HDF5 file", path));
  }
  if (head[8] < 2) {
    throw CheckpointError(fmt::format(
        "checkpoint file '{}' is in HDF5's earliest file format (superblock version {}), which "
        "autoloco never writes and whose headers carry no checksums: another tool wrote or "
        "rewrote it; restore the file autoloco wrote or use another checkpoint",
        path, static_cast<int>(head[8])));
  }
}

}  // namespace

std::string hdf5_version() {
  unsigned major = 0, minor = 0, release = 0;
  H5get_libversion(&major, &minor, &release);
  return fmt::format("{}.{}.{}", major, minor, release);
}

H5Reader::H5Reader(const std::string& path, const DatasetSums* expected)
    : path_(path), expected_(expected) {
  silence_hdf5();
  check_superblock(path);
  const Handle fapl{file_access(), H5Pclose};
  // Reading accepts any format a newer HDF5 may write; only writing is pinned.
  H5Pset_libver_bounds(fapl.id, H5F_LIBVER_EARLIEST, H5F_LIBVER_LATEST);
  file_ = H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.id);
  if (file_ < 0) {
    throw CheckpointError(fmt::format(
        "cannot open checkpoint file '{}': missing, truncated or not an HDF5 file", path));
  }
  file_bytes_ = file_size(path);
}

H5Reader::~H5Reader() {
  if (file_ >= 0) H5Fclose(file_);
}

bool H5Reader::has(const std::string& name) const {
  // H5Lexists on "a/b" fails (not false) when "a" is missing: test each level.
  size_t pos = 0;
  while (true) {
    pos = name.find('/', pos + 1);
    const std::string prefix = name.substr(0, pos);
    if (H5Lexists(file_, prefix.c_str(), H5P_DEFAULT) <= 0) return false;
    if (pos == std::string::npos) return true;
  }
}

std::vector<int64_t> H5Reader::shape(const std::string& name) const {
  if (!has(name)) {
    throw CheckpointError(fmt::format("checkpoint file '{}' has no dataset '{}'", path_, name));
  }
  const Handle set{H5Dopen2(file_, name.c_str(), H5P_DEFAULT), H5Dclose};
  const Handle space{H5Dget_space(set.id), H5Sclose};
  const int rank = H5Sget_simple_extent_ndims(space.id);
  if (set.id < 0 || space.id < 0 || rank < 0) {
    throw CheckpointError(fmt::format("cannot read dataset '{}' of '{}'", name, path_));
  }
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  H5Sget_simple_extent_dims(space.id, dims.data(), nullptr);
  if (checked_product(dims) < 0) {
    throw CheckpointError(fmt::format(
        "checkpoint file '{}': dataset '{}' declares dimensions [{}], whose product does not fit "
        "in 64 bits: the file is damaged; use another checkpoint",
        path_, name, fmt::join(dims, ", ")));
  }
  return {dims.begin(), dims.end()};
}

int64_t H5Reader::numel(const std::string& name) const {
  const int64_t count = product(shape(name));  // shape() checked it for overflow
  // H5Writer stores every value, uncompressed: values that could not fit in the file are not
  // there to read, and a buffer of their size is never allocated.
  const Handle set{H5Dopen2(file_, name.c_str(), H5P_DEFAULT), H5Dclose};
  const Handle type{H5Dget_type(set.id), H5Tclose};
  const size_t elem = type.id < 0 ? 0 : H5Tget_size(type.id);
  if (elem == 0) {
    throw CheckpointError(fmt::format("cannot read the type of dataset '{}' of '{}'", name, path_));
  }
  if (count > file_bytes_ / static_cast<int64_t>(elem)) {
    throw CheckpointError(fmt::format(
        "checkpoint file '{}': dataset '{}' declares {} values of {} bytes, more than the file's "
        "{} bytes hold: the file is damaged; use another checkpoint",
        path_, name, count, elem, file_bytes_));
  }
  return count;
}

H5Type H5Reader::type(const std::string& name) const {
  if (!has(name)) {
    throw CheckpointError(fmt::format("checkpoint file '{}' has no dataset '{}'", path_, name));
  }
  const Handle set{H5Dopen2(file_, name.c_str(), H5P_DEFAULT), H5Dclose};
  const Handle type{H5Dget_type(set.id), H5Tclose};
  const size_t size = H5Tget_size(type.id);
  switch (H5Tget_class(type.id)) {
    case H5T_STRING:
      return H5Tis_variable_str(type.id) > 0 ? H5Type::other : H5Type::text;
    case H5T_FLOAT:
      return size == 4 ? H5Type::f32 : size == 8 ? H5Type::f64 : H5Type::other;
    case H5T_INTEGER: {
      const bool is_signed = H5Tget_sign(type.id) == H5T_SGN_2;
      if (size == 8 && is_signed) return H5Type::i64;
      return size == 1 && !is_signed ? H5Type::u8 : H5Type::other;
    }
    default:
      return H5Type::other;
  }
}

namespace {

// Deeper than any checkpoint nests its groups ("instance_1/adamw/exp_avg" is 3 levels).
constexpr int kMaxGroupDepth = 32;

struct Listing {
  std::vector<std::string> names;
  bool too_deep = false;
};

}  // namespace

std::vector<std::string> H5Reader::datasets() const {
  Listing listing;
#if H5_VERSION_GE(1, 12, 0)
  auto visit = [](hid_t, const char* name, const H5O_info2_t* info, void* out) -> herr_t {
#else
  auto visit = [](hid_t, const char* name, const H5O_info_t* info, void* out) -> herr_t {
#endif
    auto* l = static_cast<Listing*>(out);
    // libhdf5 remembers the groups it has visited only when their link count says they have
    // several links: a damaged group that links to itself would recurse without end.
    if (std::count(name, name + std::strlen(name), '/') > kMaxGroupDepth) {
      l->too_deep = true;
      return 1;  // stops the visit
    }
    if (info->type == H5O_TYPE_DATASET) l->names.emplace_back(name);
    return 0;
  };
#if H5_VERSION_GE(1, 12, 0)
  const herr_t status =
      H5Ovisit3(file_, H5_INDEX_NAME, H5_ITER_NATIVE, visit, &listing, H5O_INFO_BASIC);
#else
  const herr_t status = H5Ovisit(file_, H5_INDEX_NAME, H5_ITER_NATIVE, visit, &listing);
#endif
  if (listing.too_deep) {
    throw CheckpointError(
        fmt::format("'{}' nests groups deeper than {} levels (a group that contains itself): the "
                    "file is damaged; use another checkpoint",
                    path_, kMaxGroupDepth));
  }
  if (status < 0) throw CheckpointError(fmt::format("cannot list the datasets of '{}'", path_));
  return listing.names;
}

void H5Reader::check_bytes(const std::string& name, size_t bytes, bool listed) const {
  if (!expected_) return;
  const auto it = expected_->find(name);
  if (it == expected_->end()) {
    if (!listed) return;
    throw CheckpointError(
        fmt::format("checkpoint file '{}': dataset '{}' is not in the manifest", path_, name));
  }
  if (it->second.bytes != static_cast<int64_t>(bytes)) {
    throw CheckpointError(
        fmt::format("checkpoint file '{}': dataset '{}' does not match the manifest ({} bytes; the "
                    "manifest says {} bytes): the file is corrupted",
                    path_, name, bytes, it->second.bytes));
  }
}

void H5Reader::check_sum(const std::string& name, const void* data, size_t bytes) const {
  if (expected_) check_sum(name, bytes, crc32(data, bytes));
}

void H5Reader::check_sum(const std::string& name, size_t bytes, uint32_t crc) const {
  const auto it = expected_->find(name);
  if (it == expected_->end()) {
    throw CheckpointError(
        fmt::format("checkpoint file '{}': dataset '{}' is not in the manifest", path_, name));
  }
  if (it->second.bytes != static_cast<int64_t>(bytes) || it->second.crc != crc) {
    throw CheckpointError(fmt::format(
        "checkpoint file '{}': dataset '{}' does not match the manifest ({} bytes, crc32 {:08x}; "
        "the manifest says {} bytes, crc32 {:08x}): the file is corrupted",
        path_, name, bytes, crc, it->second.bytes, it->second.crc));
  }
}

void H5Reader::read_raw(const std::string& name, int64_t type, void* out, size_t elem_size,
                        int64_t count) const {
  const int64_t have = numel(name);
  if (have != count) {
    throw CheckpointError(
        fmt::format("checkpoint file '{}': dataset '{}' holds {} values where {} are expected",
                    path_, name, have, count));
  }
  // numel() bounded `count` by the file's size: no overflow.
  const size_t bytes = static_cast<size_t>(count) * elem_size;
  check_bytes(name, bytes, /*listed=*/true);
  const Handle set{H5Dopen2(file_, name.c_str(), H5P_DEFAULT), H5Dclose};
  if (expected_ && bytes >= kOverlapBytes && shape(name).size() == 1) {
    uint32_t crc = 0;
    if (!read_overlapped(set.id, type, out, elem_size, count, crc)) {
      throw CheckpointError(
          fmt::format("cannot read dataset '{}' of '{}': the file is damaged", name, path_));
    }
    check_sum(name, bytes, crc);
    return;
  }
  if (count > 0 && H5Dread(set.id, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out) < 0) {
    throw CheckpointError(
        fmt::format("cannot read dataset '{}' of '{}': the file is damaged", name, path_));
  }
  check_sum(name, out, bytes);
}

bool H5Reader::read_overlapped(int64_t set, int64_t type, void* out, size_t elem_size,
                               int64_t count, uint32_t& crc) const {
  const Handle file_space{H5Dget_space(set), H5Sclose};
  const hsize_t per = std::max<hsize_t>(1, kSliceBytes / elem_size);
  auto* base = static_cast<uint8_t*>(out);
  crc = 0;
  std::future<uint32_t> pending;
  bool ok = file_space.id >= 0;
  for (hsize_t start = 0; ok && start < static_cast<hsize_t>(count); start += per) {
    const hsize_t n = std::min(per, static_cast<hsize_t>(count) - start);
    const Handle memory{H5Screate_simple(1, &n, nullptr), H5Sclose};
    uint8_t* slice = base + start * elem_size;
    ok = H5Sselect_hyperslab(file_space.id, H5S_SELECT_SET, &start, nullptr, &n, nullptr) >= 0 &&
         H5Dread(set, type, memory.id, file_space.id, H5P_DEFAULT, slice) >= 0;
    if (pending.valid()) crc = pending.get();
    if (ok) {
      pending = std::async(std::launch::async,
                           [slice, len = n * elem_size, crc] { return crc32(slice, len, crc); });
    }
  }
  if (pending.valid()) crc = pending.get();
  return ok;
}

void H5Reader::read(const std::string& name, float* out, int64_t count) const {
  read_raw(name, H5T_NATIVE_FLOAT, out, sizeof(float), count);
}
void H5Reader::read(const std::string& name, double* out, int64_t count) const {
  read_raw(name, H5T_NATIVE_DOUBLE, out, sizeof(double), count);
}
void H5Reader::read(const std::string& name, int64_t* out, int64_t count) const {
  read_raw(name, H5T_NATIVE_INT64, out, sizeof(int64_t), count);
}
void H5Reader::read(const std::string& name, uint8_t* out, int64_t count) const {
  read_raw(name, H5T_NATIVE_UINT8, out, sizeof(uint8_t), count);
}

// The vector's size is the file's word: bounded by the file and the manifest before allocating.
template <class T>
std::vector<T> H5Reader::read_all(const std::string& name) const {
  const int64_t count = numel(name);
  check_bytes(name, static_cast<size_t>(count) * sizeof(T), /*listed=*/true);
  std::vector<T> out(static_cast<size_t>(count));
  read(name, out.data(), count);
  return out;
}

std::vector<float> H5Reader::read_f32(const std::string& name) const {
  return read_all<float>(name);
}
std::vector<double> H5Reader::read_f64(const std::string& name) const {
  return read_all<double>(name);
}
std::vector<int64_t> H5Reader::read_i64(const std::string& name) const {
  return read_all<int64_t>(name);
}
std::vector<uint8_t> H5Reader::read_u8(const std::string& name) const {
  return read_all<uint8_t>(name);
}
int64_t H5Reader::read_int(const std::string& name) const {
  int64_t v = 0;
  read(name, &v, 1);
  return v;
}
double H5Reader::read_double(const std::string& name) const {
  double v = 0;
  read(name, &v, 1);
  return v;
}

std::string H5Reader::read_string(const std::string& name) const {
  if (!has(name)) {
    throw CheckpointError(fmt::format("checkpoint file '{}' has no dataset '{}'", path_, name));
  }
  const Handle set{H5Dopen2(file_, name.c_str(), H5P_DEFAULT), H5Dclose};
  const Handle type{H5Dget_type(set.id), H5Tclose};
  if (set.id < 0 || type.id < 0 || H5Tget_class(type.id) != H5T_STRING ||
      H5Tis_variable_str(type.id) > 0) {
    throw CheckpointError(fmt::format(
        "checkpoint file '{}': dataset '{}' is not a fixed-length string", path_, name));
  }
  // One string: HDF5 would write every element of a longer dataspace into the buffer.
  if (numel(name) != 1) {
    throw CheckpointError(fmt::format(
        "checkpoint file '{}': dataset '{}' holds {} strings where one is expected: the file is "
        "damaged; use another checkpoint",
        path_, name, numel(name)));
  }
  const size_t size = H5Tget_size(type.id);
  check_bytes(name, size, /*listed=*/true);
  std::string text(size, '\0');
  if (H5Dread(set.id, type.id, H5S_ALL, H5S_ALL, H5P_DEFAULT, text.data()) < 0) {
    throw CheckpointError(
        fmt::format("cannot read dataset '{}' of '{}': the file is damaged", name, path_));
  }
  check_sum(name, text.data(), text.size());
  text.erase(text.find_last_not_of('\0') + 1);
  return text;
}

DatasetSums H5Reader::sums() const {
  DatasetSums out;
  for (const std::string& name : datasets()) {
    const Handle set{H5Dopen2(file_, name.c_str(), H5P_DEFAULT), H5Dclose};
    const Handle type{H5Dget_type(set.id), H5Tclose};
    // numel() bounded the count by the file's size; a size the manifest contradicts is refused
    // before the buffer is allocated (one it does not list is verify's to report).
    const size_t bytes = static_cast<size_t>(numel(name)) * H5Tget_size(type.id);
    check_bytes(name, bytes, /*listed=*/false);
    std::vector<uint8_t> raw(bytes);
    // The file's own type as memory type: the bytes as they were written (same machine order).
    if (bytes > 0 && H5Dread(set.id, type.id, H5S_ALL, H5S_ALL, H5P_DEFAULT, raw.data()) < 0) {
      throw CheckpointError(
          fmt::format("cannot read dataset '{}' of '{}': the file is damaged", name, path_));
    }
    out[name] = DatasetSum{static_cast<int64_t>(bytes), crc32(raw.data(), bytes)};
  }
  return out;
}

}  // namespace autoloco
