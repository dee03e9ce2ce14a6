// PeerExchange over an MPI communicator (the inter-dc one of a single job): non-blocking sends
// and receives, waited for by the WaitPolicy (patient on the communication thread).
#pragma once

#include <mpi.h>

#include <vector>

#include "autoloco/comm/patient_wait.hpp"
#include "autoloco/comm/peer_exchange.hpp"

namespace autoloco {

class MpiPeerExchange : public PeerExchange {
 public:
  explicit MpiPeerExchange(MPI_Comm comm);

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void exchange(const std::vector<Send>& sends, const std::vector<Recv>& recvs, int tag) override;
  std::string peer_name(int peer) const override;

  void set_wait_policy(const WaitPolicy& policy) { policy_ = policy; }
  const WaitPolicy& wait_policy() const { return policy_; }

 private:
  MPI_Comm comm_;
  int rank_ = 0;
  int size_ = 1;
  std::vector<int> world_;
  WaitPolicy policy_;
  std::vector<MPI_Request> requests_;
};

}  // namespace autoloco
