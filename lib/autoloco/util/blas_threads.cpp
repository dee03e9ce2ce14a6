#include "autoloco/util/blas_threads.hpp"

#include <dlfcn.h>

namespace autoloco {

bool set_blas_threads(int threads) {
  // Looked up at run time: the BLAS behind libblas.so.3 is chosen by the system, not by us.
  using SetThreads = void (*)(int);
  void* symbol = dlsym(RTLD_DEFAULT, "openblas_set_num_threads");
  if (symbol == nullptr) return false;
  reinterpret_cast<SetThreads>(symbol)(threads);
  return true;
}

}  // namespace autoloco
