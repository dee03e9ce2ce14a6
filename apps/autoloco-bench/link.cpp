// autoloco-bench --comm --link-gbps B: the WAN model (comm/wan_link.hpp) held against a real
// link, for runs whose dcs sit on hosts joined by a network of B Gbit/s per host (the network
// lab, scripts/netlab.sh, shapes each host's egress to B). First the latency: the mean time of a
// one-value inter-dc all-reduce over its phases. Then, for every size, the inter-dc fp32
// all-reduce of a sync (each member's shard of the vector, the ring, the intra-dc all-gather)
// timed as the comm benchmark does (max over ranks of the mean over iterations), against what
// the model charges with bandwidth B and the measured latency: 2 (G - 1) (latency + n / (G B))
// for a ring of n bytes. busbw is the bytes a host sent per second (its members' ring messages
// over the time), the figure that the shaped rate bounds.
#include <mpi.h>

#include <algorithm>
#include <vector>

#include "autoloco/comm/hierarchical_allreduce.hpp"
#include "autoloco/comm/mpi_communicator.hpp"
#include "autoloco/comm/topology.hpp"
#include "autoloco/comm/wan_link.hpp"
#include "autoloco/util/json.hpp"
#include "autoloco/util/timer.hpp"
#include "bench.hpp"

namespace autoloco::bench {
namespace {

// Mean seconds of `op` over `iters` after `warmup`, the slowest rank's; every call starts
// together.
template <class Op>
double mean_seconds(int64_t iters, int64_t warmup, Op op, MPI_Comm world) {
  double elapsed = 0.0;
  for (int64_t i = 0; i < warmup + iters; ++i) {
    MPI_Barrier(world);
    Timer t;
    op();
    if (i >= warmup) elapsed += t.seconds();
  }
  double mean = elapsed / static_cast<double>(iters);
  MPI_Allreduce(MPI_IN_PLACE, &mean, 1, MPI_DOUBLE, MPI_MAX, world);
  return mean;
}

// Seconds per phase of a one-value all-reduce: what the link costs a message whatever its size.
double measured_latency_s(const Args& args, const Topology& topo, MpiCommunicator& world,
                          MpiCommunicator& inter) {
  WanLink link(inter, WanModel{1.0, 0.0, false, topo.num_dcs, topo.ranks_per_dc});
  float value = 1.0F;
  const double t = mean_seconds(
      std::max<int64_t>(args.iters, 50), args.warmup,
      [&] { link.allreduce(&value, 1, WireCodec{}, nullptr, 0); }, world.handle());
  return t / std::max(1, link.traffic(1, WireCodec{}, 0).phases);
}

JsonObject measure_size(const Args& args, int64_t n, double latency_s, const Topology& topo,
                        MpiCommunicator& world, MpiCommunicator& intra, MpiCommunicator& inter) {
  const auto count = static_cast<size_t>(n);
  const WanModel model{args.link_gbps, latency_s * 1e3, false, topo.num_dcs, topo.ranks_per_dc};
  WanLink link(inter, model);
  HierarchicalAllreduce reducer(intra, link);
  std::vector<float> data(count, 1.0F);
  const double measured = mean_seconds(
      args.iters, args.warmup,
      [&] { reducer.allreduce_sum(data.data(), count, nullptr, 0, WireCodec{}); },
      world.handle());
  const size_t shard = HierarchicalAllreduce::shard_size(count, topo.ranks_per_dc);
  const LinkTraffic traffic = link.traffic(shard, WireCodec{}, 0);
  const double predicted = model.seconds(traffic);
  const double host_bytes = static_cast<double>(traffic.sent_bytes) * topo.ranks_per_dc;
  const double busbw_gbps = host_bytes * 8.0 / measured / 1e9;
  return JsonObject()
      .add("floats", n)
      .add("bytes", 4 * n)
      .add("measured_s", measured)
      .add("model_s", predicted)
      .add("model_error", predicted / measured - 1.0)
      .add("host_sent_bytes", static_cast<int64_t>(host_bytes))
      .add("busbw_gbps", busbw_gbps)
      .add("busbw_of_rate", busbw_gbps / args.link_gbps);
}

}  // namespace

JsonObject link_report(const Args& args, const Topology& topo, MpiCommunicator& world,
                       MpiCommunicator& intra, MpiCommunicator& inter) {
  const double latency_s = measured_latency_s(args, topo, world, inter);
  std::vector<JsonObject> rows;
  for (int64_t n : args.sizes)
    rows.push_back(measure_size(args, n, latency_s, topo, world, intra, inter));
  return JsonObject()
      .add("rate_gbps", args.link_gbps)
      .add("latency_ms", latency_s * 1e3)
      .add("results", rows);
}

}  // namespace autoloco::bench
