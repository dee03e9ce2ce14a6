// MPI takes element counts as int. Every count that autoloco hands to MPI passes through
// mpi_count, which refuses one that does not fit, naming the sizes: the callers split large
// messages first (the hierarchical all-reduce into pieces of at most 1 GiB, the intra-dc
// communicator into chunks), so reaching the refusal is a bug, not a run that is too large.
#pragma once

#include <fmt/format.h>

#include <climits>
#include <cstddef>

#include "autoloco/util/error.hpp"

namespace autoloco {

inline int mpi_count(size_t count, const char* what) {
  if (count > static_cast<size_t>(INT_MAX)) {
    throw CommError(fmt::format(
        "{}: a message of {} elements does not fit MPI's int count (at most {}); autoloco "
        "should have split it: please report this with the model size and the topology",
        what, count, INT_MAX));
  }
  return static_cast<int>(count);
}

}  // namespace autoloco
