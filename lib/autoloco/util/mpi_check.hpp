// MPI call checking: a failing MPI call becomes a CommError naming the call and its site.
#pragma once

#include <mpi.h>

#include <string>

namespace autoloco {

// Throws CommError with MPI's own error string; `what` is the call as written at the site.
void check_mpi(int code, const char* what, const char* file, int line);

// Wraps an MPI call: AUTOLOCO_MPI(MPI_Barrier(comm));
#define AUTOLOCO_MPI(call) ::autoloco::check_mpi((call), #call, __FILE__, __LINE__)

}  // namespace autoloco
