#include "autoloco/util/mpi_threads.hpp"

#include <fmt/format.h>
#include <mpi.h>

#include "autoloco/util/error.hpp"

namespace autoloco {

int init_mpi_multithreaded(int* argc, char*** argv) {
  int provided = MPI_THREAD_SINGLE;
  MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
  return provided;
}

std::string thread_level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE:
      return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED:
      return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED:
      return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE:
      return "MPI_THREAD_MULTIPLE";
    default:
      return fmt::format("level {}", level);
  }
}

void require_mpi_thread_multiple(const std::string& key) {
  int provided = MPI_THREAD_SINGLE;
  MPI_Query_thread(&provided);
  if (provided >= MPI_THREAD_MULTIPLE) return;
  throw ConfigError(fmt::format(
      "config key {}: the overlapped sync runs the inter-dc all-reduce on a communication thread, "
      "which needs MPI_THREAD_MULTIPLE, but this MPI library provided {}. Use an MPI built with "
      "thread support (Open MPI >= 3 has it by default) or set {}=0",
      key, thread_level_name(provided), key));
}

}  // namespace autoloco
