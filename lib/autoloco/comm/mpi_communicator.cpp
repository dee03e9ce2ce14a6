#include "autoloco/comm/mpi_communicator.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "autoloco/comm/mpi_count.hpp"
#include "autoloco/comm/world_ranks.hpp"
#include "autoloco/util/env_limit.hpp"
#include "autoloco/util/error.hpp"
#include "autoloco/util/mpi_check.hpp"
#include "autoloco/util/watchdog.hpp"

namespace autoloco {
namespace {

// MPI counts are int: larger buffers go in chunks of at most this many elements. Tests lower
// it (AUTOLOCO_TEST_MPI_MAX_CHUNK) to cross the limit with small buffers.
size_t max_chunk() {
  static const size_t chunk =
      env_limit("AUTOLOCO_TEST_MPI_MAX_CHUNK", static_cast<size_t>(INT_MAX) / 2);
  return chunk;
}

int checked_count(size_t count) {
  return mpi_count(count, "intra-dc collective");
}

// `count` elements of `type` that occupy the extent of `stride` elements: one rank's piece of
// an all-gather whose ranks' parts lie `stride` elements apart.
class StridedPiece {
 public:
  StridedPiece(MPI_Datatype type, size_t count, size_t stride, size_t elem) {
    MPI_Datatype contiguous = MPI_DATATYPE_NULL;
    AUTOLOCO_MPI(MPI_Type_contiguous(checked_count(count), type, &contiguous));
    AUTOLOCO_MPI(
        MPI_Type_create_resized(contiguous, 0, static_cast<MPI_Aint>(stride * elem), &type_));
    AUTOLOCO_MPI(MPI_Type_commit(&type_));
    MPI_Type_free(&contiguous);
  }
  ~StridedPiece() { MPI_Type_free(&type_); }
  StridedPiece(const StridedPiece&) = delete;
  StridedPiece& operator=(const StridedPiece&) = delete;
  MPI_Datatype type() const { return type_; }

 private:
  MPI_Datatype type_ = MPI_DATATYPE_NULL;
};

// Tag of the reduce-scatter ring's messages: no other point-to-point traffic uses this
// duplicated communicator.
constexpr int kRingTag = 0x5ca7;

// acc[i] += part[i] for n values of `type` (f32 or f64).
void add_into(char* acc, const char* part, size_t n, DType type) {
  if (type == DType::f32) {
    auto* a = reinterpret_cast<float*>(acc);
    const auto* b = reinterpret_cast<const float*>(part);
    for (size_t i = 0; i < n; ++i)
      a[i] += b[i];
    return;
  }
  auto* a = reinterpret_cast<double*>(acc);
  const auto* b = reinterpret_cast<const double*>(part);
  for (size_t i = 0; i < n; ++i)
    a[i] += b[i];
}

}  // namespace

size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32:
      return 4;
    case DType::f64:
      return 8;
    case DType::i64:
      return 8;
    case DType::bf16:
      return 2;
  }
  return 0;
}

MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::f32:
      return MPI_FLOAT;
    case DType::f64:
      return MPI_DOUBLE;
    case DType::i64:
      return MPI_INT64_T;
    case DType::bf16:
      throw CommError("MPI has no bf16 sum: widen to f32 before an MPI reduction");
  }
  throw CommError("unknown dtype");
}

MpiCommunicator::MpiCommunicator(MPI_Comm comm) {
  AUTOLOCO_MPI(MPI_Comm_dup(comm, &comm_));
  init_rank_size();
}

MpiCommunicator::MpiCommunicator(MPI_Comm parent, int color, int key) {
  AUTOLOCO_MPI(MPI_Comm_split(parent, color, key, &comm_));
  init_rank_size();
}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

void MpiCommunicator::init_rank_size() {
  AUTOLOCO_MPI(MPI_Comm_rank(comm_, &rank_));
  AUTOLOCO_MPI(MPI_Comm_size(comm_, &size_));
  members_ = "a collective among " + describe_world_ranks(world_ranks(comm_));
}

