#include "autoloco/comm/topology.hpp"

#include <fmt/format.h>

#include "autoloco/util/error.hpp"
#include "autoloco/util/mpi_check.hpp"

namespace autoloco {

Topology Topology::from_world(MPI_Comm world, int ranks_per_dc) {
  Topology t;
  AUTOLOCO_MPI(MPI_Comm_rank(world, &t.world_rank));
  AUTOLOCO_MPI(MPI_Comm_size(world, &t.world_size));
  if (ranks_per_dc <= 0 || t.world_size % ranks_per_dc != 0) {
    throw ConfigError(fmt::format(
        "config key topology.ranks_per_dc: the world size {} is not a multiple of {}: launch a "
        "multiple of ranks_per_dc ranks or change the key",
        t.world_size, ranks_per_dc));
  }
  t.ranks_per_dc = ranks_per_dc;
  t.num_dcs = t.world_size / ranks_per_dc;
  t.dc = t.world_rank / ranks_per_dc;
  t.member = t.world_rank % ranks_per_dc;
  char name[MPI_MAX_PROCESSOR_NAME];
  int length = 0;
  AUTOLOCO_MPI(MPI_Get_processor_name(name, &length));
  t.host.assign(name, static_cast<size_t>(length));
  return t;
}

}  // namespace autoloco

namespace autoloco {

HostRanks host_ranks(MPI_Comm world) {
  MPI_Comm node = MPI_COMM_NULL;
  AUTOLOCO_MPI(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
  HostRanks h;
  AUTOLOCO_MPI(MPI_Comm_rank(node, &h.local_rank));
  AUTOLOCO_MPI(MPI_Comm_size(node, &h.count));
  AUTOLOCO_MPI(MPI_Comm_free(&node));
  return h;
}

}  // namespace autoloco
