// Collectives on strings and outcomes, for the rare moments (checkpoints, resume) when ranks
// exchange names, small JSON documents or error messages rather than tensors. Blocking; never
// used per step.
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

namespace autoloco {

// `text` from `root` to every rank.
void broadcast_text(MPI_Comm comm, std::string& text, int root);

// Every rank's `text`, at `root` only (in rank order); other ranks get an empty vector.
std::vector<std::string> gather_text(MPI_Comm comm, const std::string& text, int root);

// Did every rank succeed? When not, every rank gets "rank R: <R's message>" of the lowest failing
// rank R in `message` and false.
bool all_succeeded(MPI_Comm comm, bool ok, std::string& message);

}  // namespace autoloco
