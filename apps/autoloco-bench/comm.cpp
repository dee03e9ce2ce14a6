// autoloco-bench --comm: the hierarchical outer all-reduce (inter-dc all-reduce of each member's
// shard over the WAN-wrapped link, then intra-dc all-gather) against a plain MPI_Allreduce of the
// same vector over the whole world, for several vector sizes. Reported as nccl-tests do: time
// per operation (max over ranks, mean over iterations), algbw = bytes / time and busbw = algbw
// 2 (P - 1) / P, with a data check of every result, and the bytes each rank sent across dcs.
// The hierarchical path carries a round's scalars, as the outer sync does.
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "autoloco/comm/hierarchical_allreduce.hpp"
#include "autoloco/comm/mpi_communicator.hpp"
#include "autoloco/comm/topology.hpp"
#include "autoloco/comm/wan_link.hpp"
#include "autoloco/train/outer_sync.hpp"
#include "autoloco/util/json.hpp"
#include "autoloco/util/timer.hpp"
#include "bench.hpp"

namespace autoloco::bench {
namespace {

// Small integers: every partial sum is exact in fp32, so the check can demand equality.
void fill(std::vector<float>& data, int dc) {
  for (size_t i = 0; i < data.size(); ++i)
    data[i] = static_cast<float>(i % 13 + static_cast<size_t>(dc));
}

bool check(const std::vector<float>& data, int dcs, int copies) {
  for (size_t i = 0; i < data.size(); ++i) {
    const double expected = copies * (dcs * static_cast<double>(i % 13) + dcs * (dcs - 1) / 2.0);
    if (data[i] != static_cast<float>(expected)) return false;
  }
  return true;
}

// Mean seconds per operation, the slowest rank's.
template <class Op>
double time_op(std::vector<float>& data, int dc, int64_t iters, int64_t warmup, Op op,
               MPI_Comm world) {
  double elapsed = 0.0;
  for (int64_t i = 0; i < warmup + iters; ++i) {
    fill(data, dc);
    MPI_Barrier(world);
    Timer t;
    op();
    if (i >= warmup) elapsed += t.seconds();
  }
  double mean = elapsed / static_cast<double>(iters);
  MPI_Allreduce(MPI_IN_PLACE, &mean, 1, MPI_DOUBLE, MPI_MAX, world);
  return mean;
}

bool all_ranks(bool ok, MPI_Comm world) {
  int v = ok ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_MIN, world);
  return v == 1;
}

JsonObject measure(const Args& args, int64_t n, const Topology& topo, MpiCommunicator& world,
                   MpiCommunicator& intra, MpiCommunicator& inter, bool& checks_passed) {
  const auto count = static_cast<size_t>(n);
  std::vector<float> data(count);
  WanLink link(inter, WanModel{1.0, 50.0, false, topo.num_dcs, topo.ranks_per_dc});
  HierarchicalAllreduce reducer(intra, link);
  // As in a round's end: the round's scalars ride in the message, so the packed reduction runs.
  constexpr size_t kScalars = OuterSync::kRoundScalars;
  double scalars[kScalars] = {};
  const double hier_s = time_op(
      data, topo.dc, args.iters, args.warmup,
      [&] {
        std::fill(scalars, scalars + kScalars, 1.0 + topo.dc);
        reducer.allreduce_sum(data.data(), count, scalars, kScalars, DType::f32);
      },
      world.handle());
  const bool scalars_ok = scalars[0] == topo.num_dcs * (topo.num_dcs + 1) / 2.0;
  const bool hier_ok = all_ranks(check(data, topo.num_dcs, 1) && scalars_ok, world.handle());
  const double plain_s = time_op(
      data, topo.dc, args.iters, args.warmup, [&] { world.allreduce_sum(data.data(), count); },
      world.handle());
  const bool plain_ok = all_ranks(check(data, topo.num_dcs, topo.ranks_per_dc), world.handle());
  checks_passed = checks_passed && hier_ok && plain_ok;

  const double bytes = 4.0 * static_cast<double>(n);
  const double p = topo.world_size;
  const double bus = 2.0 * (p - 1.0) / p;
  const int64_t ops = args.iters + args.warmup;
  const int64_t per_rank =
      link.messages() > 0 ? link.dc_bytes() / topo.ranks_per_dc / ops : int64_t{0};
  const auto expected = static_cast<int64_t>(PackedLayout{
      HierarchicalAllreduce::shard_size(count, topo.ranks_per_dc), DType::f32, kScalars}
                                                 .bytes());
  return JsonObject()
      .add("floats", n)
      .add("bytes", static_cast<int64_t>(bytes))
      .add("hier_time_s", hier_s)
      .add("hier_algbw_GBps", bytes / hier_s / 1e9)
      .add("hier_busbw_GBps", bytes / hier_s / 1e9 * bus)
      .add("hier_check", hier_ok)
      .add("plain_time_s", plain_s)
      .add("plain_algbw_GBps", bytes / plain_s / 1e9)
      .add("plain_busbw_GBps", bytes / plain_s / 1e9 * bus)
      .add("plain_check", plain_ok)
      .add("speedup", plain_s / hier_s)
      .add("inter_dc_bytes_per_rank", per_rank)
      .add("expected_bytes_per_rank", topo.num_dcs > 1 ? expected : int64_t{0})
      .add("sim_link_s_at_1gbps_50ms", link.model().seconds(static_cast<size_t>(expected)));
}

}  // namespace

int comm(const Args& args) {
  const Topology topo = Topology::from_world(MPI_COMM_WORLD, args.ranks_per_dc);
  MpiCommunicator world(MPI_COMM_WORLD);
  MpiCommunicator intra(MPI_COMM_WORLD, topo.dc, topo.member);
  MpiCommunicator inter(MPI_COMM_WORLD, topo.member, topo.dc);
  std::vector<JsonObject> rows;
  bool ok = true;
  for (int64_t n : args.sizes) {
    rows.push_back(measure(args, n, topo, world, intra, inter, ok));
  }
  if (topo.world_rank == 0) {
    const JsonObject out = JsonObject()
                               .add("benchmark", "comm")
                               .add("world_size", topo.world_size)
                               .add("ranks_per_dc", topo.ranks_per_dc)
                               .add("dcs", topo.num_dcs)
                               .add("iters", args.iters)
                               .add("results", rows);
    std::printf("%s\n", out.str().c_str());
  }
  return ok ? 0 : 1;
}

}  // namespace autoloco::bench
