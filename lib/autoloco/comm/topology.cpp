#include "autoloco/comm/topology.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <vector>

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

std::string describe_layout(const Topology& topo, MPI_Comm world) {
  std::vector<char> name(MPI_MAX_PROCESSOR_NAME, '\0');
  std::copy(topo.host.begin(), topo.host.end(), name.begin());
  std::vector<char> all(name.size() * static_cast<size_t>(topo.world_size));
  AUTOLOCO_MPI(MPI_Allgather(name.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all.data(),
                             MPI_MAX_PROCESSOR_NAME, MPI_CHAR, world));
  std::string out;
  for (int dc = 0; dc < topo.num_dcs; ++dc) {
    const int first = dc * topo.ranks_per_dc;
    const int last = first + topo.ranks_per_dc - 1;
    std::vector<std::string> hosts;
    for (int r = first; r <= last; ++r) {
      std::string h(&all[static_cast<size_t>(r) * MPI_MAX_PROCESSOR_NAME]);
      if (hosts.empty() || hosts.back() != h) hosts.push_back(h);
    }
    out += fmt::format("{}dc {}: ranks {}-{} on {}", dc ? "\n" : "", dc, first, last,
                       fmt::join(hosts, ","));
  }
  return out;
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
