#include "autoloco/comm/nccl_communicator.hpp"

#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>
#include <fmt/format.h>
#include <nccl.h>

#include <exception>

#include "autoloco/util/error.hpp"
#include "autoloco/util/mpi_check.hpp"
#include "autoloco/util/watchdog.hpp"

namespace autoloco {
namespace {

void check_nccl(ncclResult_t result, const char* what, const char* file, int line) {
  if (result == ncclSuccess) return;
  throw CommError(
      fmt::format("{} failed at {}:{}: {}", what, file, line, ncclGetErrorString(result)));
}

void check_cuda(cudaError_t result, const char* what, const char* file, int line) {
  if (result == cudaSuccess) return;
  throw CommError(
      fmt::format("{} failed at {}:{}: {}", what, file, line, cudaGetErrorString(result)));
}

#define AUTOLOCO_NCCL(call) check_nccl((call), #call, __FILE__, __LINE__)
#define AUTOLOCO_CUDA(call) check_cuda((call), #call, __FILE__, __LINE__)

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::f32:
      return ncclFloat32;
    case DType::f64:
      return ncclFloat64;
    case DType::i64:
      return ncclInt64;
    case DType::bf16:
      return ncclBfloat16;
  }
  throw CommError("unknown dtype");
}

}  // namespace

struct NcclCommunicator::State {
  ncclComm_t comm = nullptr;
  int device = 0;

  cudaStream_t stream() const {
    return c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device)).stream();
  }
};

bool nccl_available() {
  return true;
}

NcclCommunicator::NcclCommunicator(MPI_Comm group, int device) : state_(std::make_unique<State>()) {
  AUTOLOCO_MPI(MPI_Comm_rank(group, &rank_));
  AUTOLOCO_MPI(MPI_Comm_size(group, &size_));
  state_->device = device;
  AUTOLOCO_CUDA(cudaSetDevice(device));
  ncclUniqueId id;
  if (rank_ == 0) AUTOLOCO_NCCL(ncclGetUniqueId(&id));
  AUTOLOCO_MPI(MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, group));
  {
    const Watch watch("NCCL's set-up of the intra-dc communicator");
    AUTOLOCO_NCCL(ncclCommInitRank(&state_->comm, size_, id, rank_));
  }
}

NcclCommunicator::~NcclCommunicator() {
  if (state_->comm == nullptr) return;
  // While an error unwinds, a peer may be dead with collectives of ours still queued:
  // ncclCommDestroy would wait for them forever, ncclCommAbort drops them.
  if (std::uncaught_exceptions() > 0) {
    ncclCommAbort(state_->comm);
  } else {
    ncclCommDestroy(state_->comm);
  }
}

void NcclCommunicator::synchronize() {
  // A peer that never launches its part holds this stream's collectives forever.
  const Watch watch("the intra-dc NCCL collectives");
  AUTOLOCO_CUDA(cudaStreamSynchronize(state_->stream()));
}

void NcclCommunicator::allreduce_sum(void* data, size_t count, DType type) {
  counted_.allreduce += static_cast<int64_t>(count * dtype_size(type));
  AUTOLOCO_NCCL(
      ncclAllReduce(data, data, count, nccl_type(type), ncclSum, state_->comm, state_->stream()));
}

void NcclCommunicator::allgather(const void* send, void* recv, size_t count, DType type) {
  counted_.allgather += static_cast<int64_t>(static_cast<size_t>(size_) * count * dtype_size(type));
  AUTOLOCO_NCCL(ncclAllGather(send, recv, count, nccl_type(type), state_->comm, state_->stream()));
}

void NcclCommunicator::broadcast(void* data, size_t count, DType type, int root) {
  AUTOLOCO_NCCL(
      ncclBroadcast(data, data, count, nccl_type(type), root, state_->comm, state_->stream()));
}

void NcclCommunicator::reduce_scatter_sum(const void* send, void* recv,
                                          const std::vector<size_t>& counts, DType type) {
  // ncclReduceScatter wants equal parts; uneven ones (the last shard of a buffer that R does
  // not divide) are one grouped reduce per part, rooted at its owner.
  counted_.reduce_scatter += bytes_of(counts, type);
  const auto* bytes = static_cast<const char*>(send);
  const size_t elem = dtype_size(type);
  AUTOLOCO_NCCL(ncclGroupStart());
  size_t offset = 0;
  for (size_t r = 0; r < counts.size(); ++r) {
    if (counts[r] > 0) {
      AUTOLOCO_NCCL(ncclReduce(bytes + offset * elem, static_cast<int>(r) == rank_ ? recv : nullptr,
                               counts[r], nccl_type(type), ncclSum, static_cast<int>(r),
                               state_->comm, state_->stream()));
    }
    offset += counts[r];
  }
  AUTOLOCO_NCCL(ncclGroupEnd());
}

void NcclCommunicator::allgather_in_place(void* data, const std::vector<size_t>& counts,
                                          const std::vector<size_t>& offsets, DType type) {
  counted_.allgather += bytes_of(counts, type);
  auto* bytes = static_cast<char*>(data);
  const size_t elem = dtype_size(type);
  AUTOLOCO_NCCL(ncclGroupStart());
  for (size_t r = 0; r < counts.size(); ++r) {
    if (counts[r] == 0) continue;
    void* at = bytes + offsets[r] * elem;
    AUTOLOCO_NCCL(ncclBroadcast(at, at, counts[r], nccl_type(type), static_cast<int>(r),
                                state_->comm, state_->stream()));
  }
  AUTOLOCO_NCCL(ncclGroupEnd());
}

void NcclCommunicator::alltoallv(const void* send, const std::vector<size_t>& send_counts,
                                 void* recv, const std::vector<size_t>& recv_counts, DType type) {
  counted_.alltoall += bytes_of(send_counts, type);
  const auto* from = static_cast<const char*>(send);
  auto* to = static_cast<char*>(recv);
  const size_t elem = dtype_size(type);
  AUTOLOCO_NCCL(ncclGroupStart());
  for (size_t q = 0; q < send_counts.size(); ++q) {
    if (send_counts[q] > 0) {
      AUTOLOCO_NCCL(ncclSend(from, send_counts[q], nccl_type(type), static_cast<int>(q),
                             state_->comm, state_->stream()));
    }
    if (recv_counts[q] > 0) {
      AUTOLOCO_NCCL(ncclRecv(to, recv_counts[q], nccl_type(type), static_cast<int>(q), state_->comm,
                             state_->stream()));
    }
    from += send_counts[q] * elem;
    to += recv_counts[q] * elem;
  }
  AUTOLOCO_NCCL(ncclGroupEnd());
}

void NcclCommunicator::barrier() {
  // NCCL has no barrier: an all-reduce of one element orders every rank the same way.
  const cudaStream_t stream = state_->stream();
  float* one = nullptr;
  AUTOLOCO_CUDA(cudaMallocAsync(reinterpret_cast<void**>(&one), sizeof(float), stream));
  AUTOLOCO_CUDA(cudaMemsetAsync(one, 0, sizeof(float), stream));
  AUTOLOCO_NCCL(ncclAllReduce(one, one, 1, ncclFloat32, ncclSum, state_->comm, stream));
  AUTOLOCO_CUDA(cudaFreeAsync(one, stream));
  synchronize();
}

}  // namespace autoloco
