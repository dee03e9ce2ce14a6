// Where each dc's ranks run: their hosts and their threads, gathered once at the start so that
// the start log and summary.json can say it (docs/multi-host.md). A dc whose members span hosts
// sends its intra-dc all-reduce of every inner step over the network between them, and threads
// that follow each host's cores (run.threads 0) make runs differ bitwise by where they land.
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

#include "autoloco/comm/topology.hpp"
#include "autoloco/util/json.hpp"

namespace autoloco {

struct DcPlacement {
  int dc = 0;
  int first_rank = 0;
  int last_rank = 0;
  std::vector<std::string> hosts;  // distinct, in rank order
  std::vector<int64_t> threads;    // per member: intra-op threads

  bool spans_hosts() const { return hosts.size() > 1; }
  // "dc 0: ranks 0-1 on host-a | threads 1,1"
  std::string describe() const;
  JsonObject json() const;
};

// Every rank of `world` together; `threads` is this rank's intra-op thread count.
std::vector<DcPlacement> gather_placement(const Topology& topo, MPI_Comm world, int threads);

// Hosts of the whole world, distinct, in rank order.
std::vector<std::string> world_hosts(const std::vector<DcPlacement>& placement);

}  // namespace autoloco
