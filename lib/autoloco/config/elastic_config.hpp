// The elastic section of the run configuration (docs/elastic.md).
// Part of the typed run configuration (config.hpp): every key declared once in visit(), with
// its default and a one-line doc.
#pragma once

#include <cstdint>
#include <string>

namespace autoloco {

// The elastic mode (docs/elastic.md): each dc its own launch, a lighthouse forms each round's
// quorum. Unset lighthouse: one MPI job spans every dc (the default).
struct ElasticConfig {
  std::string lighthouse;
  int64_t dc = -1;
  int64_t dcs = 0;
  int64_t min_dcs = 1;
  double round_deadline_s = 60.0;
  double heartbeat_s = 0.5;
  double heartbeat_timeout_s = 3.0;
  double collective_timeout_s = 60.0;
  double quorum_timeout_s = 600.0;
  std::string key_file;
  int64_t port = 0;
  std::string advertise;

  bool enabled() const { return !lighthouse.empty(); }

  template <class Self, class V>
  static void visit(Self& s, V& v) {
    v("lighthouse", s.lighthouse,
      "HOST:PORT of autoloco-lighthouse: each dc is its own launch of topology.ranks_per_dc "
      "ranks and dcs join and leave while the others train (docs/elastic.md); empty: one MPI "
      "job of every dc");
    v("dc", s.dc, "with lighthouse: this launch's dc id, 0 to elastic.dcs - 1 (its data stream)");
    v("dcs", s.dcs,
      "with lighthouse: how many dc ids the run has (0 to dcs - 1); dcs that are not running "
      "are simply absent from the quorum");
    v("min_dcs", s.min_dcs, "with lighthouse: a round waits until this many dcs take part");
    v("round_deadline_s", s.round_deadline_s,
      "with lighthouse: once the first dc reached a round's boundary, the others have this long "
      "to get there; then the round goes on without them (they are healed after it)");
    v("heartbeat_s", s.heartbeat_s, "with lighthouse: every process's heartbeat interval");
    v("heartbeat_timeout_s", s.heartbeat_timeout_s,
      "with lighthouse: a process not heard for this long is taken for dead, its dc leaves, and "
      "a round in flight is redone without it; above heartbeat_s, below collective_timeout_s");
    v("collective_timeout_s", s.collective_timeout_s,
      "with lighthouse: an inter-dc exchange in which no byte moved for this long fails (a "
      "dc that still heartbeats but is stuck); below quorum_timeout_s");
    v("quorum_timeout_s", s.quorum_timeout_s,
      "with lighthouse: the longest a dc waits for the lighthouse (to reach it, or for a "
      "round's decision) before it stops with an error, its checkpoints intact");
    v("key_file", s.key_file,
      "with lighthouse: the key shared with the lighthouse and every dc (autoloco-lighthouse "
      "--make-key FILE; mode 600): a process without it can neither join nor disturb the run");
    v("port", s.port,
      "with lighthouse: member m listens for the other dcs' member m on port + m (0: any free "
      "port); open these ports between the sites");
    v("advertise", s.advertise,
      "with lighthouse: the address the other dcs dial to reach this dc's members (empty: the "
      "address this host uses to reach the lighthouse)");
  }
};

}  // namespace autoloco
