// autoloco-bench --comm: the hierarchical outer all-reduce (inter-dc all-reduce of each member's
// shard over the WAN-wrapped link, then intra-dc all-gather) against a plain MPI_Allreduce of the
// same vector over the whole world, for several vector sizes. Reported as nccl-tests do: time
// per operation (max over ranks, mean over iterations), algbw = bytes / time and busbw = algbw
// 2 (P - 1) / P, with a data check of every result, and the bytes each rank sent across dcs.
// The hierarchical path carries a round's scalars, as the outer sync does.
// Then, for every wire format (outer.wire_dtype, with the default block) and SparseLoCo's top-k
// in int2 and int4 (outer.wire_topk 0.02 of 4096): the GB/s of encoding
// and decoding on one rank (fp32 bytes in or out per second), the all-reduce's time, the bytes
// each rank sent and the busbw over them, and the result's max and rms error against the fp32
// all-reduce of the same values.
// With --link-gbps, the link benchmark of link.cpp runs instead.
#include <fmt/format.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "autoloco/comm/hierarchical_allreduce.hpp"
#include "autoloco/comm/mpi_communicator.hpp"
#include "autoloco/comm/sparse_codec.hpp"
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

// Mean seconds per operation, the slowest rank's, on freshly filled data.
template <class Op>
double time_op(std::vector<float>& data, int dc, int64_t iters, int64_t warmup, Op op,
               MPI_Comm world) {
  return mean_seconds(
      iters, warmup, world, [&] { fill(data, dc); }, op);
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
        reducer.allreduce_sum(data.data(), count, scalars, kScalars, WireCodec{});
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
      .add("sim_link_s_at_1gbps_50ms",
           link.seconds(HierarchicalAllreduce::shard_size(count, topo.ranks_per_dc), WireCodec{},
                        kScalars));
}

// Pseudo-gradient-like values: normal, with a spread of scales across blocks, different per dc.
std::vector<float> gradient_like(size_t n, int dc) {
  std::mt19937 gen(static_cast<unsigned>(1234 + dc));
  std::normal_distribution<float> normal(0.0F, 1e-3F);
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = normal(gen) * (1.0F + static_cast<float>((i / 4096) % 7));
  return v;
}

// Seconds per call of `op`, the best of `iters` (a one-rank measurement: the fastest run is the
// least disturbed).
template <class Op>
double best_seconds(int64_t iters, Op op) {
  double best = 1e30;
  for (int64_t i = 0; i < iters; ++i) {
    Timer t;
    op();
    best = std::min(best, t.seconds());
  }
  return best;
}

// The dense formats with the default block, then SparseLoCo's top-k (2% of 4096) in int2 and
// int4: the codecs a run's outer.wire_* keys can name.
std::vector<WireCodec> bench_codecs() {
  std::vector<WireCodec> out;
  for (WireFormat f : {WireFormat::fp32, WireFormat::bf16, WireFormat::fp8, WireFormat::int8,
                       WireFormat::int4, WireFormat::int2, WireFormat::e3m0}) {
    out.push_back(WireCodec{f});
  }
  for (WireFormat f : {WireFormat::int2, WireFormat::int4}) {
    WireCodec sparse{f};
    sparse.topk = 0.02;
    sparse.topk_chunk = 4096;
    out.push_back(sparse);
  }
  return out;
}

std::string codec_label(const WireCodec& codec) {
  std::string label = wire_format_name(codec.format);
  if (codec.sparse()) label += fmt::format("+top{:g}/{}", codec.topk, codec.topk_chunk);
  return label;
}

