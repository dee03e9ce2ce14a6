// MPI call checking: a failing MPI call becomes a CommError naming the call and its site, and
// every call is watched (util/watchdog.hpp), so that a call that never returns ends the job.
#pragma once

#include <mpi.h>

#include <string>

#include "autoloco/util/watchdog.hpp"

namespace autoloco {

// Throws CommError with MPI's own error string; `what` is the call as written at the site.
void check_mpi(int code, const char* what, const char* file, int line);

// Wraps an MPI call: AUTOLOCO_MPI(MPI_Barrier(comm));
#define AUTOLOCO_MPI(call)                                    \
  do {                                                        \
    const ::autoloco::Watch autoloco_mpi_watch_(#call);       \
    ::autoloco::check_mpi((call), #call, __FILE__, __LINE__); \
  } while (false)

}  // namespace autoloco
