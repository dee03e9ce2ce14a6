// Helpers of the MPI suites: a tiny corpus that every rank of the world can read, and checks that
// a tensor is bitwise identical across the ranks of a communicator.
#pragma once

#include <mpi.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "tiny_corpus.hpp"

namespace autoloco::test {

inline int world_rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

// Rank 0 writes the corpus into a directory named after its pid (the same path on every rank)
// and removes it when the test ends.
struct SharedCorpus {
  std::string dir;
  explicit SharedCorpus(const std::string& tag) {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int pid = rank == 0 ? static_cast<int>(::getpid()) : 0;
    MPI_Bcast(&pid, 1, MPI_INT, 0, MPI_COMM_WORLD);
    dir = (std::filesystem::temp_directory_path() /
           ("autoloco-mpi-" + tag + "-" + std::to_string(pid)))
              .string();
    if (rank == 0) write_tiny_corpus(dir);
    MPI_Barrier(MPI_COMM_WORLD);
  }
  SharedCorpus(const SharedCorpus&) = delete;
  SharedCorpus& operator=(const SharedCorpus&) = delete;
  // The tiny config with `ranks_per_dc` ranks per dc (0: the whole world is one dc, ddp).
  Config config(int ranks_per_dc = 0) const {
    int size = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    Config c = tiny_config(dir, dir + "/runs");
    c.topology.ranks_per_dc = ranks_per_dc > 0 ? ranks_per_dc : size;
    if (ranks_per_dc == 0) c.outer.method = "ddp";
    return c;
  }
  ~SharedCorpus() {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) std::filesystem::remove_all(dir);
  }
};

// True when the fp32 tensor `t` holds the same bits on every rank of `comm`.
inline bool identical_across(const torch::Tensor& t, MPI_Comm comm) {
  int size = 1;
  MPI_Comm_size(comm, &size);
  const torch::Tensor c = t.contiguous();
  const auto n = static_cast<int>(c.numel());
  std::vector<float> all(static_cast<size_t>(n) * static_cast<size_t>(size));
  MPI_Allgather(c.data_ptr<float>(), n, MPI_FLOAT, all.data(), n, MPI_FLOAT, comm);
  int same = 1;
  for (int r = 1; r < size; ++r) {
    if (std::memcmp(all.data(), all.data() + static_cast<size_t>(r) * static_cast<size_t>(n),
                    sizeof(float) * static_cast<size_t>(n)) != 0) {
      same = 0;
    }
  }
  return same == 1;
}

inline bool identical_on_all_ranks(const torch::Tensor& t) {
  return identical_across(t, MPI_COMM_WORLD);
}

}  // namespace autoloco::test
