// The rules of the plan (memory_plan.hpp), each with the allocation it stands for.
#include "autoloco/train/memory_plan.hpp"

#include <algorithm>
#include <set>
#include <utility>
#include <vector>

#include "autoloco/comm/chunks.hpp"
#include "autoloco/comm/packed_message.hpp"
#include "autoloco/comm/wan_link.hpp"
#include "autoloco/model/model_specs.hpp"
#include "autoloco/optim/outer_optimizer.hpp"
#include "autoloco/train/outer_sync.hpp"
#include "autoloco/util/error.hpp"

namespace autoloco {
namespace {

constexpr int64_t kFloat = 4;

// The blocks' matrices Muon steps (muon_matrices), as (rows, cols) of each parameter.
std::vector<std::pair<int64_t, int64_t>> muon_shapes(const ModelConfig& model) {
  std::vector<std::pair<int64_t, int64_t>> out;
  const auto in_block = block_parameters(model);
  for (const ParamSpec& p : parameter_specs(model)) {
    if (p.shape.size() == 2 && in_block(p.name)) out.emplace_back(p.shape[0], p.shape[1]);
  }
  return out;
}

// The elements AdamW steps beside Muon's matrices.
int64_t muon_adamw_numel(const ModelConfig& model) {
  int64_t n = parameter_count(model);
  for (const auto& [rows, cols] : muon_shapes(model))
    n -= rows * cols;
  return n;
}

// FlatMuon's scratch, allocated once per distinct shape of the blocks' matrices: the Nesterov
// input (fp32, rows x cols) and Newton-Schulz's X and Y (m x n) and A and B (m x m), m the
// smaller side, in bf16 on a GPU and fp32 on the CPU (muon.cpp).
int64_t muon_scratch_bytes(const Config& c, bool gpu) {
  const auto all = muon_shapes(c.model);
  const std::set<std::pair<int64_t, int64_t>> shapes(all.begin(), all.end());
  const int64_t ns = gpu ? 2 : 4;
  int64_t bytes = 0;
  for (const auto& [rows, cols] : shapes) {
    const int64_t m = std::min(rows, cols);
    const int64_t n = std::max(rows, cols);
    bytes += (c.inner.muon_nesterov ? kFloat * rows * cols : 0) + ns * (2 * m * n + 2 * m * m);
  }
  return bytes;
}

// gradient_sync.cpp's and the sharded modes' bucket: gradients cross the intra-dc link 2^22
// floats at a time.
constexpr int64_t kGradientBucket = int64_t{1} << 22;

// hierarchical_allreduce.cpp's max_piece_bytes (its default, without the test override): a
// shard over 1 GiB goes to the link in pieces of 2^28 values, the scalars riding with the first.
constexpr size_t kPieceValues = (size_t{1} << 30) / sizeof(float);

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

bool outer_method(const Config& c) {
  return c.outer.method != "ddp";
}

// AdamW's kernel as inner_optimizer.cpp picks it: fused on a GPU unless inner.adamw is flat.
// (auto also needs LibTorch 2.x for the fused kernel; a GPU build has it.)
bool fused_adamw(const Config& c, bool gpu) {
  return gpu && c.inner.adamw != "flat";
}

// Whether the outer momentum buffer exists: NesterovOuter allocates it at the first step with a
// momentum above 0, and momentum_schedule may raise it later in the run.
bool outer_momentum(const OuterConfig& o) {
  if (o.method != "diloco") return false;                 // local_sgd: lr 1, no momentum
  if (o.momentum_mode == "error_feedback") return false;  // the residual stands in for it
  if (o.momentum > 0) return true;
  for (const MomentumChange& m : parse_momentum_schedule(o))
    if (m.mu > 0) return true;
  return false;
}

// The activations' width: bf16 autocast keeps 16-bit activations (run.precision auto is bf16 on
// a GPU); fp32 ones are twice the bytes.
bool half_activations(const Config& c, bool gpu) {
  return c.run.precision == "bf16" || (c.run.precision == "auto" && gpu);
}

}  // namespace

int64_t MemoryClasses::total() const {
  return parameters + gradients + optimizer + outer_state + residuals + buffers + activations;
}

JsonObject memory_classes_json(const MemoryClasses& m) {
  return JsonObject()
      .add("parameters", m.parameters)
      .add("gradients", m.gradients)
      .add("optimizer", m.optimizer)
      .add("outer_state", m.outer_state)
      .add("residuals", m.residuals)
      .add("buffers", m.buffers)
      .add("activations_estimate", m.activations)
      .add("total", m.total());
}

const std::vector<std::string>& plan_shard_modes() {
  static const std::vector<std::string> modes = {"none", "optimizer", "gradients", "full"};
  return modes;
}

int64_t activation_bytes(const ModelConfig& m, int64_t micro_batch, bool half) {
  const double s = static_cast<double>(m.seq_len);
  const double b = static_cast<double>(micro_batch);
  const double d = static_cast<double>(m.d_model);
  const double a = static_cast<double>(m.n_head);
  // Korthikanti et al.'s Eq. 2 less its three dropout masks (a s² b + 2 s b d bytes): no block
  // of ours has dropout.
  const double per_layer = s * b * d * (32.0 + 4.0 * a * s / d);
  const double layers = m.recompute == "blocks" ? 1.0 : static_cast<double>(m.n_layer);
  // Recomputed blocks keep their input (s b d values each) and one block's activations exist
  // at a time, while backward runs its forward again.
  const double inputs =
      m.recompute == "blocks" ? s * b * d * 2.0 * static_cast<double>(m.n_layer) : 0.0;
  return static_cast<int64_t>((per_layer * layers + inputs) * (half ? 1.0 : 2.0));
}

// topology.shard full (gathered_units.cpp): the units' storage gathered at once at most, a
// unit and the one prefetched beside it in forward or backward (a tied head's storage includes
// the embedding's), in floats.
int64_t gathered_peak(const ModelConfig& model) {
  const std::vector<int64_t> units = unit_numels(model);
  const auto n = static_cast<int64_t>(units.size());
  auto storages = [&](int64_t e) {
    std::vector<int64_t> s = {e};
    if (e == n - 1 && model.tie_embeddings) s.push_back(0);
    return s;
  };
  int64_t most = 0;
  for (int64_t e = 0; e + 1 < n; ++e) {
    std::vector<int64_t> held = storages(e);
    for (const int64_t k : storages(e + 1)) {
      if (std::find(held.begin(), held.end(), k) == held.end()) held.push_back(k);
    }
    int64_t sum = 0;
    for (const int64_t k : held)
      sum += units[static_cast<size_t>(k)];
    most = std::max(most, sum);
  }
  return most;
}

// The largest unit's parameters in floats (with the embedding for a tied head): the gradient a
// unit's backward produces at once.
int64_t largest_execution_unit(const ModelConfig& model) {
  std::vector<int64_t> units = unit_numels(model);
  if (model.tie_embeddings) units.back() += units.front();
  return *std::max_element(units.begin(), units.end());
}

MemoryClasses plan_memory(const Config& c, const std::string& shard, int ranks_per_dc, bool gpu,
                          int dcs) {
  if (ranks_per_dc < 1) throw ConfigError("the plan needs at least one rank per dc");
  if (std::find(plan_shard_modes().begin(), plan_shard_modes().end(), shard) ==
      plan_shard_modes().end()) {
    throw ConfigError("topology.shard '" + shard +
                      "' is not one of none, optimizer, gradients, full");
  }
  const bool samples = c.batch.controller == "adloco";
  // AdLoCo's tests keep the whole gradient, so stage 2 runs as stage 1 (effective_shard_mode).
  if (shard == "gradients" && samples) return plan_memory(c, "optimizer", ranks_per_dc, gpu, dcs);
  // The flat fp32 buffer of the model (a tied head stored once) and one member's shard of it.
  const int64_t P = parameter_count(c.model);
  const int64_t S = ceil_div(P, ranks_per_dc);
  // Every instance (AdLoCo's multi-instance training) has its own replica, gradient and AdamW.
  const int64_t I = c.batch.instances;
  const bool sharded = shard != "none";
  // What a sharded member keeps of the state ZeRO shards: its shard; unsharded, the whole.
  const int64_t X = sharded ? S : P;
  const bool outer = outer_method(c);
  const bool outer_on_device =
      gpu && outer_state_device(c.outer.state_device, torch::Device(torch::kCUDA), P).is_cuda();

  // ZeRO 3 (a dc of one rank runs unsharded: effective_shard_mode).
  const bool full = shard == "full" && ranks_per_dc > 1;

  MemoryClasses m;
  // Every stage below ZeRO 3 keeps the whole replica: forward and backward need it. Stage 3
  // keeps its shard, and gathers units into storage of their own (buffers, below).
  m.parameters = kFloat * (full ? S : P) * I;
  // Stages 2 and 3 keep only the reduced shard once backward has reduce-scattered its buckets
  // or units; none and optimizer keep the whole all-reduced gradient for the step.
  m.gradients = kFloat * (shard == "gradients" || full ? S : P) * I;
  if (c.inner.optimizer == "adamw" || c.inner.optimizer == "muon") {
    // Two fp32 moments (Muon keeps its momentum in the first, muon.hpp); AdamW's flat kernel
    // also keeps a denominator of the elements it steps (adamw.cpp's denom_), the fused one only
    // a step counter. Muon runs unsharded only (validation): AdamW steps what its matrices
    // leave, and Newton-Schulz keeps its scratch per matrix shape.
    const bool muon = c.inner.optimizer == "muon";
    m.optimizer = 2 * kFloat * X * I;
    if (!fused_adamw(c, gpu)) m.optimizer += kFloat * (muon ? muon_adamw_numel(c.model) : X) * I;
    if (muon) m.optimizer += muon_scratch_bytes(c, gpu) * I;
  }
  // ddp has no anchor: its one optimizer is the inner one. Member m's outer step needs only
  // shard m of the anchor and momentum (ALGORITHMS.md §5), so they shard with the optimizer.
  const int64_t Y = outer ? X : 0;
  m.outer_state = kFloat * Y * (outer_momentum(c.outer) ? 2 : 1);
  // One fp32 value per parameter and dc, and every member sends only its own shard: already
  // sharded in every mode (outer_sync.cpp sizes it shard_size(n, members)). Host memory.
  if (c.outer.error_feedback) m.residuals = kFloat * S;

  int64_t host_buffers = 0;
  int64_t device_buffers = 0;
  // The Nesterov step forms mu b a chunk at a time, in a scratch that each fragment's outer
  // optimizer keeps beside its state (outer_optimizer.cpp).
  if (outer_momentum(c.outer) && c.outer.nesterov) {
    const int64_t scratch = kFloat * std::min(Y, NesterovOuter::kScratchChunk *
                                                     std::max<int64_t>(1, c.outer.fragments));
    (outer_on_device ? device_buffers : host_buffers) += scratch;
  }
  if (outer) {
    // Δ staged in host memory for the inter-dc link, which MPI carries from the host.
    host_buffers += kFloat * Y;
    // A GPU run also keeps a device snapshot of the sync's size: Δ computed next to a device
    // anchor, or the replica snapshotted so that it may train on (outer_sync.cpp's
    // DeviceStaging; OuterSync::buffer_bytes counts it on every GPU run).
    if (gpu) device_buffers += kFloat * Y;
  } else if (gpu) {
    // ddp on a GPU stages the whole gradient through pinned host memory for MPI
    // (gradient_sync.cpp).
    host_buffers += kFloat * P;
  }
  // The inter-dc all-reduce of a member's shard (S values) among the dcs receives one chunk of
  // it, S / dcs values (of a piece: below), into a buffer of its own (ring_allreduce.cpp's
  // incoming_; the compressed formats' sum of the chunk is the same size). With fp32 and bf16 the
  // chunk that carries the round's scalars travels packed, through a send and a receive buffer of a
  // chunk in the wire's dtype (the bench's 4 ranks showed them: about 2 S / dcs over the plan
  // without).
  const WireCodec codec = wire_codec(c.outer);
  if (dcs > 1 && codec.sparse()) {
    // The sparse wire keeps every dc's encoding of the shard (of a piece), its own included
    // (sparse_allgather.cpp's in_), and sums them into the message in place.
    const auto piece = static_cast<size_t>(std::min(S, static_cast<int64_t>(kPieceValues)));
    host_buffers += dcs * static_cast<int64_t>(codec.encoded_bytes(piece));
  } else if (dcs > 1) {
    // A shard over 1 GiB goes in pieces: the buffers hold a chunk of the largest.
    const int64_t chunk = ceil_div(std::min(S, static_cast<int64_t>(kPieceValues)), dcs);
    host_buffers += kFloat * chunk;
    if (codec.format == WireFormat::fp32 || codec.format == WireFormat::bf16) {
      const DType wire = codec.format == WireFormat::bf16 ? DType::bf16 : DType::f32;
      const PackedLayout packed{static_cast<size_t>(chunk), wire, 0};
      host_buffers += 2 * static_cast<int64_t>(packed.bytes());
    }
  }
  // A sharded dc reduce-scatters its gradient a bucket at a time (AdLoCo's whole gradient is
  // all-reduced instead): the member's part lands in a scratch buffer of the bucket's largest
  // part, and MPI's ring (mpi_communicator.cpp) keeps two such chunks in flight; NCCL needs none.
  if (sharded && ranks_per_dc > 1 && !samples) {
    // Stage 3 reduce-scatters a unit's runs instead of buckets.
    const int64_t bucket = full ? largest_execution_unit(c.model) : std::min(P, kGradientBucket);
    const int64_t chunk = ceil_div(bucket, ranks_per_dc);
    device_buffers += kFloat * chunk;
    if (!gpu) host_buffers += 2 * kFloat * chunk;
  }
  // Stage 2 copies gradients into buckets as backward produces them; a bucket's buffer is
  // reused once it is sent, and two fill at once (measured with autoloco-bench --shard on
  // GPT-2: backward finishes a parameter of the next bucket before the last of the current).
  // (AdLoCo keeps the gradient whole, and so does a dc of one rank: no buckets.)
  if (shard == "gradients" && ranks_per_dc > 1) {
    device_buffers += 2 * kFloat * std::min(P, kGradientBucket);
  }
  // Stage 3 gathers two units at once (the one computing and the one prefetched), and a unit's
  // backward holds its gradient as autograd returns it and again in the layout of its storage
  // for the reduce-scatter (gathered_units.cpp).
  if (full) {
    device_buffers += kFloat * I * (gathered_peak(c.model) + 2 * largest_execution_unit(c.model));
  }
  // AdLoCo's batch test keeps one micro-batch's whole gradient beside the accumulated one
  // (batch_step.cpp's sample_). It measures the noise of the whole gradient, so it stays 4 P
  // even when the gradient is sharded. Stage 3 keeps every member's own gradient on the shard
  // instead (full_shard.cpp's pieces_: R S), which an all-to-all of a unit's runs fills through
  // a scratch of every member's part of the largest unit.
  if (samples && full) {
    device_buffers += kFloat * I * ranks_per_dc * S;
    device_buffers +=
        kFloat * ranks_per_dc * ceil_div(largest_execution_unit(c.model), ranks_per_dc);
  } else if (samples) {
    device_buffers += kFloat * P * I;
  }
  m.buffers = host_buffers + device_buffers;

  m.activations = activation_bytes(c.model, c.data.batch_size, half_activations(c, gpu));

  // What a GPU run keeps in host memory; on the CPU all of it is (device() is the total).
  if (gpu) m.host = host_buffers + m.residuals + (outer_on_device ? 0 : m.outer_state);
  return m;
}

LinkTraffic planned_traffic(size_t count, const WireCodec& codec, size_t k, int dcs, int rank) {
  LinkTraffic t;
  if (dcs <= 1) return t;
  const auto g = static_cast<size_t>(dcs);
  const auto r = static_cast<size_t>(rank);
  auto chunk = [&](size_t c) { return chunk_of(c, count, g).count; };
  if (codec.sparse()) {
    // SparseAllgather::traffic: every dc sends its whole encoding and the scalars to each other
    // dc, all at once.
    const auto message = static_cast<int64_t>(codec.encoded_bytes(count) + k * sizeof(double));
    const auto peers = static_cast<int64_t>(g - 1);
    t.sent_bytes = peers * message;
    t.phases = 1;
    t.critical_bytes = peers * message;
    t.all_bytes = static_cast<int64_t>(g) * peers * message;
    return t;
  }
  if (!codec.has_scales()) {
    // RingAllreduce::traffic: chunk c's message is its values in the wire dtype, and chunk 0's
    // carries the scalars (packed, padded to 8 bytes); plain fp32 chunks without scalars travel
    // raw. Each of the 2 (G - 1) steps moves every chunk once.
    const DType wire = codec.format == WireFormat::bf16 ? DType::bf16 : DType::f32;
    auto message = [&](size_t c) -> int64_t {
      const PackedLayout layout{chunk(c), wire, c == 0 ? k : 0};
      const bool raw = wire == DType::f32 && layout.scalars == 0;
      return static_cast<int64_t>(raw ? layout.count * sizeof(float) : layout.bytes());
    };
    auto wrap = [&](long v) { return static_cast<size_t>(((v % dcs) + dcs) % dcs); };
    int64_t largest = 0;
    for (size_t c = 0; c < g; ++c)
      largest = std::max(largest, message(c));
    for (size_t q = 0; q < g; ++q) {
      int64_t sent = 0;
      for (long s = 0; s + 1 < dcs; ++s) {
        const auto lq = static_cast<long>(q);
        sent += message(wrap(lq - s)) + message(wrap(lq + 1 - s));
      }
      if (q == r) t.sent_bytes = sent;
      t.all_bytes += sent;
    }
    t.phases = 2 * (dcs - 1);
    t.critical_bytes = largest * t.phases;
    return t;
  }
  // CompressedAllreduce::traffic: rank q scatters every chunk but its own, each with the
  // scalars, then sends its reduced chunk to every peer; two phases.
  std::vector<int64_t> encoded(g);
  int64_t all = 0;
  for (size_t j = 0; j < g; ++j) {
    encoded[j] = static_cast<int64_t>(codec.encoded_bytes(chunk(j)));
    all += encoded[j];
  }
  const auto peers = static_cast<int64_t>(g - 1);
  const auto scalar_bytes = static_cast<int64_t>(k * sizeof(double));
  int64_t scatter_max = 0;
  int64_t gather_max = 0;
  for (size_t q = 0; q < g; ++q) {
    const int64_t scatter = all - encoded[q] + peers * scalar_bytes;
    const int64_t gather = peers * encoded[q];
    scatter_max = std::max(scatter_max, scatter);
    gather_max = std::max(gather_max, gather);
    t.all_bytes += scatter + gather;
    if (q == r) t.sent_bytes = scatter + gather;
  }
  t.phases = 2;
  t.critical_bytes = scatter_max + gather_max;
  return t;
}

LinkPlan plan_link(const Config& c, int world_size) {
  const auto members = static_cast<int>(c.topology.ranks_per_dc);
  if (world_size < 1 || members < 1 || world_size % members != 0) {
    throw ConfigError("the world (" + std::to_string(world_size) +
                      " ranks) must be a positive multiple of topology.ranks_per_dc (" +
                      std::to_string(members) + ")");
  }
  LinkPlan p;
  p.dcs = world_size / members;
  p.members = members;
  const bool outer = outer_method(c);
  const int64_t P = parameter_count(c.model);
  // Streaming DiLoCo's fragments: about 1/P_f of the model each, P_f syncs per interval. (The
  // fragments are whole blocks, so the real ones differ a little from an even split.)
  p.syncs = outer ? static_cast<int>(c.outer.fragments) : 1;
  const int64_t values = ceil_div(P, p.syncs);
  p.shard_values = ceil_div(values, members);
  const WireCodec codec = wire_codec(c.outer);
  const size_t k = outer ? OuterSync::message_scalars(p.dcs) : 0;
  WanModel wan;
  wan.bandwidth_gbps = c.wan.bandwidth_gbps;
  wan.latency_ms = c.wan.latency_ms;
  wan.dcs = p.dcs;
  wan.members = members;
  // HierarchicalAllreduce::reduce_shard: the shard in pieces, the scalars with the first.
  LinkTraffic traffic;
  int64_t message = 0;
  const auto shard = static_cast<size_t>(p.shard_values);
  size_t done = 0;
  do {
    const size_t n = std::min(kPieceValues, shard - done);
    const size_t scalars = done == 0 ? k : 0;
    traffic += planned_traffic(n, codec, scalars, p.dcs);
    message += static_cast<int64_t>(WanLink::message_bytes(n, codec, scalars));
    ++p.pieces;
    done += n;
  } while (done < shard);
  if (p.dcs > 1) {
    p.message_bytes = message * members;
    p.sent_bytes = traffic.sent_bytes * members;
  }
  p.seconds = wan.seconds(traffic);
  return p;
}

double planned_utilisation(int64_t H, double step_s, int syncs, double sync_s,
                           int64_t overlap_steps) {
  const double compute = static_cast<double>(H) * step_s;
  const double exposed =
      syncs * std::max(0.0, sync_s - static_cast<double>(overlap_steps) * step_s);
  return compute + exposed > 0 ? compute / (compute + exposed) : 1.0;
}

}  // namespace autoloco
