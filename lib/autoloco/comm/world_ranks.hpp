// Ranks of a communicator as world ranks: what a message about a wait names ("waiting for world
// rank 5"), since a user sees world ranks in every log line and in mpirun's output.
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

namespace autoloco {

// The world rank of each rank of `comm`, in its rank order.
std::vector<int> world_ranks(MPI_Comm comm);

// "world ranks 2-3", "world ranks 0, 2, 4", "world rank 6" (at most 8 listed, then how many).
std::string describe_world_ranks(const std::vector<int>& ranks);

}  // namespace autoloco
