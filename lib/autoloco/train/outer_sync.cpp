#include "autoloco/train/outer_sync.hpp"

#include <c10/core/Event.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <optional>
#include <thread>
#include <vector>

#include "autoloco/train/inner_shard.hpp"
#include "autoloco/util/error.hpp"
#include "autoloco/util/fault_injection.hpp"
#include "autoloco/util/log.hpp"
#include "autoloco/util/watchdog.hpp"

namespace autoloco {
namespace {

// The scalars that ride in the round's inter-dc message, summed over dcs: Σ w_i, Σ loss_i,
// Σ w_i ‖Δ_i‖², Σ ‖Δ_i‖, Σ tokens_i, Σ S_i, Σ seconds_i, Σ w_i² ‖Δ_i‖². The two weighted sums
// give the round's agreement under token weights (RoundStats::agreement).
enum Scalar {
  kWeight,
  kLoss,
  kDeltaSq,
  kDeltaNorm,
  kTokens,
  kLrSum,
  kSeconds,
  kDeltaSqWeightSq,
  kNumScalars
};
static_assert(kNumScalars == OuterSync::kRoundScalars);
static_assert(kDeltaSqWeightSq == OuterSync::kLegacyRoundScalars, "appended after the legacy ones");

}  // namespace

// The GPU half of a sync: an asynchronous stage's snapshot on the compute stream (so the replica
// may train on), its copy to the host on a side stream, and the event that says it landed. The
// snapshot is one persistent buffer of the fragment's size (buffer_bytes() counts it), which
// also holds Δ on the way to the host and the averaged Δ̄ (and the anchor, to mix it into the
// replica) on the way back from it: no round allocates a full-size device tensor.
struct OuterSync::DeviceStaging {
  std::optional<c10::Stream> side;
  std::optional<c10::Event> copied;
  torch::Tensor snapshot;
  bool negate_on_host = false;  // the snapshot is the replica: Δ = anchor − it on the host

