// autoloco-bench --ckpt: the checkpoint path against plain POSIX I/O of the same bytes on the
// same disk, in one process. The checkpoint path is what Trainer::save_checkpoint and a resume
// do for one file: a temporary checkpoint directory, one HDF5 file holding a float32 dataset of
// --bytes bytes plus a few small datasets (H5Writer: CRC-32 of every dataset, fsync on close),
// manifest.json, the rename that commits it; then the manifest read back and the file read with
// H5Reader given the manifest's sums, so every dataset's CRC-32 is checked. The baseline is a
// sequential write() in large chunks, fsync, close, and read() of the same bytes into the same
// buffer. Before every read the file is evicted from the page cache (posix_fadvise DONTNEED
// after fsync), and mincore() says how much of it stayed resident, so the output tells whether
// the reads really went to the disk. After one untimed write of the file (the first write to a
// fresh page cache is slow), the two alternate R times, each going first every other time; the
// median of each is reported (the best too), with the ratios checkpoint / baseline and the
// in-memory CRC-32 speed, the part of the checkpoint path that the baseline does not do.
#include <fcntl.h>
#include <fmt/format.h>
#include <mpi.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "autoloco/ckpt/checkpoint_dir.hpp"
#include "autoloco/ckpt/h5_file.hpp"
#include "autoloco/ckpt/layout.hpp"
#include "autoloco/ckpt/manifest.hpp"
#include "autoloco/util/crc32.hpp"
#include "autoloco/util/error.hpp"
#include "autoloco/util/json.hpp"
#include "autoloco/util/timer.hpp"
#include "bench.hpp"

