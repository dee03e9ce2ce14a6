// A resume onto a different number of dcs or ranks per dc (--allow-topology-change;
// docs/checkpoints.md), for a job that lost a node or got another allocation: the anchor, the
// outer optimizer, the controllers and the counters carry over, and new dc d continues old dc
// d mod G_old: its replica, AdamW and batch state. A dc that did not exist before starts a fresh
// data stream (seeded by the run seed, its dc and member as usual); old dcs past the new count
// are dropped. The outer average is already token-weighted, so fewer dcs is only a smaller sum
// (ALGORITHMS.md, Faults). Another ranks_per_dc re-splits the sharded vectors (moments, outer
// state, error-feedback residuals) over the new members; member m continues old member m's data
// stream, and a member past the old count starts a fresh one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "autoloco/util/json.hpp"

namespace autoloco {

struct TopologyChange {
  int from_dcs = 1;      // in the checkpoint
  int to_dcs = 1;        // in this job
  int from_members = 1;  // ranks per dc in the checkpoint
  int to_members = 1;    // in this job

  bool changed() const { return from_dcs != to_dcs || members_changed(); }
  bool members_changed() const { return from_members != to_members; }
  // The old dc whose state new dc `dc` continues.
  int source_dc(int dc) const { return dc % from_dcs; }
  // A dc that did not exist before: a fresh data stream and fresh per-rank accumulators.
  bool fresh(int dc) const { return dc >= from_dcs; }
  // A rank whose data stream and accumulators start afresh: in a new dc, or a member past the
  // old count.
  bool fresh(int dc, int member) const { return fresh(dc) || member >= from_members; }
  // The checkpoint's rank whose file rank (dc, member) reads: its own for a rank that continues,
  // else one of its source dc's (for what every rank holds alike: clocks, counters).
  int source_rank(int dc, int member) const {
    return source_dc(dc) * from_members + member % from_members;
  }
  // Tokens of one of the checkpoint's steps, from one of this job's at the same batch per rank.
  int64_t saved_step_tokens(int64_t step_tokens) const {
    return step_tokens / (int64_t{to_dcs} * to_members) * (int64_t{from_dcs} * from_members);
  }

  // A per-dc list of the checkpoint, as this job's dcs see it.
  template <class T>
  std::vector<T> remap(const std::vector<T>& per_old_dc) const {
    if (static_cast<int>(per_old_dc.size()) != from_dcs) return per_old_dc;
    std::vector<T> out;
    for (int d = 0; d < to_dcs; ++d)
      out.push_back(per_old_dc[static_cast<size_t>(source_dc(d))]);
    return out;
  }

  // "4 dcs -> 3: dc 0 <- 0, dc 1 <- 1, dc 2 <- 2; dc 3 dropped" (and "; ranks_per_dc 2 -> 3")
  std::string describe() const;
  // {"from_dcs": 4, "to_dcs": 3, "source_dc": [0, 1, 2], "fresh_streams": [...]}
  JsonObject json() const;
};

}  // namespace autoloco
