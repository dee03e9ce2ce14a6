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
  int64_t steps = 30;
  int64_t warmup = 5;
  int64_t repeats = 3;
  int ranks_per_dc = 1;
  std::vector<int64_t> sizes = {1 << 16, 1 << 20, 1 << 22};  // floats
  int64_t iters = 10;
};

// Trainer inner step against a plain LibTorch loop, in one process.
int throughput(const Args& args);

// Hierarchical outer all-reduce against a plain MPI_Allreduce of the same vector, under mpirun.
int comm(const Args& args);

}  // namespace autoloco::bench
