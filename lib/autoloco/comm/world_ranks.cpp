#include "autoloco/comm/world_ranks.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <numeric>

#include "autoloco/util/mpi_check.hpp"

namespace autoloco {

std::vector<int> world_ranks(MPI_Comm comm) {
  MPI_Group group = MPI_GROUP_NULL;
  MPI_Group world = MPI_GROUP_NULL;
  AUTOLOCO_MPI(MPI_Comm_group(comm, &group));
  AUTOLOCO_MPI(MPI_Comm_group(MPI_COMM_WORLD, &world));
  int size = 0;
  AUTOLOCO_MPI(MPI_Group_size(group, &size));
  std::vector<int> local(static_cast<size_t>(size));
  std::iota(local.begin(), local.end(), 0);
  std::vector<int> out(static_cast<size_t>(size));
  AUTOLOCO_MPI(MPI_Group_translate_ranks(group, size, local.data(), world, out.data()));
  MPI_Group_free(&group);
  MPI_Group_free(&world);
  return out;
}

std::string describe_world_ranks(const std::vector<int>& ranks) {
  if (ranks.size() == 1) return fmt::format("world rank {}", ranks[0]);
  bool contiguous = !ranks.empty();
  for (size_t i = 1; i < ranks.size(); ++i)
    contiguous = contiguous && ranks[i] == ranks[i - 1] + 1;
  if (contiguous) return fmt::format("world ranks {}-{}", ranks.front(), ranks.back());
  constexpr size_t kListed = 8;
  if (ranks.size() <= kListed) return fmt::format("world ranks {}", fmt::join(ranks, ", "));
  return fmt::format("world ranks {}, ... ({} in all)",
                     fmt::join(ranks.begin(), ranks.begin() + kListed, ", "), ranks.size());
}

}  // namespace autoloco
