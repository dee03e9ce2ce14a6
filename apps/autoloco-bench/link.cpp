// autoloco-bench --comm --link-gbps B: the WAN model (comm/wan_link.hpp) held against a real
// link, for runs whose dcs sit on hosts joined by a network of B Gbit/s per host (the network
// lab, scripts/netlab.sh, shapes each host's egress to B). First the latency: the mean time of a
// one-value inter-dc all-reduce over its phases. Then, for every size, the inter-dc fp32
// all-reduce of a sync (each member's shard of the vector, the ring, the intra-dc all-gather)
// timed as the comm benchmark does (max over ranks of the mean over iterations), against what
// the model charges with bandwidth B and the measured latency: 2 (G - 1) (latency + n / (G B))
// for a ring of n bytes. busbw is the bytes a host sent per second (its members' ring messages
// over the time), the figure that the shaped rate bounds.
// The shaper counts whole Ethernet frames, of which TCP carries MTU - 52 bytes (IPv4 and TCP
// headers with timestamps, Linux's default) per MTU + 14 (the Ethernet header): the payload
// can flow at that fraction of the rate, the goodput. model_goodput_s is the model with B the
// goodput: the bandwidth to give wan.bandwidth_gbps for a link of that line rate.
#include <mpi.h>

#include <algorithm>
#include <vector>

#include "autoloco/comm/hierarchical_allreduce.hpp"
#include "autoloco/comm/mpi_communicator.hpp"
#include "autoloco/comm/topology.hpp"
#include "autoloco/comm/wan_link.hpp"
#include "autoloco/util/json.hpp"
#include "bench.hpp"

namespace autoloco::bench {
namespace {

double goodput_fraction(int64_t mtu) {
  return static_cast<double>(mtu - 52) / static_cast<double>(mtu + 14);
}

// Seconds per phase of a one-value all-reduce: what the link costs a message whatever its size.
double measured_latency_s(const Args& args, const Topology& topo, MpiCommunicator& world,
                          MpiCommunicator& inter) {
  WanLink link(inter, WanModel{1.0, 0.0, false, topo.num_dcs, topo.ranks_per_dc});
  float value = 1.0F;
  const double t = mean_seconds(
      std::max<int64_t>(args.iters, 50), args.warmup, world.handle(), [] {},
      [&] { link.allreduce(&value, 1, WireCodec{}, nullptr, 0); });
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
      args.iters, args.warmup, world.handle(), [] {},
      [&] { reducer.allreduce_sum(data.data(), count, nullptr, 0, WireCodec{}); });
  const size_t shard = HierarchicalAllreduce::shard_size(count, topo.ranks_per_dc);
  const LinkTraffic traffic = link.traffic(shard, WireCodec{}, 0);
  const double predicted = model.seconds(traffic);
  WanModel goodput_model = model;
  goodput_model.bandwidth_gbps = args.link_gbps * goodput_fraction(args.mtu);
  const double goodput_predicted = goodput_model.seconds(traffic);
  const double host_bytes = static_cast<double>(traffic.sent_bytes) * topo.ranks_per_dc;
  const double busbw_gbps = host_bytes * 8.0 / measured / 1e9;
  return JsonObject()
      .add("floats", n)
      .add("bytes", 4 * n)
      .add("measured_s", measured)
      .add("model_s", predicted)
      .add("model_error", predicted / measured - 1.0)
      .add("model_goodput_s", goodput_predicted)
      .add("model_goodput_error", goodput_predicted / measured - 1.0)
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
      .add("mtu", args.mtu)
      .add("goodput_gbps", args.link_gbps * goodput_fraction(args.mtu))
      .add("latency_ms", latency_s * 1e3)
      .add("results", rows);
}

}  // namespace autoloco::bench