  // The snapshot, created on `device` at the first use.
  torch::Tensor& buffer(torch::Device device, int64_t numel) {
    if (!snapshot.defined()) {
      snapshot = torch::empty({numel}, torch::TensorOptions().dtype(torch::kFloat).device(device));
    }
    return snapshot;
  }
};

torch::Device outer_state_device(const std::string& state_device, torch::Device device,
                                 int64_t parameters) {
  if (state_device == "device") return device;
  if (state_device == "auto" && parameters <= kAutoDeviceParameters) return device;
  return torch::kCPU;
}

WireCodec wire_codec(const OuterConfig& outer) {
  WireCodec c;
  c.format = parse_wire_format(outer.wire_dtype);
  c.block = static_cast<size_t>(outer.wire_block);
  c.stochastic = outer.wire_rounding == "stochastic";
  c.topk = outer.wire_topk;
  c.topk_chunk = static_cast<size_t>(outer.wire_topk_chunk);
  return c;
}

namespace {

// After each member wrote its shard of fragment p into `values`: every member's shards land on
// every member.
void allgather_fragment(torch::Tensor& values, const FragmentPlan& plan, size_t p,
                        const ShardSpan& span, Communicator& members) {
  std::vector<std::vector<FlatRange>> ranges;
  for (int m = 0; m < span.members; ++m)
    ranges.push_back(plan.ranges(p, span.begin_of(m), span.count_of(m)));
  allgather_ranges(values, ranges, members);
}

}  // namespace

OuterSync::OuterSync(const OuterConfig& outer, int64_t H0, FlatParams& params,
                     const FragmentPlan& plan, size_t fragment, HierarchicalAllreduce& reducer,
                     WanLink& link, torch::Device state_device, uint64_t rounding_seed,
                     OuterSharding sharding)
    : codec_(wire_codec(outer)),
      feedback_beta_(outer.error_feedback_beta),
      rounding_seed_(rounding_seed),
      plan_(plan),
      fragment_(fragment),
      optimizer_(make_outer_optimizer(outer, H0)),
      reducer_(reducer),
      link_(link),
      device_staging_(std::make_unique<DeviceStaging>()),
      sharding_(sharding),
      span_(plan[fragment].numel, sharding.sharded ? reducer.members() : 1,
            sharding.sharded ? reducer.member() : 0) {
  torch::NoGradGuard no_grad;
  if (sharding_.full) {
    const ShardSpan kept(params.numel(), span_.members, span_.member);
    if (params.origin() != kept.begin() || params.values().numel() != kept.count()) {
      throw Error("topology.shard full: the replica does not keep this member's shard");
    }
    exchange_ = std::make_unique<ReplicaExchange>(plan, fragment, span_, kept);
  }
  const bool gpu = params.values().is_cuda();
  anchor_ = replica_part(params).detach().to(state_device, torch::kFloat, false, /*copy=*/true);
  // Host buffers that meet a GPU are pinned: the DMA engine then copies them directly, at full
  // link speed, instead of through the driver's pageable bounce buffer.
  if (gpu && !anchor_.is_cuda()) anchor_ = anchor_.pin_memory();
  // Sharded, the message is the member's padded shard; its padding stays zero.
  staging_ = torch::zeros({sharding_.sharded ? span_.size() : anchor_.numel()},
                          torch::TensorOptions().dtype(torch::kFloat).pinned_memory(gpu));
  if (outer.error_feedback) {
    residual_ = torch::zeros({static_cast<int64_t>(HierarchicalAllreduce::shard_size(
                                 static_cast<size_t>(span_.numel), reducer_.members()))},
                             torch::kFloat);
  }
}

OuterSync::~OuterSync() = default;

int64_t OuterSync::buffer_bytes() const {
  const int64_t snapshot = anchor_.is_cuda() || staging_.is_pinned() ? staging_.numel() : 0;
  const int64_t residual = residual_.defined() ? residual_.numel() : 0;
  return 4 * (staging_.numel() + snapshot + residual);
}

torch::Tensor OuterSync::replica_part(FlatParams& params) const {
  if (exchange_) return exchange_->fetch(params.values(), *sharding_.replica);
  return plan_.gather(params.values(), fragment_, span_.begin(), span_.count());
}

double OuterSync::whole_norm_sq(const torch::Tensor& x, Communicator* members) const {
  const double norm = x.norm().item<double>();
  double sq = norm * norm;
  if (sharding_.sharded && members != nullptr) members->allreduce_sum(&sq, 1);
  return sq;
}

void OuterSync::stage_delta(FlatParams& params) {
  const torch::Tensor replica = replica_part(params);
  torch::Tensor staged = message();
  if (replica.is_cuda() && !anchor_.is_cuda()) {
    // The replica comes to the host anchor: Δ_i = anchor − replica as anchor + (−replica),
    // which rounds exactly like the subtraction.
    staged.copy_(replica);
    staged.neg_().add_(anchor_);
    return;
  }
  if (!anchor_.is_cuda()) {
    torch::sub_out(staged, anchor_, replica);
    return;
  }
  // On the GPU next to the replica, then to the host.
  torch::Tensor& delta = device_staging_->buffer(anchor_.device(), anchor_.numel());
  torch::sub_out(delta, anchor_, replica);
  staged.copy_(delta);
}

void OuterSync::stage_delta_async(FlatParams& params) {
  const torch::Tensor replica = replica_part(params);
  DeviceStaging& d = *device_staging_;
  d.negate_on_host = !anchor_.is_cuda();
  torch::Tensor& snapshot = d.buffer(replica.device(), anchor_.numel());
  if (d.negate_on_host) {
    snapshot.copy_(replica);
  } else {
    torch::sub_out(snapshot, anchor_, replica);
  }
  const auto* impl = c10::impl::getDeviceGuardImpl(replica.device().type());
  const c10::Stream home = impl->getStream(replica.device());
  if (!d.side) d.side = impl->getStreamFromGlobalPool(replica.device());
  c10::Event ready(home.device_type());
  ready.record(home);
  ready.block(*d.side);
  {
    c10::StreamGuard on_side(*d.side);
    message().copy_(d.snapshot, /*non_blocking=*/true);
  }
  d.copied.emplace(home.device_type());
  d.copied->record(*d.side);
}

void OuterSync::await_staging() {
  DeviceStaging& d = *device_staging_;
  if (!d.copied) return;
  // Polled with a short sleep, not spun on: this runs on the communication thread.
  while (!d.copied->query())
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  d.copied.reset();
  if (d.negate_on_host) message().neg_().add_(anchor_);
}

StagedRound OuterSync::stage(FlatParams& params, const RoundInput& in, bool asynchronous) {
  torch::NoGradGuard no_grad;
  if (asynchronous && params.values().is_cuda()) {
    stage_delta_async(params);
  } else {
    stage_delta(params);
  }
  StagedRound r;
  r.in = in;
  return r;
}

std::vector<double> OuterSync::remap_scalars(const std::vector<double>& stored,
                                             const TopologyChange& change) {
  std::vector<double> scalars = stored;
  if (scalars.size() == legacy_message_scalars(change.from_dcs)) {
    scalars.insert(scalars.begin() + kDeltaSqWeightSq, scalars[kDeltaSq]);
  }
  if (!change.changed() || scalars.size() != message_scalars(change.from_dcs)) return scalars;
  std::vector<double> out(scalars.begin(), scalars.begin() + kNumScalars);
  for (int block = 0; block < 2; ++block) {
    const size_t first = kNumScalars + static_cast<size_t>(block * change.from_dcs);
    for (int d = 0; d < change.to_dcs; ++d)
      out.push_back(scalars[first + static_cast<size_t>(change.source_dc(d))]);
  }
  return out;
}

void OuterSync::reduce(StagedRound& r) {
  torch::NoGradGuard no_grad;
  const RoundInput& in = r.in;
  set_watch_position(in.round, in.step);
  // A test's late dc (fault_injection.hpp): its peers wait, watched, while it sleeps unwatched.
  if (const double late = FaultPlan::from_env().late_seconds(in.dc, in.round); late > 0) {
    log::warn("AUTOLOCO_FAULT: starting the inter-dc all-reduce of round {} {:g} s late", in.round,
              late);
    std::this_thread::sleep_for(std::chrono::duration<double>(late));
  }
  FaultPlan::from_env().at_sync(in.dc, in.round);
  const Watch watch("the inter-dc all-reduce");
  await_staging();
  // Sharded, the members' parts of ‖Δ_i‖² are summed over the reducer's own communicator (this
  // may be the communication thread).
  const double delta_norm =
      sharding_.sharded ? std::sqrt(reducer_.sum_over_members(whole_norm_sq(message(), nullptr)))
                        : staging_.norm().item<double>();
  if (!std::isfinite(delta_norm)) {
    throw TrainingError(fmt::format(
        "the pseudo-gradient of dc {} in round {}{} is not finite (NaN or infinity): the "
        "replica diverged in its inner steps; resume from an earlier checkpoint with a lower "
        "inner.lr or a tighter inner.grad_clip",
        in.dc, in.round, plan_.whole() ? "" : fmt::format(" (fragment {})", fragment_)));
  }
  const double weight = in.tokens / in.nominal_tokens;
  if (weight != 1.0) staging_.mul_(weight);

  const int slots = dc_slots_ > 0 ? dc_slots_ : link_.dcs();
  std::vector<double>& scalars = r.scalars;
  scalars.assign(message_scalars(slots), 0.0);
  double* next_batch = scalars.data() + kNumScalars;
  double* demand = next_batch + slots;
  next_batch[in.dc] = in.next_batch;
  // NaN would poison the sum: a dc without an answer sends −1.
  demand[in.dc] = std::isnan(in.demand) ? -1.0 : in.demand;
  scalars[kWeight] = weight;
  scalars[kLoss] = in.loss;
  // Weighted in the message, so that the statistics weigh each dc as the average does; with
  // weight 1 the products are exact and the sums those of equal weights, bit for bit.
  const double delta_sq = delta_norm * delta_norm;
  scalars[kDeltaSq] = weight * delta_sq;
  scalars[kDeltaSqWeightSq] = weight * (weight * delta_sq);
  scalars[kDeltaNorm] = delta_norm;
  scalars[kTokens] = in.tokens;
  scalars[kLrSum] = in.lr_sum;
  scalars[kSeconds] = in.seconds;
  const double link_before = link_.link_seconds();
  const double wall_before = link_.wall_seconds();
  const int64_t bytes_before = link_.dc_bytes();
  const int64_t sent_before = link_.sent_bytes();
  const uint64_t stream =
      rounding_stream(rounding_seed_, static_cast<uint64_t>(in.round) * 0x10000ULL + fragment_);
  float* residual = residual_.defined() ? residual_.data_ptr<float>() : nullptr;
  // SparseLoCo's accumulator, e <- beta e + Delta: the all-reduce adds the decayed residual to
  // this round's message.
  if (residual != nullptr && feedback_beta_ != 1.0) residual_.mul_(feedback_beta_);
  if (sharding_.sharded) {
    reducer_.allreduce_shard_sum(staging_.data_ptr<float>(), static_cast<size_t>(staging_.numel()),
                                 scalars.data(), scalars.size(), codec_, stream, residual);
  } else {
    reducer_.allreduce_sum(staging_.data_ptr<float>(), static_cast<size_t>(staging_.numel()),
                           scalars.data(), scalars.size(), codec_, stream, residual);
  }
  r.link_s = link_.link_seconds() - link_before;
  r.wall_s = link_.wall_seconds() - wall_before;
  r.dc_bytes = link_.dc_bytes() - bytes_before;
  r.sent_bytes = link_.sent_bytes() - sent_before;
}

RoundStats OuterSync::finish(const StagedRound& r) {
  torch::NoGradGuard no_grad;
  const std::vector<double>& scalars = r.scalars;
  const int g = link_.dcs();
  // Token-weighted mean: Σ w_i Δ_i / Σ w_i, a plain division by G when batches are equal.
  staging_.div_(scalars[kWeight]);

  RoundStats s;
  s.round = r.in.round;
  s.fragment = r.in.fragment;
  s.step = r.in.step;
  s.H = r.in.H;
  s.dcs = g;
  s.loss = scalars[kLoss] / g;
  s.lr_sum = scalars[kLrSum] / g;
  s.tokens = scalars[kTokens];
  s.set_delta_sums(scalars[kWeight], scalars[kDeltaSq], scalars[kDeltaSqWeightSq]);
  s.mean_delta_norm = scalars[kDeltaNorm] / g;
  s.round_s = scalars[kSeconds] / g;
  s.avg_delta_sq = whole_norm_sq(message(), sharding_.host);
  s.rho = RoundStats::agreement(g, s.effective_dcs, s.mean_delta_sq, s.avg_delta_sq);
  const int slots = dc_slots_ > 0 ? dc_slots_ : g;
  const double* next_batch = scalars.data() + kNumScalars;
  const double* demand = next_batch + slots;
  s.next_batch.assign(next_batch, next_batch + slots);
  for (int d = 0; d < slots; ++d)
    s.demand.push_back(demand[d] < 0.0 ? std::nan("") : demand[d]);
  s.link_s = r.link_s;
  if (link_.model().measured) s.measured_link_s = r.wall_s;
  s.dc_bytes = r.dc_bytes;
  s.sent_bytes = r.sent_bytes;

  // The step works in Δ̄'s storage (OuterOptimizer::step): the staging buffer, or its copy in
  // the device buffer next to a device anchor. Either is rewritten before it is read again.
  torch::Tensor mean_delta =
      anchor_.is_cuda() ? device_staging_->buffer(anchor_.device(), anchor_.numel()) : message();
  if (anchor_.is_cuda()) mean_delta.copy_(message());
  optimizer_->step(anchor_, mean_delta, s);
  return s;
}

void OuterSync::merge(FlatParams& params, double alpha) {
  torch::NoGradGuard no_grad;
  torch::Tensor& replica = params.values();
  const int64_t begin = span_.begin();
  if (exchange_) {
    // Every member's new anchor goes to the members that keep its elements: nothing to gather.
    torch::Tensor near = anchor_;
    if (replica.device() != anchor_.device()) {
      near = device_staging_->buffer(replica.device(), anchor_.numel());
      near.copy_(anchor_);
    }
    exchange_->store(near, alpha, replica, *sharding_.replica);
    return;
  }
  if (alpha == 0.0) {
    plan_.scatter(anchor_, fragment_, begin, replica);  // copy_ crosses devices itself
  } else if (replica.device() == anchor_.device()) {
    plan_.mix(anchor_, fragment_, begin, alpha, replica);
  } else {
    torch::Tensor& near = device_staging_->buffer(replica.device(), anchor_.numel());
    near.copy_(anchor_);
    plan_.mix(near, fragment_, begin, alpha, replica);
  }
  // Every member mixed its shard of the fragment (the members' replicas are equal): theirs
  // complete it.
  if (sharding_.sharded) allgather_fragment(replica, plan_, fragment_, span_, *sharding_.replica);
}

RoundStats OuterSync::sync(FlatParams& params, const RoundInput& in) {
  StagedRound r = stage(params, in);
  reduce(r);
  const RoundStats s = finish(r);
  merge(params, 0.0);
  return s;
}

}  // namespace autoloco
