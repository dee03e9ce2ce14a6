// A resume onto a different number of dcs (--allow-topology-change; docs/checkpoints.md), for a
// job that lost a node or got a smaller allocation: ranks_per_dc stays, the anchor, the outer
// optimizer, the controllers and the counters carry over, and new dc d continues old dc
// d mod G_old: its replica, AdamW and batch state. A dc that did not exist before starts a fresh
// data stream (seeded by the run seed, its dc and member as usual); old dcs past the new count
// are dropped. The outer average is already token-weighted, so fewer dcs is only a smaller sum
// (ALGORITHMS.md, Faults).
#pragma once

#include <string>
#include <vector>

#include "autoloco/util/json.hpp"

namespace autoloco {

struct TopologyChange {
  int from_dcs = 1;  // in the checkpoint
  int to_dcs = 1;    // in this job

  bool changed() const { return from_dcs != to_dcs; }
  // The old dc whose state new dc `dc` continues.
  int source_dc(int dc) const { return dc % from_dcs; }
  // A dc that did not exist before: a fresh data stream and fresh per-rank accumulators.
  bool fresh(int dc) const { return dc >= from_dcs; }

  // A per-dc list of the checkpoint, as this job's dcs see it.
  template <class T>
  std::vector<T> remap(const std::vector<T>& per_old_dc) const {
    if (static_cast<int>(per_old_dc.size()) != from_dcs) return per_old_dc;
    std::vector<T> out;
    for (int d = 0; d < to_dcs; ++d)
      out.push_back(per_old_dc[static_cast<size_t>(source_dc(d))]);
    return out;
  }

  // "4 dcs -> 3: dc 0 <- 0, dc 1 <- 1, dc 2 <- 2; dc 3 dropped"
  std::string describe() const;
  // {"from_dcs": 4, "to_dcs": 3, "source_dc": [0, 1, 2], "fresh_streams": [...]}
  JsonObject json() const;
};

}  // namespace autoloco
