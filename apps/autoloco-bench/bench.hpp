// The benchmarks of autoloco-bench; each prints one JSON object on world rank 0.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace autoloco::bench {

struct Args {
  std::string config_path;
  std::vector<std::string> overrides;
  bool throughput = false;
  bool comm = false;
  bool ckpt = false;
  int64_t steps = 30;
  int64_t warmup = 5;
  int64_t repeats = 3;
  int ranks_per_dc = 1;
  std::vector<int64_t> sizes = {1 << 16, 1 << 20, 1 << 22};  // floats
  int64_t iters = 10;
  int64_t ckpt_bytes = int64_t{1} << 30;  // --bytes
  std::string ckpt_dir;                   // --dir; empty: the system's temp directory
};

// Trainer inner step against a plain LibTorch loop, in one process.
int throughput(const Args& args);

// Hierarchical outer all-reduce against a plain MPI_Allreduce of the same vector, under mpirun.
int comm(const Args& args);

// The checkpoint write/read path (HDF5, CRC-32, manifest, rename) against plain POSIX I/O of the
// same bytes on the same disk, in one process.
int ckpt(const Args& args);

}  // namespace autoloco::bench
