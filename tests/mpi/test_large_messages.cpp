// Messages over MPI's int count go in pieces (4 ranks = 2 dcs x 2 members). The limits are
// lowered for these tests (AUTOLOCO_TEST_MPI_MAX_CHUNK elements per intra-dc collective,
// AUTOLOCO_TEST_MAX_PIECE_BYTES per inter-dc all-reduce), so that small buffers cross them: the
// intra-dc all-gather, all-reduce and broadcast and the hierarchical all-reduce (scalars riding
// once) give what one message would.
#include <mpi.h>
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <vector>

#include "../support/dc_layout.hpp"
#include "autoloco/comm/hierarchical_allreduce.hpp"

using namespace autoloco;
using test::Layout;

namespace {

// Before any collective of the process: the limits are read once.
void lower_limits() {
  setenv("AUTOLOCO_TEST_MPI_MAX_CHUNK", "5", 1);
  setenv("AUTOLOCO_TEST_MAX_PIECE_BYTES", "64", 1);
}

}  // namespace

TEST_CASE("intra-dc collectives over the chunk limit go in pieces", "[np=4][large]") {
  lower_limits();
  Layout layout(2);
  const int member = layout.topo.member;
  const size_t count = 23;  // 5 pieces of at most 5
  std::vector<float> mine(count);
  for (size_t i = 0; i < count; ++i)
    mine[i] = static_cast<float>(100 * member + static_cast<int>(i));
  std::vector<float> gathered(2 * count);
  layout.intra.allgather(mine.data(), gathered.data(), count, DType::f32);
  std::vector<float> in_place(2 * count, -1.0F);
  std::copy(mine.begin(), mine.end(),
            in_place.begin() + static_cast<std::ptrdiff_t>(member * count));
  layout.intra.allgather(in_place.data() + member * count, in_place.data(), count, DType::f32);
  for (int m = 0; m < 2; ++m) {
    for (size_t i = 0; i < count; ++i) {
      const float expected = static_cast<float>(100 * m + static_cast<int>(i));
      CHECK(gathered[static_cast<size_t>(m) * count + i] == expected);
      CHECK(in_place[static_cast<size_t>(m) * count + i] == expected);
    }
  }
  std::vector<float> sum = mine;
  layout.intra.allreduce_sum(sum.data(), count, DType::f32);
  std::vector<float> value(count, member == 1 ? 7.0F : 0.0F);
  layout.intra.broadcast(value.data(), count, DType::f32, 1);
  for (size_t i = 0; i < count; ++i) {
    CHECK(sum[i] == static_cast<float>(100 + 2 * static_cast<int>(i)));
    CHECK(value[i] == 7.0F);
  }
}

TEST_CASE("the hierarchical all-reduce over the piece limit goes in pieces with the scalars once",
          "[np=4][large]") {
  lower_limits();
  Layout layout(2);
  WanLink link(layout.inter, WanModel{1.0, 50.0, false, 2, 2});
  HierarchicalAllreduce reducer(layout.intra, link);
  const size_t n = 1001;  // shards of 501 floats: 32 pieces of 16 and a chunk-limited gather
  std::vector<float> data(n);
  for (size_t i = 0; i < n; ++i)
    data[i] = std::sin(0.37F * static_cast<float>(i) + static_cast<float>(layout.topo.dc));
  std::vector<float> expected = data;
  MPI_Allreduce(MPI_IN_PLACE, expected.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM,
                layout.inter.handle());
  double scalars[2] = {1.0 + layout.topo.dc, 2.0};
  reducer.allreduce_sum(data.data(), n, scalars, 2, WireCodec{});
  CHECK(data == expected);
  CHECK(scalars[0] == 3.0);
  CHECK(scalars[1] == 4.0);
  CHECK(link.messages() > 30);  // one all-reduce per piece
}