JsonObject measure_format(const Args& args, const WireCodec& codec, int64_t n, const Topology& topo,
                          MpiCommunicator& world, MpiCommunicator& intra, MpiCommunicator& inter) {
  const auto count = static_cast<size_t>(n);
  const std::vector<float> values = gradient_like(count, topo.dc);
  std::vector<std::byte> wire(codec.encoded_bytes(count));
  std::vector<float> decoded(count);
  double encode_s = 0.0;
  double decode_s = 0.0;
  if (codec.sparse()) {
    const SparseCodec sparse = sparse_codec(codec);
    encode_s = best_seconds(args.iters,
                            [&] { encode_sparse(sparse, values.data(), count, wire.data(), 0); });
    decode_s = best_seconds(args.iters,
                            [&] { decode_sparse(sparse, wire.data(), count, decoded.data()); });
  } else {
    encode_s = best_seconds(args.iters, [&] { encode(codec, values.data(), count, wire.data()); });
    decode_s = best_seconds(args.iters, [&] { decode(codec, wire.data(), count, decoded.data()); });
  }

  WanLink link(inter, WanModel{1.0, 50.0, false, topo.num_dcs, topo.ranks_per_dc});
  HierarchicalAllreduce reducer(intra, link);
  std::vector<float> exact = values;
  reducer.allreduce_sum(exact.data(), count, nullptr, 0, WireCodec{});
  std::vector<float> data(count);
  const double time_s = mean_seconds(
      args.iters, args.warmup, world.handle(), [&] { data = values; },
      [&] { reducer.allreduce_sum(data.data(), count, nullptr, 0, codec); });
  double max_err = 0.0;
  double sq_err = 0.0;
  double sq_exact = 0.0;
  for (size_t i = 0; i < count; ++i) {
    const double e = static_cast<double>(data[i]) - static_cast<double>(exact[i]);
    max_err = std::max(max_err, std::fabs(e));
    sq_err += e * e;
    sq_exact += static_cast<double>(exact[i]) * static_cast<double>(exact[i]);
  }
  const double rms_err = std::sqrt(sq_err / static_cast<double>(std::max<size_t>(count, 1)));
  const double rms_exact = std::sqrt(sq_exact / static_cast<double>(std::max<size_t>(count, 1)));
  const int64_t sent = topo.num_dcs > 1 ? link.last_traffic().sent_bytes : 0;
  const double fp32_bytes = 4.0 * static_cast<double>(n);
  return JsonObject()
      .add("format", codec_label(codec))
      .add("floats", n)
      .add("encode_GBps", fp32_bytes / encode_s / 1e9)
      .add("decode_GBps", fp32_bytes / decode_s / 1e9)
      .add("encoded_bytes", static_cast<int64_t>(wire.size()))
      .add("allreduce_time_s", time_s)
      .add("sent_bytes_per_rank", sent)
      .add("sent_busbw_GBps", static_cast<double>(sent) / time_s / 1e9)
      .add("max_abs_error", max_err)
      .add("rms_error", rms_err)
      .add("rms_error_relative", rms_exact > 0 ? rms_err / rms_exact : 0.0)
      .add("sim_link_s_at_1gbps_50ms",
           link.seconds(HierarchicalAllreduce::shard_size(count, topo.ranks_per_dc), codec, 0));
}

}  // namespace

int comm(const Args& args) {
  const Topology topo = Topology::from_world(MPI_COMM_WORLD, args.ranks_per_dc);
  MpiCommunicator world(MPI_COMM_WORLD);
  MpiCommunicator intra(MPI_COMM_WORLD, topo.dc, topo.member);
  MpiCommunicator inter(MPI_COMM_WORLD, topo.member, topo.dc);
  // The object's first fields, the same for both benchmarks.
  const auto header = [&](const char* benchmark) {
    return JsonObject()
        .add("benchmark", benchmark)
        .add("world_size", topo.world_size)
        .add("ranks_per_dc", topo.ranks_per_dc)
        .add("dcs", topo.num_dcs)
        .add("iters", args.iters);
  };
  if (args.link_gbps > 0.0) {
    const JsonObject link = link_report(args, topo, world, intra, inter);
    if (topo.world_rank == 0) std::printf("%s\n", header("link").add("link", link).str().c_str());
    return 0;
  }
  std::vector<JsonObject> rows;
  bool ok = true;
  std::vector<JsonObject> formats;
  for (int64_t n : args.sizes) {
    rows.push_back(measure(args, n, topo, world, intra, inter, ok));
    for (const WireCodec& codec : bench_codecs())
      formats.push_back(measure_format(args, codec, n, topo, world, intra, inter));
  }
  if (topo.world_rank == 0) {
    const JsonObject out = header("comm").add("results", rows).add("formats", formats);
    std::printf("%s\n", out.str().c_str());
  }
  return ok ? 0 : 1;
}

}  // namespace autoloco::bench
