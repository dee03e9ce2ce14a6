// Catch2 entry point of the MPI and GPU suites: MPI is initialised once around the whole session,
// and a failure on any rank fails the run on every rank. `--min-gpus M` (from a [gpus=M] tag):
// where LibTorch sees fewer than M CUDA devices every rank exits 77, which CTest reports as
// skipped.
// LibTorch first: Debian's LibTorch pulls in glog, whose CHECK would replace Catch's.
#include <torch/torch.h>
#define CATCH_CONFIG_RUNNER
#include <mpi.h>
#include <catch2/catch.hpp>

#include <cstdio>
#include <string>
#include <vector>

#include "autoloco/util/log.hpp"
#include "autoloco/util/mpi_threads.hpp"

namespace {

constexpr int kSkipped = 77;

// Removes "--min-gpus M" from the arguments and returns M (0 when absent).
int take_min_gpus(std::vector<char*>& args) {
  int min_gpus = 0;
  for (size_t i = 1; i + 1 < args.size(); ++i) {
    if (std::string(args[i]) == "--min-gpus") {
      min_gpus = std::stoi(args[i + 1]);
      args.erase(args.begin() + static_cast<std::ptrdiff_t>(i),
                 args.begin() + static_cast<std::ptrdiff_t>(i) + 2);
      break;
    }
  }
  return min_gpus;
}

}  // namespace

int main(int argc, char** argv) {
  autoloco::init_mpi_multithreaded(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  autoloco::log::set_rank(rank);
  torch::set_num_threads(1);
  std::vector<char*> args(argv, argv + argc);
  const int min_gpus = take_min_gpus(args);
  const int gpus = min_gpus == 0 || !torch::cuda::is_available()
                       ? 0
                       : static_cast<int>(torch::cuda::device_count());
  if (gpus < min_gpus) {
    if (rank == 0)
      std::printf("skipped: %d CUDA devices visible, the test needs %d\n", gpus, min_gpus);
    MPI_Finalize();
    return kSkipped;
  }
  const int failed = Catch::Session().run(static_cast<int>(args.size()), args.data());
  int any_failed = 0;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return any_failed != 0 ? 1 : 0;
}
