// The MPI backend of the Communicator seam: sums, gathers and broadcasts of flat buffers.
#include <mpi.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <numeric>
#include <vector>

#include "autoloco/comm/mpi_communicator.hpp"
#include "autoloco/comm/patient_wait.hpp"
#include "autoloco/comm/shard_span.hpp"
#include "autoloco/comm/topology.hpp"
#include "autoloco/util/error.hpp"

using namespace autoloco;

TEST_CASE("mpi communicator: allreduce_sum and allgather and broadcast", "[np=3][comm]") {
  MpiCommunicator comm(MPI_COMM_WORLD);
  const int r = comm.rank();
  const int n = comm.size();

  std::vector<float> f(1001);
  std::iota(f.begin(), f.end(), static_cast<float>(r));
  comm.allreduce_sum(f.data(), f.size());
  for (size_t i = 0; i < f.size(); i += 100) {
    CHECK(f[i] == static_cast<float>(n * static_cast<int>(i) + n * (n - 1) / 2));
  }

  double d[2] = {1.0 * r, 2.0};
  comm.allreduce_sum(d, 2);
  CHECK(d[0] == Approx(n * (n - 1) / 2.0));
  CHECK(d[1] == Approx(2.0 * n));

  std::vector<int64_t> mine = {r, 10 * r};
  std::vector<int64_t> all(2 * static_cast<size_t>(n));
  comm.allgather(mine.data(), all.data(), 2, DType::i64);
  for (int k = 0; k < n; ++k) {
    CHECK(all[2 * static_cast<size_t>(k)] == k);
    CHECK(all[2 * static_cast<size_t>(k) + 1] == 10 * k);
  }

  // In place: this rank's part already sits at its slot.
  std::vector<int64_t> slots(2 * static_cast<size_t>(n), -1);
  slots[2 * static_cast<size_t>(r)] = r;
  slots[2 * static_cast<size_t>(r) + 1] = 10 * r;
  comm.allgather(slots.data() + 2 * r, slots.data(), 2, DType::i64);
  CHECK(slots == all);

  std::vector<float> b(5, static_cast<float>(r));
  comm.broadcast(b.data(), b.size(), DType::f32, n - 1);
  CHECK(b[4] == static_cast<float>(n - 1));
  comm.barrier();
}

// The sharded collectives (topology.shard): a buffer of 10 values over 3 ranks splits 4 + 4 + 2;
// a range that starts inside shard 0 and ends inside shard 2 splits unevenly, with a 0 count
// where a rank keeps none of it.
TEST_CASE("mpi communicator: uneven reduce-scatter and in-place all-gather of shards",
          "[np=3][comm][shard]") {
  MpiCommunicator comm(MPI_COMM_WORLD);
  const int r = comm.rank();
  const ShardSpan span(10, comm.size(), r);
  CHECK(span.size() == 4);
  CHECK(span.count() == (r == 2 ? 2 : 4));
  CHECK(span.split(3, 6) == std::vector<size_t>{1, 4, 1});
  CHECK(span.split(0, 4) == std::vector<size_t>{4, 0, 0});

  // Values 1000 r + i of [3, 9): each rank receives the sum over ranks of its part.
  std::vector<float> send;
  for (int i = 3; i < 9; ++i)
    send.push_back(static_cast<float>(1000 * r + i));
  const std::vector<size_t> counts = span.split(3, 6);
  std::vector<float> recv(counts[static_cast<size_t>(r)], -1.0F);
  comm.reduce_scatter_sum(send.data(), recv.data(), counts, DType::f32);
  const int first = std::max<int>(3, static_cast<int>(span.begin()));
  for (size_t k = 0; k < recv.size(); ++k)
    CHECK(recv[k] == static_cast<float>(3000 + 3 * (first + static_cast<int>(k))));

  // Each rank fills its shard; the all-gather completes everyone's buffer.
  std::vector<float> whole(10, -1.0F);
  for (int64_t i = span.begin(); i < span.begin() + span.count(); ++i)
    whole[static_cast<size_t>(i)] = static_cast<float>(i * i);
  std::vector<size_t> sizes, offsets;
  for (int m = 0; m < comm.size(); ++m) {
    sizes.push_back(static_cast<size_t>(span.count_of(m)));
    offsets.push_back(static_cast<size_t>(span.begin_of(m)));
  }
  comm.allgather_in_place(whole.data(), sizes, offsets, DType::f32);
  for (size_t i = 0; i < whole.size(); ++i)
    CHECK(whole[i] == static_cast<float>(i * i));
}

TEST_CASE("topology: dc and member from world rank and ranks_per_dc", "[np=4][comm]") {
  const Topology t = Topology::from_world(MPI_COMM_WORLD, 2);
  CHECK(t.num_dcs == 2);
  CHECK(t.dc == t.world_rank / 2);
  CHECK(t.member == t.world_rank % 2);
  const HostRanks host = host_ranks(MPI_COMM_WORLD);
  CHECK(host.count == 4);
  CHECK(host.local_rank == t.world_rank);
  // The split communicator of a dc holds exactly its members, in member order.
  MpiCommunicator intra(MPI_COMM_WORLD, t.dc, t.member);
  CHECK(intra.size() == 2);
  CHECK(intra.rank() == t.member);
  CHECK_THROWS_AS(Topology::from_world(MPI_COMM_WORLD, 3), ConfigError);
}

TEST_CASE("a cancelled patient wait withdraws its requests before it throws", "[np=2][comm]") {
  // What the communication thread's ring does when the trainer is torn down mid-sync: the wait
  // must not return with a receive still posted into a buffer its owner is about to free.
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::atomic<bool> cancel{true};
  std::vector<float> buffer(4096, 0.0f);
  MPI_Request request = MPI_REQUEST_NULL;
  if (rank == 0) {
    // No rank ever sends this: only MPI_Cancel can complete it.
    MPI_Irecv(buffer.data(), 4096, MPI_FLOAT, 1, 99, MPI_COMM_WORLD, &request);
    CHECK_THROWS_AS(wait_all(&request, 1, WaitPolicy{true, &cancel}), CommError);
    CHECK(request == MPI_REQUEST_NULL);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}
