// The compressed inter-dc all-reduce (fp8, int8, int4, e3m0) through the hierarchical
// all-reduce, over 2, 3 and 4 dcs with 1 and 2 members and uneven sizes: within the error of
// rounding each contribution once and the sum once, the same bits on every rank, the scalars
// exact, and the bytes counted equal to the bytes charged.
#include <mpi.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "../support/dc_layout.hpp"
#include "autoloco/comm/hierarchical_allreduce.hpp"

using namespace autoloco;
using test::Layout;
using test::same_bits_everywhere;

namespace {

// Dc d's contribution: identical on its members, different across dcs, with a few large values
// so that blocks differ in scale.
std::vector<float> contribution(size_t n, int dc) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    const float x = std::sin(0.37F * static_cast<float>(i) + 1.3F * static_cast<float>(dc));
    v[i] = (i % 97 == 5 ? 40.0F : 1.0F) * x / static_cast<float>(1 + dc);
  }
  return v;
}

double absmax(const std::vector<double>& v) {
  double m = 0;
  for (double x : v)
    m = std::max(m, std::fabs(x));
  return m;
}

// The bound on each value of the sum: every dc's contribution rounded once, then the sum of the
// rounded contributions rounded once; each rounding bounded at the scale of the largest value
// anywhere (no block's scale is larger).
std::vector<double> error_bounds(const WireCodec& c, size_t n, int dcs,
                                 const std::vector<double>& sum) {
  std::vector<double> contrib(n, 0.0);
  for (int d = 0; d < dcs; ++d) {
    const std::vector<float> v = contribution(n, d);
    std::vector<double> values(v.begin(), v.end());
    const double scale = absmax(values) / static_cast<double>(c.largest());
    for (size_t i = 0; i < n; ++i)
      contrib[i] += c.error_bound(values[i], scale);
  }
  const double sum_scale = (absmax(sum) + absmax(contrib)) / static_cast<double>(c.largest());
  std::vector<double> bound(n);
  for (size_t i = 0; i < n; ++i)
    bound[i] = contrib[i] + c.error_bound(std::fabs(sum[i]) + contrib[i], sum_scale);
  return bound;
}

void check_compressed(int members) {
  Layout layout(members);
  const int dcs = layout.topo.num_dcs;
  WanLink link(layout.inter, WanModel{1.0, 50.0, false, dcs, members});
  HierarchicalAllreduce reducer(layout.intra, link);
  for (WireFormat f :
       {WireFormat::fp8, WireFormat::int8, WireFormat::int4, WireFormat::int2, WireFormat::e3m0}) {
    for (bool stochastic : {false, true}) {
      const WireCodec codec{f, 64, stochastic};
      for (size_t n : {size_t{1}, size_t{7}, size_t{1000}, size_t{1001}, size_t{4099}}) {
        INFO(codec.describe() << ", n = " << n << ", " << dcs << " dcs x " << members);
        std::vector<double> exact(n, 0.0);
        for (int d = 0; d < dcs; ++d) {
          const std::vector<float> v = contribution(n, d);
          for (size_t i = 0; i < n; ++i)
            exact[i] += static_cast<double>(v[i]);
        }
        std::vector<float> got = contribution(n, layout.topo.dc);
        double scalars[2] = {1.0 + layout.topo.dc, 0.1 * (layout.topo.dc + 1)};
        reducer.allreduce_sum(got.data(), n, scalars, 2, codec, 42);
        const std::vector<double> bound = error_bounds(codec, n, dcs, exact);
        size_t outside = 0;
        for (size_t i = 0; i < n; ++i)
          outside += std::fabs(static_cast<double>(got[i]) - exact[i]) > bound[i] ? 1 : 0;
        CHECK(outside == 0);
        CHECK(same_bits_everywhere(got));
        // The scalars ride as doubles, summed in rank order on every rank: exact here.
        CHECK(scalars[0] == dcs * (dcs + 1) / 2.0);
        CHECK(scalars[1] == Approx(0.1 * dcs * (dcs + 1) / 2.0).epsilon(1e-15));
        // The bytes this rank handed to MPI are the bytes the link was charged for, and the
        // ranks' bytes together are the collective's total.
        const size_t shard = HierarchicalAllreduce::shard_size(n, members);
        const LinkTraffic expected = link.traffic(shard, codec, 2);
        const LinkTraffic t = link.last_traffic();
        CHECK(t.sent_bytes == expected.sent_bytes);
        int64_t together = t.sent_bytes;
        MPI_Allreduce(MPI_IN_PLACE, &together, 1, MPI_INT64_T, MPI_SUM, layout.inter.handle());
        CHECK(together == expected.all_bytes);
        CHECK(t.phases == 2);
      }
    }
  }
}

}  // namespace

TEST_CASE("compressed all-reduce over 2 dcs of one rank", "[np=2][compressed]") {
  check_compressed(1);
}

TEST_CASE("compressed all-reduce over 3 dcs of one rank", "[np=3][compressed]") {
  check_compressed(1);
}

TEST_CASE("compressed all-reduce over 4 dcs of one rank", "[np=4][compressed]") {
  check_compressed(1);
}

TEST_CASE("compressed all-reduce over 2 dcs of two ranks", "[np=4][compressed]") {
  check_compressed(2);
}

TEST_CASE("ring all-reduce: bytes counted equal bytes charged, fp32 and bf16",
          "[np=3][compressed]") {
  Layout layout(1);
  WanLink link(layout.inter, WanModel{1.0, 50.0, false, 3, 1});
  HierarchicalAllreduce reducer(layout.intra, link);
  for (WireFormat f : {WireFormat::fp32, WireFormat::bf16}) {
    for (size_t n : {size_t{5}, size_t{1001}}) {
      std::vector<float> data = contribution(n, layout.topo.dc);
      double scalars[3] = {1.0, 2.0, 3.0};
      reducer.allreduce_sum(data.data(), n, scalars, 3, WireCodec{f}, 0);
      const LinkTraffic t = link.last_traffic();
      CHECK(t.sent_bytes == link.traffic(n, WireCodec{f}, 3).sent_bytes);
      int64_t together = t.sent_bytes;
      MPI_Allreduce(MPI_IN_PLACE, &together, 1, MPI_INT64_T, MPI_SUM, layout.inter.handle());
      CHECK(together == t.all_bytes);
      CHECK(t.phases == 4);
    }
  }
}
