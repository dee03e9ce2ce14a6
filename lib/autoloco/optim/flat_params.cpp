// Builds the flat value/grad buffers and re-points the module's parameters at them.
#include "autoloco/optim/flat_params.hpp"

#include <algorithm>
#include <unordered_set>
#include <utility>

#include "autoloco/util/error.hpp"

namespace autoloco {
namespace {

struct Named {
  std::string name;
  torch::Tensor param;
  bool decayed;
};

// named_parameters() in LibTorch does not dedup tensors registered under two names; we do.
std::vector<Named> collect(torch::nn::Module& module, const DecayRule& decayed) {
  std::vector<Named> decay;
  std::vector<Named> no_decay;
  std::unordered_set<const void*> seen;
  for (const auto& item : module.named_parameters(/*recurse=*/true)) {
    const auto& p = item.value();
    if (!p.requires_grad() || !seen.insert(p.unsafeGetTensorImpl()).second) continue;
    const bool d = decayed(item.key(), p);
    (d ? decay : no_decay).push_back({item.key(), p, d});
  }
  for (auto& n : no_decay)
    decay.push_back(std::move(n));
  return decay;
}

void check_uniform(const std::vector<Named>& params) {
  if (params.empty()) throw Error("FlatParams: the module has no trainable parameters");
  const auto& first = params.front().param;
  for (const auto& n : params) {
    if (n.param.scalar_type() != first.scalar_type() || n.param.device() != first.device()) {
      throw Error("FlatParams: parameter " + n.name +
                  " differs in dtype or device from the others; move/cast the module first");
    }
  }
}

// Each parameter's slice, in the order collect() gives; returns the layout's length.
int64_t lay_out(const std::vector<Named>& named, std::vector<ParamSlice>& slices,
                int64_t& decay_numel) {
  int64_t total = 0;
  for (const auto& n : named) {
    slices.push_back({n.name, total, n.param.numel(), n.param.sizes().vec(), n.decayed});
    if (n.decayed) decay_numel = total + n.param.numel();
    total += n.param.numel();
  }
  return total;
}

}  // namespace

bool is_decayed(const std::string& /*name*/, const torch::Tensor& param) {
  return param.dim() >= 2;
}

DecayRule FlatParams::default_decay_rule() {
  return &is_decayed;
}

FlatParams::FlatParams(torch::nn::Module& module, const DecayRule& decayed, bool flat_grads) {
  const auto named = collect(module, decayed);
  check_uniform(named);
  numel_ = lay_out(named, slices_, decay_numel_);
  const auto options = named.front().param.options().requires_grad(false);
  values_ = torch::empty({numel_}, options);
  if (flat_grads) grads_ = torch::zeros({numel_}, options);

  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < named.size(); ++i) {
    const auto& s = slices_[i];
    auto param = named[i].param;
    auto value = values_.narrow(0, s.offset, s.numel).view(s.shape);
    value.copy_(param);
    param.set_data(value);
    // A defined grad makes AccumulateGrad add into it in place rather than install a new tensor.
    if (flat_grads) {
      param.mutable_grad() = grads_.narrow(0, s.offset, s.numel).view(s.shape);
    } else {
      param.mutable_grad().reset();
    }
    params_.push_back(param);
  }
}

FlatParams::FlatParams(torch::nn::Module& module, int64_t keep_begin, int64_t keep_count,
                       const DecayRule& decayed) {
  const auto named = collect(module, decayed);
  check_uniform(named);
  numel_ = lay_out(named, slices_, decay_numel_);
  if (keep_begin < 0 || keep_count < 0 || keep_begin + keep_count > numel_) {
    throw Error("FlatParams: the kept elements lie outside the layout");
  }
  origin_ = keep_begin;
  values_ = torch::empty({keep_count}, named.front().param.options().requires_grad(false));
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < named.size(); ++i) {
    const auto& s = slices_[i];
    const int64_t lo = std::max(s.offset, keep_begin);
    const int64_t hi = std::min(s.offset + s.numel, keep_begin + keep_count);
    if (lo < hi) {
      values_.narrow(0, lo - keep_begin, hi - lo)
          .copy_(named[i].param.detach().reshape({-1}).narrow(0, lo - s.offset, hi - lo));
    }
    named[i].param.mutable_grad().reset();
    params_.push_back(named[i].param);
  }
}

void FlatParams::move_values(torch::Device device) {
  if (values_.device() == device) return;
  if (keeps_all()) throw Error("FlatParams::move_values: move the module before building it");
  values_ = values_.to(device);
}

void FlatParams::zero_grad() {
  if (grads_.defined()) {
    grads_.zero_();
    return;
  }
  for (auto& p : params_)
    p.mutable_grad().reset();
}

FlatView FlatParams::shard_view(int64_t begin, int64_t count, const torch::Tensor& grads) {
  const int64_t decayed = std::clamp<int64_t>(decay_numel_ - begin, 0, count);
  return {values_.narrow(0, begin - origin_, count), grads, decayed};
}

bool FlatParams::grads_attached() const {
  if (!grads_.defined()) return false;
  const auto element = static_cast<int64_t>(values_.element_size());
  for (size_t i = 0; i < params_.size(); ++i) {
    const auto offset = slices_[i].offset * element;
    const auto& p = params_[i];
    if (!p.grad().defined()) return false;
    if (static_cast<const char*>(p.data_ptr()) !=
            static_cast<const char*>(values_.data_ptr()) + offset ||
        static_cast<const char*>(p.grad().data_ptr()) !=
            static_cast<const char*>(grads_.data_ptr()) + offset) {
      return false;
    }
  }
  return true;
}

}  // namespace autoloco
