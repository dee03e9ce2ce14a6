// The one seam for moving flat buffers between ranks. Implementations: MPI (CPU buffers, and
// always for the inter-dc link) and NCCL (device buffers inside a dc, on CUDA builds).
#pragma once

#include <cstddef>
#include <string>

namespace autoloco {

enum class DType { f32, f64, i64, bf16 };

size_t dtype_size(DType t);

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
  virtual void barrier() = 0;

  // Typed conveniences for the common cases.
  void allreduce_sum(float* data, size_t count) { allreduce_sum(data, count, DType::f32); }
  void allreduce_sum(double* data, size_t count) { allreduce_sum(data, count, DType::f64); }
};

}  // namespace autoloco
