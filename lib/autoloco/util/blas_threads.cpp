#include "autoloco/util/blas_threads.hpp"

#include <dlfcn.h>

namespace autoloco {

BlasThreading blas_threading() {
  // Looked up at run time: the BLAS behind libblas.so.3 is chosen by the system, not by us.
  using GetParallel = int (*)();
  void* symbol = dlsym(RTLD_DEFAULT, "openblas_get_parallel");
  if (symbol == nullptr) return BlasThreading::none;
  switch (reinterpret_cast<GetParallel>(symbol)()) {
    case 0:
      return BlasThreading::sequential;
    case 1:
      return BlasThreading::pthreads;
    default:
      return BlasThreading::openmp;
  }
}

std::string describe(BlasThreading threading) {
  switch (threading) {
    case BlasThreading::none:
      return "not OpenBLAS";
    case BlasThreading::sequential:
      return "OpenBLAS, sequential";
    case BlasThreading::pthreads:
      return "OpenBLAS, own pthread pool";
    case BlasThreading::openmp:
      return "OpenBLAS, OpenMP pool";
  }
  return "unknown";
}

int blas_threads_beside(int intra_op, BlasThreading threading) {
  return threading == BlasThreading::pthreads ? 1 : intra_op;
}

bool set_blas_threads(int threads) {
  using SetThreads = void (*)(int);
  void* symbol = dlsym(RTLD_DEFAULT, "openblas_set_num_threads");
  if (symbol == nullptr) return false;
  reinterpret_cast<SetThreads>(symbol)(threads);
  return true;
}

}  // namespace autoloco
