// The one seam for moving flat buffers between ranks. Implementations: MPI (CPU buffers, and
// always for the inter-dc link) and NCCL (device buffers inside a dc, on CUDA builds).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace autoloco {

enum class DType { f32, f64, i64, bf16 };

size_t dtype_size(DType t);

// Bytes of the buffers each kind of collective was handed on this rank (the whole buffer: every
// rank's part), counted by the implementations: what a benchmark turns into bus bytes, and how
// it checks that a reduce-scatter and an all-gather move what one all-reduce moves.
struct CollectiveBytes {
  int64_t allreduce = 0;
  int64_t reduce_scatter = 0;
  int64_t allgather = 0;
  int64_t alltoall = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string backend() const = 0;

  // In place: data[i] <- sum over ranks of data[i].
  virtual void allreduce_sum(void* data, size_t count, DType type) = 0;
  // recv holds size() * count elements, rank r's contribution at offset r * count. `send` may
  // be that very slot of `recv` (in place).
  virtual void allgather(const void* send, void* recv, size_t count, DType type) = 0;
  virtual void broadcast(void* data, size_t count, DType type, int root) = 0;
  // The sharded collectives (ZeRO, topology.shard). `send` holds every rank's part back to
  // back in rank order, counts[r] elements for rank r (some may be 0); rank r receives in
  // `recv` the sum over ranks of its part. Each count must fit an int.
  virtual void reduce_scatter_sum(const void* send, void* recv, const std::vector<size_t>& counts,
                                  DType type) = 0;
  // In place: rank r's counts[r] elements at offsets[r] of `data` land at the same offset of
  // every rank's `data`. The parts must not overlap.
  virtual void allgather_in_place(void* data, const std::vector<size_t>& counts,
                                  const std::vector<size_t>& offsets, DType type) = 0;
  // Rank r sends send_counts[q] elements to each rank q, taken from `send` back to back in rank
  // order, and receives recv_counts[q] elements from each rank q into `recv`, back to back in
  // rank order (its own part included: send_counts[r] == recv_counts[r]). Each count must fit an
  // int.
  virtual void alltoallv(const void* send, const std::vector<size_t>& send_counts, void* recv,
                         const std::vector<size_t>& recv_counts, DType type) = 0;
  // A collective that was started and is not yet known to be complete.
  class Pending {
   public:
    virtual ~Pending() = default;
    // Blocks until it is (on a GPU: until it is enqueued, which the NCCL calls already are).
    virtual void wait() = 0;
  };
  // allgather_in_place, started: `data` must stay untouched until wait() returns. MPI starts a
  // non-blocking all-gather, so that the caller computes meanwhile (topology.shard full's
  // prefetch); the default runs it at once.
  virtual std::unique_ptr<Pending> start_allgather_in_place(void* data,
                                                            const std::vector<size_t>& counts,
                                                            const std::vector<size_t>& offsets,
                                                            DType type);
  virtual void barrier() = 0;

  const CollectiveBytes& counted() const { return counted_; }

  // Typed conveniences for the common cases.
  void allreduce_sum(float* data, size_t count) { allreduce_sum(data, count, DType::f32); }
  void allreduce_sum(double* data, size_t count) { allreduce_sum(data, count, DType::f64); }

 protected:
  static int64_t bytes_of(const std::vector<size_t>& counts, DType type) {
    size_t n = 0;
    for (const size_t c : counts)
      n += c;
    return static_cast<int64_t>(n * dtype_size(type));
  }
  CollectiveBytes counted_;
};

}  // namespace autoloco