namespace autoloco::bench {
namespace fs = std::filesystem;
namespace {

constexpr size_t kChunk = size_t{16} << 20;  // the baseline's write()/read() size
constexpr const char* kTensor = "outer/anchor";

[[noreturn]] void fail(const std::string& what, const std::string& path) {
  throw Error(what + " '" + path + "': " + std::strerror(errno));
}

// Flushes `path` and asks the kernel to drop its pages; returns the fraction still resident
// (0 when eviction worked, -1 when it could not be measured).
double evict(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) fail("cannot open", path);
  if (::fsync(fd) != 0) fail("cannot fsync", path);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  const off_t size = ::lseek(fd, 0, SEEK_END);
  double resident = -1.0;
  if (size > 0) {
    void* map = ::mmap(nullptr, static_cast<size_t>(size), PROT_READ, MAP_SHARED, fd, 0);
    if (map != MAP_FAILED) {
      const long page = ::sysconf(_SC_PAGESIZE);
      const size_t pages =
          (static_cast<size_t>(size) + static_cast<size_t>(page) - 1) / static_cast<size_t>(page);
      std::vector<unsigned char> in_core(pages);
      if (::mincore(map, static_cast<size_t>(size), in_core.data()) == 0) {
        const auto n = std::count_if(in_core.begin(), in_core.end(),
                                     [](unsigned char c) { return (c & 1) != 0; });
        resident = static_cast<double>(n) / static_cast<double>(pages);
      }
      ::munmap(map, static_cast<size_t>(size));
    }
  }
  ::close(fd);
  return resident;
}

double posix_write(const std::string& path, const char* data, size_t bytes) {
  Timer t;
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (fd < 0) fail("cannot create", path);
  for (size_t done = 0; done < bytes;) {
    const ssize_t n = ::write(fd, data + done, std::min(kChunk, bytes - done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("cannot write", path);
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) fail("cannot fsync", path);
  ::close(fd);
  return t.seconds();
}

double posix_read(const std::string& path, char* out, size_t bytes) {
  Timer t;
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) fail("cannot open", path);
  for (size_t done = 0; done < bytes;) {
    const ssize_t n = ::read(fd, out + done, std::min(kChunk, bytes - done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("cannot read", path);
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return t.seconds();
}

// What global.h5 holds besides the anchor: scalars, a config text, a short vector.
void write_small(H5Writer& w) {
  w.write("format_version", kCheckpointFormat);
  w.write("config", std::string(2048, 'c'));
  w.write("counters/step", int64_t{1000});
  w.write("counters/h_per_round", std::vector<int64_t>(64, 20));
  w.write("counters/round_lr_sum", 0.5);
}

void read_small(const H5Reader& r) {
  (void)r.read_int("format_version");
  (void)r.read_string("config");
  (void)r.read_int("counters/step");
  (void)r.read_i64("counters/h_per_round");
  (void)r.read_double("counters/round_lr_sum");
}

// Returns the committed checkpoint's path and its write time.
std::pair<std::string, double> ckpt_write(const std::string& dir, int64_t step, const float* data,
                                          int64_t count) {
  Timer t;
  const std::string tmp = begin_checkpoint(dir, step);
  H5Writer w(tmp + "/" + kGlobalFile);
  w.write(kTensor, data, {count});
  write_small(w);
  ManifestFile f;
  f.name = kGlobalFile;
  f.datasets = w.close();
  f.size = static_cast<int64_t>(fs::file_size(w.path()));
  Manifest m;
  m.format_version = kCheckpointFormat;
  m.step = step;
  m.reason = "bench";
  m.created = utc_now();
  m.files.push_back(f);
  write_manifest(tmp, m);
  const std::string path = commit_checkpoint(dir, tmp, step);
  return {path, t.seconds()};
}

double ckpt_read(const std::string& path, float* out, int64_t count) {
  Timer t;
  const Manifest m = read_manifest(path);
  const ManifestFile* f = m.find(kGlobalFile);
  if (!f) throw CheckpointError("bench: the manifest lists no " + std::string(kGlobalFile));
  const H5Reader r(path + "/" + kGlobalFile, &f->datasets);
  r.read(kTensor, out, count);
  read_small(r);
  return t.seconds();
}

// Removes the bench's working directory however ckpt() ends.
struct RemoveOnExit {
  fs::path path;
  ~RemoveOnExit() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

int ckpt(const Args& args) {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  if (world != 1) throw ConfigError("--ckpt runs in one process: start it without mpirun");
  const int64_t bytes = args.ckpt_bytes;
  const int64_t count = bytes / 4;
  const auto n = static_cast<size_t>(bytes);

  const fs::path parent =
      args.ckpt_dir.empty() ? fs::temp_directory_path() : fs::path(args.ckpt_dir);
  fs::create_directories(parent);
  const fs::path work = parent / ("autoloco-bench-ckpt-" + std::to_string(::getpid()));
  fs::remove_all(work);
  fs::create_directories(work / "checkpoints");
  const RemoveOnExit cleanup{work};
  const std::string ckpt_dir = (work / "checkpoints").string();
  const std::string plain_path = (work / "plain.bin").string();

  // Both buffers are touched before any timing, so no page fault is measured.
  std::vector<float> data(static_cast<size_t>(count));
  uint32_t x = 0x9E3779B9u;
  for (float& v : data) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    v = static_cast<float>(x >> 8) * (1.0f / 16777216.0f) - 0.5f;
  }
  std::vector<float> in(static_cast<size_t>(count), 0.0f);

  // CRC-32 alone, in memory: the part of the checkpoint path the baseline does not do.
  Timer crc_timer;
  const uint32_t crc = crc32(data.data(), n);
  const double crc_s = crc_timer.seconds();

  std::vector<double> cw, cr, pw, pr;
  double worst_resident = 0.0;
  bool measured = true, checks = true;
  int64_t file_bytes = 0;
  std::vector<JsonObject> runs;
  posix_write(plain_path, reinterpret_cast<const char*>(data.data()), n);  // warm-up
  fs::remove(plain_path);
  for (int64_t r = 0; r < args.repeats; ++r) {
    // Each file is written, evicted, read back, checked and removed.
    double plain_resident = 0.0, ckpt_resident = 0.0;
    const auto baseline = [&] {
      pw.push_back(posix_write(plain_path, reinterpret_cast<const char*>(data.data()), n));
      plain_resident = evict(plain_path);
      std::fill(in.begin(), in.end(), 0.0f);
      pr.push_back(posix_read(plain_path, reinterpret_cast<char*>(in.data()), n));
      checks = checks && std::memcmp(in.data(), data.data(), n) == 0;
      fs::remove(plain_path);
    };
    const auto checkpoint = [&] {
      const auto [path, write_s] = ckpt_write(ckpt_dir, r + 1, data.data(), count);
      cw.push_back(write_s);
      const std::string h5 = path + "/" + kGlobalFile;
      file_bytes = static_cast<int64_t>(fs::file_size(h5));
      ckpt_resident = evict(h5);
      std::fill(in.begin(), in.end(), 0.0f);
      cr.push_back(ckpt_read(path, in.data(), count));
      checks = checks && std::memcmp(in.data(), data.data(), n) == 0;
      fs::remove_all(path);
    };
    if (r % 2 == 0) {
      baseline();
      checkpoint();
    } else {
      checkpoint();
      baseline();
    }
    for (const double res : {plain_resident, ckpt_resident}) {
      if (res < 0) measured = false;
      worst_resident = std::max(worst_resident, res);
    }
    runs.push_back(JsonObject()
                       .add("baseline_write_s", pw.back())
                       .add("baseline_read_s", pr.back())
                       .add("ckpt_write_s", cw.back())
                       .add("ckpt_read_s", cr.back())
                       .add("baseline_resident_after_evict", plain_resident)
                       .add("ckpt_resident_after_evict", ckpt_resident));
  }

  const double gb = static_cast<double>(bytes) / 1e9;
  const double ckpt_w = median(cw), ckpt_r = median(cr), plain_w = median(pw), plain_r = median(pr);
  const auto best = [](const std::vector<double>& v) {
    return *std::min_element(v.begin(), v.end());
  };
  JsonObject out;
  out.add("benchmark", "ckpt")
      .add("dir", parent.string())
      .add("bytes", bytes)
      .add("hdf5_file_bytes", file_bytes)
      .add("hdf5", hdf5_version())
      .add("repeats", args.repeats)
      .add("statistic", "median")
      .add("ckpt", JsonObject()
                       .add("write_GBps", gb / ckpt_w)
                       .add("read_GBps", gb / ckpt_r)
                       .add("best_write_GBps", gb / best(cw))
                       .add("best_read_GBps", gb / best(cr)))
      .add("baseline", JsonObject()
                           .add("write_GBps", gb / plain_w)
                           .add("read_GBps", gb / plain_r)
                           .add("best_write_GBps", gb / best(pw))
                           .add("best_read_GBps", gb / best(pr)))
      .add("write_ratio", plain_w / ckpt_w)
      .add("read_ratio", plain_r / ckpt_r)
      .add("crc32_GBps", gb / crc_s)
      .add("crc32_s", crc_s)
      .add("crc32", fmt::format("{:08x}", crc))
      .add("eviction", JsonObject()
                           .add("method", "fsync + posix_fadvise(POSIX_FADV_DONTNEED)")
                           .add("measured", measured)
                           .add("max_resident_after_evict", worst_resident)
                           .add("effective", measured && worst_resident < 0.01))
      .add("data_check", checks)
      .add("runs", runs);
  std::printf("%s\n", out.str().c_str());
  return checks ? 0 : 1;
}

}  // namespace autoloco::bench
