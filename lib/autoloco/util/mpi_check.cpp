#include "autoloco/util/mpi_check.hpp"

#include <fmt/format.h>

#include "autoloco/util/error.hpp"

namespace autoloco {

void check_mpi(int code, const char* what, const char* file, int line) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw CommError(fmt::format("{} failed at {}:{}: {}", what, file, line,
                              std::string(text, static_cast<size_t>(length))));
}

}  // namespace autoloco
