// Thin RAII wrappers over HDF5's C API for checkpoint files: named datasets of numbers and
// strings (groups made on the way), each write recording the dataset's CRC-32 for the manifest,
// each read checking it when the manifest's sums are given. Errors are CheckpointErrors that
// name the file and the dataset; HDF5's own error printing is switched off.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace autoloco {

// What a manifest keeps of one dataset: its byte count and the CRC-32 of its bytes.
struct DatasetSum {
  int64_t bytes = 0;
  uint32_t crc = 0;
};
using DatasetSums = std::map<std::string, DatasetSum>;

// The element types a checkpoint holds (what H5Writer writes).
enum class H5Type { f32, f64, i64, u8, text, other };

class H5Writer {
 public:
  // Creates `path`; an existing file is an error (checkpoints are never written over).
  explicit H5Writer(const std::string& path);
  ~H5Writer();
  H5Writer(const H5Writer&) = delete;
  H5Writer& operator=(const H5Writer&) = delete;

  // `shape` empty means a scalar. The data is host memory of prod(shape) elements.
  void write(const std::string& name, const float* data, const std::vector<int64_t>& shape);
  void write(const std::string& name, const double* data, const std::vector<int64_t>& shape);
  void write(const std::string& name, const int64_t* data, const std::vector<int64_t>& shape);
  void write(const std::string& name, const uint8_t* data, const std::vector<int64_t>& shape);
  void write(const std::string& name, int64_t value) { write(name, &value, {}); }
  void write(const std::string& name, double value) { write(name, &value, {}); }
  void write(const std::string& name, const std::vector<int64_t>& values);
  void write(const std::string& name, const std::vector<double>& values);
  // A fixed-length string (h5py reads it as bytes).
  void write(const std::string& name, const std::string& text);
  // A dataset of `dims` whose values are never written: HDF5 stores none (a reader would see
  // fill values) and no sum is recorded. The trainer never declares one; the tests and the fuzz
  // seeds do, for files that claim more values than they hold, whose dimensions may even
  // overflow (H5Reader must refuse them before it allocates). `type` text: 8-byte strings.
  void declare(const std::string& name, H5Type type, const std::vector<uint64_t>& dims);

  // Closes the file and flushes it to the disk (fsync). Returns the sums of every dataset.
  DatasetSums close();
  const std::string& path() const { return path_; }

 private:
  void write_raw(const std::string& name, int64_t type, const void* data, size_t elem_size,
                 const std::vector<int64_t>& shape);
  std::string path_;
  int64_t file_ = -1;
  int64_t lcpl_ = -1;  // link creation: make intermediate groups
  DatasetSums sums_;
};

class H5Reader {
 public:
  // Opens `path` read-only. With `expected`, every read checks the dataset's bytes against it
  // (and a dataset missing from it is an error). A file in HDF5's earliest formats (superblock
  // 0 or 1: no checksums), which H5Writer never writes, is refused.
  // The file is not trusted: before anything is allocated for a dataset, its element count is
  // the product of its dimensions checked for overflow, and its bytes must fit in the file
  // (H5Writer stores every value, uncompressed) and equal the byte count in `expected`.
  explicit H5Reader(const std::string& path, const DatasetSums* expected = nullptr);
  ~H5Reader();
  H5Reader(const H5Reader&) = delete;
  H5Reader& operator=(const H5Reader&) = delete;

  bool has(const std::string& name) const;
  std::vector<int64_t> shape(const std::string& name) const;
  // The element count, checked as the constructor's comment says (but for the manifest).
  int64_t numel(const std::string& name) const;
  H5Type type(const std::string& name) const;
  // Every dataset's path, in HDF5's visiting order.
  std::vector<std::string> datasets() const;

  // Reads exactly `count` elements (the dataset must hold that many). The vectors' reads below
  // take the dataset's own count, bounded as the constructor says; a string is one element.
  void read(const std::string& name, float* out, int64_t count) const;
  void read(const std::string& name, double* out, int64_t count) const;
  void read(const std::string& name, int64_t* out, int64_t count) const;
  void read(const std::string& name, uint8_t* out, int64_t count) const;
  std::vector<float> read_f32(const std::string& name) const;
  std::vector<double> read_f64(const std::string& name) const;
  std::vector<int64_t> read_i64(const std::string& name) const;
  std::vector<uint8_t> read_u8(const std::string& name) const;
  int64_t read_int(const std::string& name) const;
  double read_double(const std::string& name) const;
  std::string read_string(const std::string& name) const;

  // Recomputes every dataset's sum (for verify).
  DatasetSums sums() const;
  const std::string& path() const { return path_; }

 private:
  void read_raw(const std::string& name, int64_t type, void* out, size_t elem_size,
                int64_t count) const;
  // With a manifest, throws unless it lists `name` with `bytes`: done before the dataset's
  // values are allocated and read. `listed`: a dataset the manifest lacks is an error too.
  void check_bytes(const std::string& name, size_t bytes, bool listed) const;
  template <class T>
  std::vector<T> read_all(const std::string& name) const;
  void check_sum(const std::string& name, const void* data, size_t bytes) const;
  void check_sum(const std::string& name, size_t bytes, uint32_t crc) const;
  // A large 1-D dataset read in slices, each slice's checksum computed while the next is read.
  // False when a slice could not be read; else `crc` is the checksum of all of it.
  bool read_overlapped(int64_t set, int64_t type, void* out, size_t elem_size, int64_t count,
                       uint32_t& crc) const;
  std::string path_;
  int64_t file_ = -1;
  int64_t file_bytes_ = 0;  // the file's size on disk: no dataset's values can be larger
  const DatasetSums* expected_ = nullptr;
};

// HDF5 library version "major.minor.release".
std::string hdf5_version();

}  // namespace autoloco
