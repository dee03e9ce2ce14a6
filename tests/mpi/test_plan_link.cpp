// The planner's link figures (train/memory_plan.hpp) against the collectives they mirror: its
// planned_traffic equals RingAllreduce's and CompressedAllreduce's traffic (through WanLink)
// on every rank for every wire format, and plan_link's seconds equal what the trainer's start
// log computes for one sync (WanLink::seconds of one member's shard with the round's scalars).
// LibTorch first: Debian's LibTorch pulls in glog, whose CHECK would replace Catch's.
#include "autoloco/train/outer_sync.hpp"

#include <mpi.h>
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "../support/dc_layout.hpp"
#include "autoloco/comm/hierarchical_allreduce.hpp"
#include "autoloco/comm/wan_link.hpp"
#include "autoloco/model/model_specs.hpp"
#include "autoloco/train/memory_plan.hpp"

using namespace autoloco;

namespace {

void check_plan_link(int ranks_per_dc) {
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  test::Layout layout(ranks_per_dc);
  const int dcs = world / ranks_per_dc;
  WanLink link(layout.inter, WanModel{2.5, 30.0, false, dcs, ranks_per_dc});
  std::vector<WireCodec> codecs;
  for (WireFormat f : {WireFormat::fp32, WireFormat::bf16, WireFormat::fp8, WireFormat::int8,
                       WireFormat::int4, WireFormat::int2, WireFormat::e3m0}) {
    codecs.push_back(WireCodec{f, 64, false});
  }
  // The sparse wire (all-gathered) with fp32 and int2 values.
  codecs.push_back(WireCodec{WireFormat::fp32, 64, false, 0.05, 256});
  codecs.push_back(WireCodec{WireFormat::int2, 64, false, 0.02, 4096});
  for (const WireCodec& codec : codecs) {
    const WireFormat f = codec.format;
    for (size_t n : {size_t{0}, size_t{1}, size_t{5}, size_t{1001}, size_t{4097}}) {
      for (size_t k : {size_t{0}, size_t{14}}) {
        INFO(wire_format_name(f) << " top-k " << codec.topk << ", " << n << " values, " << k
                                 << " scalars, dc " << layout.topo.dc);
        const LinkTraffic want = link.traffic(n, codec, k);
        const LinkTraffic got = planned_traffic(n, codec, k, dcs, layout.topo.dc);
        CHECK(got.sent_bytes == want.sent_bytes);
        CHECK(got.all_bytes == want.all_bytes);
        CHECK(got.phases == want.phases);
        CHECK(got.critical_bytes == want.critical_bytes);
      }
    }
  }
  for (const char* wire : {"fp32", "bf16", "int4", "int2+topk"}) {
    const bool topk = std::string(wire) == "int2+topk";
    std::vector<std::string> sets = {"model.n_layer=2",
                                     "model.d_model=32",
                                     "model.n_head=2",
                                     "model.vocab_size=64",
                                     "wan.bandwidth_gbps=2.5",
                                     "wan.latency_ms=30",
                                     std::string("outer.wire_dtype=") + (topk ? "int2" : wire),
                                     "topology.ranks_per_dc=" + std::to_string(ranks_per_dc)};
    if (topk) {
      sets.emplace_back("outer.wire_topk=0.02");
      sets.emplace_back("outer.error_feedback=true");
    }
    const Config c = parse_config("", sets);
    const auto n = static_cast<size_t>(parameter_count(c.model));
    const size_t shard = HierarchicalAllreduce::shard_size(n, ranks_per_dc);
    const size_t k = OuterSync::message_scalars(dcs);
    const LinkPlan plan = plan_link(c, world);
    INFO(wire);
    CHECK(plan.shard_values == static_cast<int64_t>(shard));
    CHECK(plan.seconds == Approx(link.seconds(shard, wire_codec(c.outer), k)).epsilon(1e-12));
    CHECK(plan.message_bytes ==
          static_cast<int64_t>(WanLink::message_bytes(shard, wire_codec(c.outer), k)) *
              ranks_per_dc);
  }
}

}  // namespace

TEST_CASE("plan: link traffic equals the collectives' over 3 dcs of one rank", "[np=3][plan]") {
  check_plan_link(1);
}

TEST_CASE("plan: link traffic equals the collectives' over 2 dcs of two ranks", "[np=4][plan]") {
  check_plan_link(2);
}