template <class Blocking, class NonBlocking>
void MpiCommunicator::collective(Blocking blocking, NonBlocking non_blocking) {
  const Watch watch("an MPI collective");
  set_watch_detail(members_);
  if (!policy_.patient) {
    blocking();
    return;
  }
  MPI_Request request = MPI_REQUEST_NULL;
  non_blocking(&request);
  wait_all(&request, 1, policy_, RequestKind::collective);
}

void MpiCommunicator::allreduce_sum(void* data, size_t count, DType type) {
  if (size_ == 1) return;
  counted_.allreduce += static_cast<int64_t>(count * dtype_size(type));
  auto* bytes = static_cast<char*>(data);
  const size_t elem = dtype_size(type);
  for (size_t done = 0; done < count; done += max_chunk()) {
    const size_t n = std::min(max_chunk(), count - done);
    void* at = bytes + done * elem;
    collective(
        [&] {
          AUTOLOCO_MPI(
              MPI_Allreduce(MPI_IN_PLACE, at, checked_count(n), mpi_type(type), MPI_SUM, comm_));
        },
        [&](MPI_Request* r) {
          AUTOLOCO_MPI(MPI_Iallreduce(MPI_IN_PLACE, at, checked_count(n), mpi_type(type), MPI_SUM,
                                      comm_, r));
        });
  }
}

void MpiCommunicator::allgather(const void* send, void* recv, size_t count, DType type) {
  counted_.allgather += static_cast<int64_t>(static_cast<size_t>(size_) * count * dtype_size(type));
  // In place when this rank's part already sits at its slot of recv.
  const size_t offset = static_cast<size_t>(rank_) * count * dtype_size(type);
  const void* source = send == static_cast<char*>(recv) + offset ? MPI_IN_PLACE : send;
  if (count <= max_chunk()) {
    const int n = checked_count(count);
    collective(
        [&] {
          AUTOLOCO_MPI(MPI_Allgather(source, n, mpi_type(type), recv, n, mpi_type(type), comm_));
        },
        [&](MPI_Request* r) {
          AUTOLOCO_MPI(
              MPI_Iallgather(source, n, mpi_type(type), recv, n, mpi_type(type), comm_, r));
        });
    return;
  }
  // In pieces: piece [done, done + n) of every rank's part lands `count` elements apart, so each
  // rank receives one strided element per rank and no count or displacement exceeds an int.
  const size_t elem = dtype_size(type);
  for (size_t done = 0; done < count; done += max_chunk()) {
    const size_t n = std::min(max_chunk(), count - done);
    const StridedPiece piece(mpi_type(type), n, count, elem);
    const void* from =
        source == MPI_IN_PLACE ? MPI_IN_PLACE : static_cast<const char*>(send) + done * elem;
    void* to = static_cast<char*>(recv) + done * elem;
    collective(
        [&] {
          AUTOLOCO_MPI(
              MPI_Allgather(from, checked_count(n), mpi_type(type), to, 1, piece.type(), comm_));
        },
        [&](MPI_Request* r) {
          AUTOLOCO_MPI(MPI_Iallgather(from, checked_count(n), mpi_type(type), to, 1, piece.type(),
                                      comm_, r));
        });
  }
}

void MpiCommunicator::broadcast(void* data, size_t count, DType type, int root) {
  if (size_ == 1) return;
  auto* bytes = static_cast<char*>(data);
  const size_t elem = dtype_size(type);
  for (size_t done = 0; done < count; done += max_chunk()) {
    const size_t n = std::min(max_chunk(), count - done);
    void* at = bytes + done * elem;
    collective([&] { AUTOLOCO_MPI(MPI_Bcast(at, checked_count(n), mpi_type(type), root, comm_)); },
               [&](MPI_Request* r) {
                 AUTOLOCO_MPI(MPI_Ibcast(at, checked_count(n), mpi_type(type), root, comm_, r));
               });
  }
}

