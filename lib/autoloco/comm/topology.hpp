// How the MPI world is split into datacenters: dc = world_rank / ranks_per_dc, member is the
// rank's index inside its dc. Communicators for the world, the rank's dc, and the inter-dc
// peers that share its member index.
#pragma once

#include <mpi.h>

#include <string>

namespace autoloco {

struct Topology {
  int world_rank = 0;
  int world_size = 1;
  int ranks_per_dc = 1;
  int num_dcs = 1;
  int dc = 0;
  int member = 0;
  std::string host;

  // Throws ConfigError (naming topology.ranks_per_dc) when world_size is not a multiple.
  static Topology from_world(MPI_Comm world, int ranks_per_dc);
};

}  // namespace autoloco

namespace autoloco {

// This rank's place among the ranks of `world` that share its host: for threads per rank and for
// picking a GPU.
struct HostRanks {
  int local_rank = 0;
  int count = 1;
};
HostRanks host_ranks(MPI_Comm world);

}  // namespace autoloco
