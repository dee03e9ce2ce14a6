#include "autoloco/comm/placement.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "autoloco/util/mpi_check.hpp"

namespace autoloco {
namespace {

void add_distinct(std::vector<std::string>& hosts, const std::string& host) {
  if (std::find(hosts.begin(), hosts.end(), host) == hosts.end()) hosts.push_back(host);
}

}  // namespace

std::string DcPlacement::describe() const {
  return fmt::format("dc {}: ranks {}-{} on {} | threads {}", dc, first_rank, last_rank,
                     fmt::join(hosts, ","), fmt::join(threads, ","));
}

JsonObject DcPlacement::json() const {
  return JsonObject()
      .add("dc", dc)
      .add("ranks", std::vector<int64_t>{first_rank, last_rank})
      .add("hosts", hosts)
      .add("threads", threads);
}

std::vector<DcPlacement> gather_placement(const Topology& topo, MPI_Comm world, int threads) {
  std::vector<char> name(MPI_MAX_PROCESSOR_NAME, '\0');
  std::copy_n(topo.host.begin(), std::min<size_t>(topo.host.size(), name.size() - 1), name.begin());
  const auto n = static_cast<size_t>(topo.world_size);
  std::vector<char> names(name.size() * n);
  AUTOLOCO_MPI(MPI_Allgather(name.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR, names.data(),
                             MPI_MAX_PROCESSOR_NAME, MPI_CHAR, world));
  std::vector<int> all_threads(n);
  AUTOLOCO_MPI(MPI_Allgather(&threads, 1, MPI_INT, all_threads.data(), 1, MPI_INT, world));
  std::vector<DcPlacement> out;
  for (int dc = 0; dc < topo.num_dcs; ++dc) {
    DcPlacement p;
    p.dc = dc;
    p.first_rank = dc * topo.ranks_per_dc;
    p.last_rank = p.first_rank + topo.ranks_per_dc - 1;
    for (int r = p.first_rank; r <= p.last_rank; ++r) {
      const auto i = static_cast<size_t>(r);
      add_distinct(p.hosts, std::string(&names[i * MPI_MAX_PROCESSOR_NAME]));
      p.threads.push_back(all_threads[i]);
    }
    out.push_back(std::move(p));
  }
  return out;
}

std::vector<std::string> world_hosts(const std::vector<DcPlacement>& placement) {
  std::vector<std::string> hosts;
  for (const DcPlacement& p : placement) {
    for (const std::string& h : p.hosts)
      add_distinct(hosts, h);
  }
  return hosts;
}

}  // namespace autoloco