// A ring (Patarasuk and Yuan 2009): in R − 1 steps each rank passes the running sum of one part
// to its right neighbour and adds its own values of the part it receives, so that the part it
// receives last, its own, holds every rank's. Each rank sends (R − 1) / R of the buffer, the
// bandwidth optimum, and needs two part-sized buffers; MPI_Reduce_scatter's general algorithm
// may instead reduce everything to one root and scatter it, with a buffer of the whole size.
// With two ranks the one sum a + b is the all-reduce's, bit for bit.
void MpiCommunicator::reduce_scatter_sum(const void* send, void* recv,
                                         const std::vector<size_t>& counts, DType type) {
  for (const size_t c : counts)
    checked_count(c);
  const size_t elem = dtype_size(type);
  const auto* own = static_cast<const char*>(send);
  std::vector<size_t> offsets(counts.size(), 0);
  for (size_t j = 1; j < counts.size(); ++j)
    offsets[j] = offsets[j - 1] + counts[j - 1];
  const auto r = static_cast<size_t>(rank_);
  if (size_ == 1) {
    std::memcpy(recv, own, counts[0] * elem);
    return;
  }
  counted_.reduce_scatter += bytes_of(counts, type);
  if (type != DType::f32 && type != DType::f64) {
    throw CommError("reduce_scatter_sum: only f32 and f64 buffers are summed");
  }
  const Watch watch("an intra-dc reduce-scatter");
  set_watch_detail(members_);
  const auto R = static_cast<size_t>(size_);
  const size_t most = *std::max_element(counts.begin(), counts.end());
  ring_in_.resize(most * elem);
  ring_out_.resize(most * elem);
  const int right = (rank_ + 1) % size_;
  const int left = (rank_ + size_ - 1) % size_;
  for (size_t step = 0; step + 1 < R; ++step) {
    const size_t out_part = (r + 2 * R - step - 1) % R;
    const size_t in_part = (r + 2 * R - step - 2) % R;
    const void* out = step == 0 ? own + offsets[out_part] * elem : ring_out_.data();
    char* in = step + 2 == R ? static_cast<char*>(recv) : ring_in_.data();
    const int n_out = checked_count(counts[out_part]);
    const int n_in = checked_count(counts[in_part]);
    if (!policy_.patient) {
      AUTOLOCO_MPI(MPI_Sendrecv(out, n_out, mpi_type(type), right, kRingTag, in, n_in,
                                mpi_type(type), left, kRingTag, comm_, MPI_STATUS_IGNORE));
    } else {
      MPI_Request requests[2];
      AUTOLOCO_MPI(MPI_Irecv(in, n_in, mpi_type(type), left, kRingTag, comm_, &requests[0]));
      AUTOLOCO_MPI(MPI_Isend(out, n_out, mpi_type(type), right, kRingTag, comm_, &requests[1]));
      wait_all(requests, 2, policy_);
    }
    add_into(in, own + offsets[in_part] * elem, counts[in_part], type);
    if (in != recv) std::swap(ring_in_, ring_out_);
  }
}

// MPI's displacements are ints: measured from the first part, they fit unless the parts lie
// more than 2^31 elements apart (a shard of a very large buffer).
struct MpiCommunicator::Gatherv {
  std::vector<int> counts;
  std::vector<int> displs;
  char* at = nullptr;
  bool fits = true;
};

MpiCommunicator::Gatherv MpiCommunicator::gatherv(void* data, const std::vector<size_t>& counts,
                                                  const std::vector<size_t>& offsets,
                                                  DType type) const {
  Gatherv g;
  const size_t base = *std::min_element(offsets.begin(), offsets.end());
  for (size_t r = 0; r < counts.size(); ++r) {
    g.counts.push_back(checked_count(counts[r]));
    g.fits = g.fits && offsets[r] - base <= static_cast<size_t>(std::numeric_limits<int>::max());
    g.displs.push_back(g.fits ? static_cast<int>(offsets[r] - base) : 0);
  }
  g.at = static_cast<char*>(data) + base * dtype_size(type);
  return g;
}

void MpiCommunicator::broadcast_parts(void* data, const std::vector<size_t>& counts,
                                      const std::vector<size_t>& offsets, DType type) {
  auto* bytes = static_cast<char*>(data);
  for (size_t r = 0; r < counts.size(); ++r)
    broadcast(bytes + offsets[r] * dtype_size(type), counts[r], type, static_cast<int>(r));
}

