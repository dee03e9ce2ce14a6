// Communicator over an MPI communicator (duplicated, so our traffic never mixes with others').
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

#include "autoloco/comm/communicator.hpp"
#include "autoloco/comm/patient_wait.hpp"

namespace autoloco {

class MpiCommunicator final : public Communicator {
 public:
  // Duplicates `comm`; the duplicate is freed on destruction.
  explicit MpiCommunicator(MPI_Comm comm);
  // Splits `parent` by color (ranks keep their order by key).
  MpiCommunicator(MPI_Comm parent, int color, int key);
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "mpi"; }
  MPI_Comm handle() const { return comm_; }
  // Patient: every collective is the non-blocking one, waited for by wait_all (the
  // communication thread's, which must not spin on the compute's core).
  void set_wait_policy(const WaitPolicy& policy) { policy_ = policy; }

  using Communicator::allreduce_sum;
  void allreduce_sum(void* data, size_t count, DType type) override;
  void allgather(const void* send, void* recv, size_t count, DType type) override;
  void broadcast(void* data, size_t count, DType type, int root) override;
  void reduce_scatter_sum(const void* send, void* recv, const std::vector<size_t>& counts,
                          DType type) override;
  void allgather_in_place(void* data, const std::vector<size_t>& counts,
                          const std::vector<size_t>& offsets, DType type) override;
  std::unique_ptr<Pending> start_allgather_in_place(void* data, const std::vector<size_t>& counts,
                                                    const std::vector<size_t>& offsets,
                                                    DType type) override;
  void alltoallv(const void* send, const std::vector<size_t>& send_counts, void* recv,
                 const std::vector<size_t>& recv_counts, DType type) override;
  void barrier() override;

 private:
  void init_rank_size();
  struct Gatherv;
  Gatherv gatherv(void* data, const std::vector<size_t>& counts, const std::vector<size_t>& offsets,
                  DType type) const;
  // One broadcast per part: where the parts lie too far apart for MPI's int displacements.
  void broadcast_parts(void* data, const std::vector<size_t>& counts,
                       const std::vector<size_t>& offsets, DType type);
  // The blocking call, or (patient) its non-blocking twin and a patient wait.
  template <class Blocking, class NonBlocking>
  void collective(Blocking blocking, NonBlocking non_blocking);
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  std::string members_;  // "a collective among world ranks 2-3", for the watchdog
  WaitPolicy policy_;
  // The reduce-scatter ring's two part-sized buffers (kept: every inner step needs them).
  std::vector<char> ring_in_;
  std::vector<char> ring_out_;
};

MPI_Datatype mpi_type(DType t);

}  // namespace autoloco
