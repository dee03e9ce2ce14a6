#include "autoloco/comm/mpi_peer_exchange.hpp"

#include <string>

#include "autoloco/comm/mpi_count.hpp"
#include "autoloco/comm/world_ranks.hpp"
#include "autoloco/util/mpi_check.hpp"

namespace autoloco {

MpiPeerExchange::MpiPeerExchange(MPI_Comm comm) : comm_(comm), world_(world_ranks(comm)) {
  AUTOLOCO_MPI(MPI_Comm_rank(comm_, &rank_));
  AUTOLOCO_MPI(MPI_Comm_size(comm_, &size_));
}

std::string MpiPeerExchange::peer_name(int peer) const {
  return "world rank " + std::to_string(world_[static_cast<size_t>(peer)]);
}

void MpiPeerExchange::exchange(const std::vector<Send>& sends, const std::vector<Recv>& recvs,
                               int tag) {
  // One of each, waited for without patience: MPI_Sendrecv, Open MPI's fastest path for a ring
  // step.
  if (!policy_.patient && sends.size() == 1 && recvs.size() == 1) {
    const Send& s = sends[0];
    const Recv& r = recvs[0];
    AUTOLOCO_MPI(MPI_Sendrecv(s.data, mpi_count(s.bytes, "inter-dc exchange"), MPI_BYTE, s.peer,
                              tag, r.data, mpi_count(r.bytes, "inter-dc exchange"), MPI_BYTE,
                              r.peer, tag, comm_, MPI_STATUS_IGNORE));
    return;
  }
  requests_.clear();
  requests_.reserve(sends.size() + recvs.size());
  // Receives first, so that every send finds its receive posted.
  for (const Recv& r : recvs) {
    requests_.emplace_back();
    AUTOLOCO_MPI(MPI_Irecv(r.data, mpi_count(r.bytes, "inter-dc exchange"), MPI_BYTE, r.peer, tag,
                           comm_, &requests_.back()));
  }
  for (const Send& s : sends) {
    requests_.emplace_back();
    // MPI's send buffer is const since MPI-3.
    AUTOLOCO_MPI(MPI_Isend(s.data, mpi_count(s.bytes, "inter-dc exchange"), MPI_BYTE, s.peer, tag,
                           comm_, &requests_.back()));
  }
  wait_all(requests_.data(), static_cast<int>(requests_.size()), policy_);
}

}  // namespace autoloco
