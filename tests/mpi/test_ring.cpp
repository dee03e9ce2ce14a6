// The inter-dc ring all-reduce on its own, over 3 and 4 ranks (one per dc): sums equal to
// MPI_Allreduce's up to the order of additions, the same bits on every rank, the scalars in
// double, and a bf16 wire accumulated in fp32.
#include <mpi.h>
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <vector>

#include "../support/dc_layout.hpp"
#include "autoloco/comm/mpi_peer_exchange.hpp"
#include "autoloco/comm/packed_message.hpp"
#include "autoloco/comm/ring_allreduce.hpp"

using namespace autoloco;
using test::same_bits_everywhere;

namespace {

void check_ring() {
  int rank = 0;
  int size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MpiPeerExchange peers(MPI_COMM_WORLD);
  RingAllreduce ring(peers);
  for (size_t n : {size_t{0}, size_t{1}, size_t{2}, size_t{5}, size_t{1000}, size_t{4097}}) {
    std::vector<float> data(n);
    for (size_t i = 0; i < n; ++i) {
      data[i] = std::cos(0.11F * static_cast<float>(i) * static_cast<float>(rank + 1));
    }
    std::vector<float> expected = data;
    MPI_Allreduce(MPI_IN_PLACE, expected.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM,
                  MPI_COMM_WORLD);
    double scalars[3] = {1.0, 1e15, 1e-9 * (rank + 1)};
    std::vector<float> got = data;
    ring.run(got.data(), n, DType::f32, scalars, 3);
    INFO("n = " << n << " on " << size << " ranks");
    for (size_t i = 0; i < n; ++i)
      CHECK(got[i] == Approx(expected[i]).margin(1e-5));
    CHECK(same_bits_everywhere(got));
    CHECK(scalars[0] == size);
    CHECK(scalars[1] == 1e15 * size);
    CHECK(scalars[2] == Approx(1e-9 * size * (size + 1) / 2).epsilon(1e-12));

    std::vector<float> half = data;
    ring.run(half.data(), n, DType::bf16, nullptr, 0);
    for (size_t i = 0; i < n; ++i) {
      // Each hop rounds a partial sum to bf16 (2^-9 relative): a few roundings of values <= size.
      CHECK(std::fabs(half[i] - expected[i]) <= 0.01F * size);
      CHECK(half[i] == bf16_to_float(float_to_bf16(half[i])));  // the result is a bf16 value
    }
    CHECK(same_bits_everywhere(half));
  }
}

}  // namespace

TEST_CASE("ring all-reduce over 3 ranks", "[np=3][ring]") {
  check_ring();
}

TEST_CASE("ring all-reduce over 4 ranks", "[np=4][ring]") {
  check_ring();
}
