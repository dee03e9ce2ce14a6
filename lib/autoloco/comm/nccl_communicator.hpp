// Communicator over NCCL for device buffers inside a datacenter (CUDA builds only). The NCCL
// unique id is created by the group's rank 0 and shared over MPI. Every collective is enqueued
// on LibTorch's current CUDA stream: it starts after the kernels that produced its buffer (the
// backward pass) and the kernels that consume it (clipping, AdamW) follow it, with no host wait
// in between. A caller reading a buffer on the host goes through LibTorch (item(), cpu()),
// which waits for that stream; barrier() alone waits itself.
#pragma once

#include <mpi.h>

#include <memory>

#include "autoloco/comm/communicator.hpp"

namespace autoloco {

class NcclCommunicator final : public Communicator {
 public:
  // Collective over `group` (usually the intra-dc MPI communicator); `device` is the CUDA
  // device index this rank uses.
  NcclCommunicator(MPI_Comm group, int device);
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "nccl"; }

  using Communicator::allreduce_sum;
  void allreduce_sum(void* data, size_t count, DType type) override;
  void allgather(const void* send, void* recv, size_t count, DType type) override;
  void broadcast(void* data, size_t count, DType type, int root) override;
  void reduce_scatter_sum(const void* send, void* recv, const std::vector<size_t>& counts,
                          DType type) override;
  void allgather_in_place(void* data, const std::vector<size_t>& counts,
                          const std::vector<size_t>& offsets, DType type) override;
  void alltoallv(const void* send, const std::vector<size_t>& send_counts, void* recv,
                 const std::vector<size_t>& recv_counts, DType type) override;
  void barrier() override;

 private:
  struct State;
  void synchronize();
  std::unique_ptr<State> state_;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace autoloco
