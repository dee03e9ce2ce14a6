// Catch2 entry point of the MPI suite: MPI is initialised once around the whole session, and a
// failure on any rank fails the run on that rank (mpiexec then reports the non-zero exit).
// LibTorch first: Debian's LibTorch pulls in glog, whose CHECK would replace Catch's.
#include <torch/torch.h>
#define CATCH_CONFIG_RUNNER
#include <mpi.h>
#include <catch2/catch.hpp>

#include "autoloco/util/log.hpp"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  autoloco::log::set_rank(rank);
  torch::set_num_threads(1);
  const int failed = Catch::Session().run(argc, argv);
  // Agree on the outcome so every rank exits with the same code.
  int any_failed = 0;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return any_failed != 0 ? 1 : 0;
}
