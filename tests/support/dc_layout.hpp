// For mpi tests of the inter-dc collectives: the communicators of a dc layout as the trainer
// builds them, and a check that every rank holds the same bits.
#pragma once

#include <mpi.h>

#include <cstring>
#include <vector>

#include "autoloco/comm/mpi_communicator.hpp"
#include "autoloco/comm/topology.hpp"

namespace autoloco::test {

// The world cut into dcs of `ranks_per_dc` ranks: the dc's communicator and the one between
// the dcs' members of the same index.
struct Layout {
  Topology topo;
  MpiCommunicator intra;
  MpiCommunicator inter;
  explicit Layout(int ranks_per_dc)
      : topo(Topology::from_world(MPI_COMM_WORLD, ranks_per_dc)),
        intra(MPI_COMM_WORLD, topo.dc, topo.member),
        inter(MPI_COMM_WORLD, topo.member, topo.dc) {}
};

// True when `v` holds the same bits on every rank of the world.
inline bool same_bits_everywhere(const std::vector<float>& v) {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const auto n = static_cast<int>(v.size());
  if (n == 0) return true;  // memcmp must not get the null data() of empty vectors
  std::vector<float> all(v.size() * static_cast<size_t>(size));
  MPI_Allgather(v.data(), n, MPI_FLOAT, all.data(), n, MPI_FLOAT, MPI_COMM_WORLD);
  for (int r = 1; r < size; ++r) {
    if (std::memcmp(all.data(), all.data() + static_cast<size_t>(r) * v.size(),
                    v.size() * sizeof(float)) != 0) {
      return false;
    }
  }
  return true;
}

}  // namespace autoloco::test
