// LibTorch 2.x's custom autograd functions inline IValue and compiled-autograd code in which
// GCC 12's -Wnull-dereference sees paths it cannot rule out (in LibTorch's headers, not here).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wnull-dereference"
#endif
#include "autoloco/train/gathered_units.hpp"

#include <c10/core/Event.h>
#include <c10/core/StorageImpl.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <fmt/format.h>

#include <algorithm>
#include <exception>
#include <string>

#include "autoloco/train/precision.hpp"
#include "autoloco/util/error.hpp"
#include "autoloco/util/watchdog.hpp"

namespace autoloco {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

constexpr int64_t kFloat = 4;

// The unit's function: gathered parameters around its forward and its backward (header).
struct UnitFunction : public torch::autograd::Function<UnitFunction> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& /*gate*/, GatheredUnits* self, int64_t unit) {
    self->acquire(unit);
    if (unit + 1 < self->model().units()) self->prefetch(unit + 1);
    ctx->saved_data["self"] = reinterpret_cast<int64_t>(self);
    ctx->saved_data["unit"] = unit;
    torch::Tensor y;
    if (self->recomputes(unit)) {
      ctx->save_for_backward({x});
      y = self->model().run_unit(unit, x);
    } else {
      // The unit's own graph, kept until backward: its leaves are the input and the parameters.
      const torch::AutoGradMode grad(true);
      const torch::Tensor input =
          x.is_floating_point() ? x.detach().requires_grad_(x.requires_grad()) : x;
      const torch::Tensor output = self->model().run_unit(unit, input);
      ctx->saved_data["input"] = input;
      ctx->saved_data["output"] = output;
      y = output.detach();
    }
    self->count_forward();
    self->release(unit);
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto* self = reinterpret_cast<GatheredUnits*>(ctx->saved_data["self"].toInt());
    const int64_t unit = ctx->saved_data["unit"].toInt();
    self->acquire(unit);
    if (unit > 0) self->prefetch(unit - 1);
    torch::Tensor input;
    torch::Tensor output;
    if (self->recomputes(unit)) {
      input = ctx->get_saved_variables()[0].detach().requires_grad_(true);
      const torch::AutoGradMode grad(true);
      const AutocastScope autocast(self->device(), self->bf16());
      output = self->model().run_unit(unit, input);
    } else {
      input = ctx->saved_data["input"].toTensor();
      output = ctx->saved_data["output"].toTensor();
    }
    std::vector<torch::Tensor> wrt = self->parameters(unit);
    const bool wants_input = input.requires_grad();
    if (wants_input) wrt.push_back(input);
    std::vector<torch::Tensor> g =
        torch::autograd::grad({output}, wrt, {grads[0]}, /*retain_graph=*/false,
                              /*create_graph=*/false, /*allow_unused=*/true);
    torch::Tensor grad_input;
    if (wants_input) {
      grad_input = g.back();
      g.pop_back();
    }
    ctx->saved_data.clear();  // the unit's graph, before its parameters go
    self->reduce(unit, g);
    self->release(unit);
    return {grad_input, torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

c10::impl::DeviceGuardImplInterface const* guard_impl(torch::Device device) {
  return c10::impl::getDeviceGuardImpl(device.type());
}

}  // namespace

GatheredUnits::GatheredUnits(DecoderImpl& model, FlatParams& params, Communicator& intra,
                             ShardSpan span, torch::Tensor shard_grads, Recompute recompute,
                             bool bf16, torch::Tensor pieces)
    : model_(model),
      params_(params),
      intra_(intra),
      span_(span),
      shard_grads_(std::move(shard_grads)),
      pieces_(std::move(pieces)),
      recompute_(recompute),
      bf16_(bf16),
      device_(params.values().device()) {
  if (params.origin() != span.begin() || params.values().numel() != span.count()) {
    throw Error("topology.shard full: the parameters do not keep this member's shard");
  }
  build_units(params.slices());
  gate_ = torch::zeros({}, params.values().options()).requires_grad_(true);
  if (device_.is_cuda()) side_ = guard_impl(device_)->getStreamFromGlobalPool(device_);
}

GatheredUnits::~GatheredUnits() {
  // A gather in flight writes into the storage: it lands before the storage goes. While an
  // error unwinds the peers may never join it; the job is ending (main's MPI_Abort), so no wait.
  if (std::uncaught_exceptions() > 0) return;
  for (Unit& u : units_) {
    for (auto& p : u.pending)
      p->wait();
  }
}

void GatheredUnits::build_units(const std::vector<ParamSlice>& slices) {
  units_.resize(static_cast<size_t>(model_.units()));
  for (size_t i = 0; i < slices.size(); ++i) {
    const ParamSlice& s = slices[i];
    Unit& u = units_.at(static_cast<size_t>(model_.unit_of(s.name)));
    // Slices come in layout order: a parameter adjacent to the unit's last run extends it.
    if (!u.ranges.empty() && u.ranges.back().end() == s.offset) {
      u.ranges.back().numel += s.numel;
    } else {
      u.ranges.push_back({s.offset, s.numel});
      u.at.push_back(u.numel);
    }
    u.numel += s.numel;
    u.params.push_back(i);
  }
  torch::NoGradGuard no_grad;
  const auto& parameters = params_.parameters();
  for (size_t k = 0; k < units_.size(); ++k) {
    Unit& u = units_[k];
    if (u.numel == 0) throw Error(fmt::format("topology.shard full: unit {} has no parameters", k));
    u.storage = torch::empty({u.numel}, params_.values().options());
    for (const size_t i : u.params) {
      const ParamSlice& s = slices[i];
      int64_t at = -1;
      for (size_t r = 0; r < u.ranges.size(); ++r) {
        if (s.offset >= u.ranges[r].offset && s.offset < u.ranges[r].end())
          at = u.at[r] + s.offset - u.ranges[r].offset;
      }
      u.param_at.push_back(at);
      torch::Tensor p = parameters[i];
      p.set_data(u.storage.narrow(0, at, s.numel).view(s.shape));
    }
    staging_bytes_ += kFloat * u.numel;  // free() counts it off
    free(u);
  }
  allocate_reduction_buffers();
}

void GatheredUnits::allocate_reduction_buffers() {
  // Sized once for the largest unit: a buffer replaced while a side stream's reduction still
  // read it could go to the compute stream's next allocation.
  int64_t unit = 0;
  int64_t part = 0;
  for (const Unit& u : units_) {
    unit = std::max(unit, u.numel);
    for (const FlatRange& run : u.ranges) {
      const std::vector<size_t> counts = span_.split(run.offset, run.numel);
      const auto most = static_cast<int64_t>(*std::max_element(counts.begin(), counts.end()));
      const auto mine = static_cast<int64_t>(counts[static_cast<size_t>(span_.member)]);
      // A reduce-scatter lands this member's part; an all-to-all every member's part of it.
      part = std::max(part, pieces_.defined() ? span_.members * mine : most);
    }
  }
  grad_ = torch::empty({unit}, shard_grads_.options());
  scratch_ = torch::empty({std::max<int64_t>(part, 1)}, shard_grads_.options());
}

std::vector<int64_t> GatheredUnits::storages_of(int64_t unit) const {
  if (unit == model_.head_unit() && model_.head_reads_embedding()) return {unit, 0};
  return {unit};
}

bool GatheredUnits::recomputes(int64_t unit) const {
  return recompute_ == Recompute::blocks && model_.is_block(unit);
}

std::vector<torch::Tensor> GatheredUnits::parameters(int64_t unit) const {
  std::vector<torch::Tensor> out;
  for (const int64_t k : storages_of(unit)) {
    for (const size_t i : units_[static_cast<size_t>(k)].params)
      out.push_back(params_.parameters()[i]);
  }
  return out;
}

void GatheredUnits::allocate(Unit& u) {
  c10::StorageImpl* impl = u.storage.storage().unsafeGetStorageImpl();
  const auto bytes = static_cast<size_t>(kFloat * u.numel);
  impl->set_data_ptr_noswap(impl->allocator()->allocate(bytes));
  impl->set_nbytes(bytes);
  staging_bytes_ += kFloat * u.numel;
  peak_staging_bytes_ = std::max(peak_staging_bytes_, staging_bytes_);
}

void GatheredUnits::free(Unit& u) {
  // The storage object stays (the parameters and any saved graph view it); its memory goes.
  u.storage.storage().unsafeGetStorageImpl()->reset();
  staging_bytes_ -= kFloat * u.numel;
}

void GatheredUnits::start_gather(Unit& u) {
  allocate(u);
  std::optional<c10::StreamGuard> on_side;
  if (side_) {
    // The side stream may write the new memory once the compute stream is done with what it
    // held before.
    const c10::Stream compute = guard_impl(device_)->getStream(device_);
    c10::Event ready(device_.type());
    ready.record(compute);
    ready.block(*side_);
    on_side.emplace(*side_);
  }
  auto* data = u.storage.data_ptr<float>();
  const int64_t mine_begin = span_.begin();
  const int64_t mine_end = span_.begin() + span_.count();
  for (size_t r = 0; r < u.ranges.size(); ++r) {
    const FlatRange& run = u.ranges[r];
    // This member's part, copied into place through a tensor of its own: a saved graph's views
    // of the storage must not see their version change.
    const int64_t lo = std::max(run.offset, mine_begin);
    const int64_t hi = std::min(run.end(), mine_end);
    if (lo < hi) {
      torch::from_blob(data + u.at[r] + lo - run.offset, {hi - lo}, u.storage.options())
          .copy_(params_.values().narrow(0, lo - mine_begin, hi - lo));
    }
    std::vector<size_t> counts = span_.split(run.offset, run.numel);
    std::vector<size_t> offsets;
    for (int m = 0; m < span_.members; ++m) {
      const int64_t from = std::clamp(span_.begin_of(m), run.offset, run.end());
      offsets.push_back(static_cast<size_t>(u.at[r] + from - run.offset));
    }
    u.pending.push_back(intra_.start_allgather_in_place(data, counts, offsets, DType::f32));
  }
  if (side_) {
    u.gathered.emplace(device_.type());
    u.gathered->record(*side_);
  }
}

void GatheredUnits::finish_gather(Unit& u) {
  for (auto& p : u.pending)
    p->wait();
  u.pending.clear();
  if (u.gathered) {
    u.gathered->block(guard_impl(device_)->getStream(device_));
    u.gathered.reset();
  }
}

void GatheredUnits::acquire(int64_t unit) {
  for (const int64_t k : storages_of(unit)) {
    Unit& u = units_[static_cast<size_t>(k)];
    const bool present = u.storage.storage().unsafeGetStorageImpl()->nbytes() > 0;
    if (!present) start_gather(u);
    finish_gather(u);
    ++u.users;
  }
}

void GatheredUnits::release(int64_t unit) {
  for (const int64_t k : storages_of(unit)) {
    Unit& u = units_[static_cast<size_t>(k)];
    if (--u.users == 0) free(u);
  }
}

void GatheredUnits::prefetch(int64_t unit) {
  for (const int64_t k : storages_of(unit)) {
    Unit& u = units_[static_cast<size_t>(k)];
    if (u.storage.storage().unsafeGetStorageImpl()->nbytes() == 0) start_gather(u);
  }
}

torch::Tensor GatheredUnits::run(DecoderImpl& model, int64_t unit, const torch::Tensor& x) {
  if (!torch::GradMode::is_enabled()) {
    acquire(unit);
    if (unit + 1 < model.units()) prefetch(unit + 1);
    torch::Tensor y = model.run_unit(unit, x);
    release(unit);
    return y;
  }
  return UnitFunction::apply(x, gate_, this, unit);
}

void GatheredUnits::begin_step() {
  forwards_ = 0;
  for (Unit& u : units_)
    u.reduced = 0;
}

void GatheredUnits::check_reduced() const {
  // Each forward of an execution unit is one reduction of each of its storages.
  const int64_t per_unit = forwards_ / static_cast<int64_t>(units_.size());
  for (size_t k = 0; k < units_.size(); ++k) {
    const bool tied_embedding = k == 0 && model_.head_reads_embedding();
    const int64_t expected = per_unit * (tied_embedding ? 2 : 1);
    if (units_[k].reduced != expected) {
      throw Error(fmt::format(
          "topology.shard full: unit {} had its gradient reduced {} times in this step, not {}: "
          "every forward of the model must be followed by its backward",
          k, units_[k].reduced, expected));
    }
  }
}

void GatheredUnits::reduce(int64_t unit, const std::vector<torch::Tensor>& grads) {
  torch::NoGradGuard no_grad;
  size_t next = 0;
  for (const int64_t k : storages_of(unit)) {
    Unit& u = units_[static_cast<size_t>(k)];
    // The previous unit's reduction reads grad_ on the side stream until it is done.
    await_reductions();
    torch::Tensor buffer = grad_.narrow(0, 0, u.numel);
    const auto& slices = params_.slices();
    for (size_t j = 0; j < u.params.size(); ++j) {
      const torch::Tensor& g = grads.at(next++);
      torch::Tensor slot = buffer.narrow(0, u.param_at[j], slices[u.params[j]].numel);
      if (g.defined()) {
        slot.copy_(g.reshape({-1}));
      } else {
        slot.zero_();  // a parameter this execution does not read (a tied head's positions)
      }
    }
    reduce_unit(u, buffer);
  }
}

void GatheredUnits::await_reductions() {
  if (reduced_) reduced_->block(guard_impl(device_)->getStream(device_));
}

void GatheredUnits::reduce_unit(Unit& u, const torch::Tensor& grad) {
  std::optional<c10::StreamGuard> on_side;
  if (side_) {
    // On the side stream once the compute stream has written `grad`: the compute stream goes on
    // with the next unit's backward while the reduction runs.
    c10::Event filled(device_.type());
    filled.record(guard_impl(device_)->getStream(device_));
    filled.block(*side_);
    on_side.emplace(*side_);
  }
  const Watch watch(pieces_.defined()
                        ? "the intra-dc gradient all-to-all of a unit (topology.shard full, adloco)"
                        : "the intra-dc gradient reduce-scatter of a unit (topology.shard full)");
  for (size_t r = 0; r < u.ranges.size(); ++r) {
    const FlatRange& run = u.ranges[r];
    if (pieces_.defined()) {
      exchange_run(run, grad.data_ptr<float>() + u.at[r]);
      continue;
    }
    const std::vector<size_t> counts = span_.split(run.offset, run.numel);
    const auto mine = static_cast<int64_t>(counts[static_cast<size_t>(span_.member)]);
    intra_.reduce_scatter_sum(grad.data_ptr<float>() + u.at[r], scratch_.data_ptr<float>(), counts,
                              DType::f32);
    if (mine > 0) {
      const int64_t at = std::max(run.offset, span_.begin()) - span_.begin();
      shard_grads_.narrow(0, at, mine).add_(scratch_.narrow(0, 0, mine));
    }
  }
  ++u.reduced;
  if (side_) {
    reduced_.emplace(device_.type());
    reduced_->record(*side_);
  }
}

void GatheredUnits::exchange_run(const FlatRange& run, const float* grad) {
  // The reduce-scatter's bytes, each member's part kept apart: member m's row of this member's
  // pieces is m's own gradient, which the batch tests compare with the mean.
  const std::vector<size_t> counts = span_.split(run.offset, run.numel);
  const size_t mine = counts[static_cast<size_t>(span_.member)];
  const std::vector<size_t> from(static_cast<size_t>(span_.members), mine);
  const auto members = static_cast<int64_t>(span_.members);
  const auto n = static_cast<int64_t>(mine);
  intra_.alltoallv(grad, counts, scratch_.data_ptr<float>(), from, DType::f32);
  if (n == 0) return;
  const int64_t at = std::max(run.offset, span_.begin()) - span_.begin();
  pieces_.narrow(1, at, n).add_(scratch_.narrow(0, 0, members * n).view({members, n}));
}

int64_t GatheredUnits::largest_unit_bytes() const {
  int64_t most = 0;
  for (const Unit& u : units_)
    most = std::max(most, u.numel);
  return kFloat * most;
}

int64_t GatheredUnits::scratch_bytes() const {
  const int64_t g = grad_.defined() ? grad_.numel() : 0;
  const int64_t s = scratch_.defined() ? scratch_.numel() : 0;
  return kFloat * (g + s);
}

}  // namespace autoloco