void MpiCommunicator::allgather_in_place(void* data, const std::vector<size_t>& counts,
                                         const std::vector<size_t>& offsets, DType type) {
  if (size_ == 1) return;
  counted_.allgather += bytes_of(counts, type);
  Gatherv g = gatherv(data, counts, offsets, type);
  if (!g.fits) {
    broadcast_parts(data, counts, offsets, type);
    return;
  }
  collective(
      [&] {
        AUTOLOCO_MPI(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, g.at, g.counts.data(),
                                    g.displs.data(), mpi_type(type), comm_));
      },
      [&](MPI_Request* r) {
        AUTOLOCO_MPI(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, g.at, g.counts.data(),
                                     g.displs.data(), mpi_type(type), comm_, r));
      });
}

namespace {

// An MPI_Iallgatherv in flight: its count and displacement arrays must outlive it.
class PendingGatherv final : public Communicator::Pending {
 public:
  PendingGatherv(std::vector<int> counts, std::vector<int> displs, WaitPolicy policy,
                 std::string members)
      : counts_(std::move(counts)),
        displs_(std::move(displs)),
        policy_(std::move(policy)),
        members_(std::move(members)) {}
  // Abandoned while an error unwinds, a request in flight is left to MPI_Abort, which ends the
  // job: MPI forbids freeing a non-blocking collective's request, and waiting could hang.
  ~PendingGatherv() override = default;

  void wait() override {
    if (request_ == MPI_REQUEST_NULL) return;
    const Watch watch("an MPI all-gather started earlier (topology.shard full's prefetch)");
    set_watch_detail(members_);
    wait_all(&request_, 1, policy_, RequestKind::collective);
  }

  int* counts() { return counts_.data(); }
  int* displs() { return displs_.data(); }
  MPI_Request* request() { return &request_; }

 private:
  std::vector<int> counts_;
  std::vector<int> displs_;
  WaitPolicy policy_;
  std::string members_;
  MPI_Request request_ = MPI_REQUEST_NULL;
};

}  // namespace

std::unique_ptr<Communicator::Pending> MpiCommunicator::start_allgather_in_place(
    void* data, const std::vector<size_t>& counts, const std::vector<size_t>& offsets, DType type) {
  Gatherv g = gatherv(data, counts, offsets, type);
  // At once: alone, or in broadcasts.
  if (size_ == 1 || !g.fits) {
    return Communicator::start_allgather_in_place(data, counts, offsets, type);
  }
  counted_.allgather += bytes_of(counts, type);
  auto pending =
      std::make_unique<PendingGatherv>(std::move(g.counts), std::move(g.displs), policy_, members_);
  AUTOLOCO_MPI(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, g.at, pending->counts(),
                               pending->displs(), mpi_type(type), comm_, pending->request()));
  return pending;
}

void MpiCommunicator::alltoallv(const void* send, const std::vector<size_t>& send_counts,
                                void* recv, const std::vector<size_t>& recv_counts, DType type) {
  counted_.alltoall += bytes_of(send_counts, type);
  std::vector<int> sn;
  std::vector<int> sd;
  std::vector<int> rn;
  std::vector<int> rd;
  size_t s_at = 0;
  size_t r_at = 0;
  for (size_t q = 0; q < send_counts.size(); ++q) {
    sn.push_back(checked_count(send_counts[q]));
    sd.push_back(checked_count(s_at));
    rn.push_back(checked_count(recv_counts[q]));
    rd.push_back(checked_count(r_at));
    s_at += send_counts[q];
    r_at += recv_counts[q];
  }
  collective(
      [&] {
        AUTOLOCO_MPI(MPI_Alltoallv(send, sn.data(), sd.data(), mpi_type(type), recv, rn.data(),
                                   rd.data(), mpi_type(type), comm_));
      },
      [&](MPI_Request* r) {
        AUTOLOCO_MPI(MPI_Ialltoallv(send, sn.data(), sd.data(), mpi_type(type), recv, rn.data(),
                                    rd.data(), mpi_type(type), comm_, r));
      });
}

void MpiCommunicator::barrier() {
  collective([&] { AUTOLOCO_MPI(MPI_Barrier(comm_)); },
             [&](MPI_Request* r) { AUTOLOCO_MPI(MPI_Ibarrier(comm_, r)); });
}

}  // namespace autoloco
