// One contiguous buffer for all parameter values and one for all gradients, with every module
// parameter re-pointed at its slice. Optimizers, clipping, all-reduces and checkpoints then work
// on two flat tensors instead of hundreds of small ones.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace autoloco {

// Where one parameter lives inside the flat buffers.
struct ParamSlice {
  std::string name;
  int64_t offset = 0;
  int64_t numel = 0;
  std::vector<int64_t> shape;
  bool decayed = false;
};

// What an inner optimizer steps: the values and gradients of a run of the flat buffer (all of
// it, or one member's shard under topology.shard), whose first decay_numel elements take
// weight decay (the decayed parameters come first in the flat layout).
struct FlatView {
  torch::Tensor values;
  torch::Tensor grads;
  int64_t decay_numel = 0;
  int64_t numel() const { return values.numel(); }
};

using DecayRule = std::function<bool(const std::string& name, const torch::Tensor& param)>;

// The default rule: weight decay applies to matrices and embeddings (dim >= 2), never to
// biases or norm gains. By shape alone, so it holds for every architecture without knowing it.
bool is_decayed(const std::string& name, const torch::Tensor& param);

// Layout: decayed parameters first (in named_parameters order), then the others, so weight
// decay is the single slice [0, decay_numel()). A tensor shared by two names is stored once.
//
// Contract with autograd: each parameter's .grad() is a view into grads(), and backward
// accumulates into it in place (AccumulateGrad adds in place when a grad is already defined and
// the graph is not being differentiated). Hence:
//  - clear gradients with zero_grad() here, never with module->zero_grad() or an optimizer's
//    zero_grad(), which reset grads to undefined (set_to_none) and detach them from grads();
//  - do not move or cast the module (to(device), to(dtype)) after building a FlatParams;
//  - backward with create_graph=true replaces grads out of place: not supported.
// grads_attached() checks the contract cheaply. The FlatParams must outlive every use of the
// module's parameters, which alias its storage.
class FlatParams {
 public:
  // `flat_grads` false (topology.shard gradients): no flat gradient buffer; each parameter's
  // .grad() is autograd's own tensor, which the sharding takes and frees during backward, and
  // grads() is undefined.
  explicit FlatParams(torch::nn::Module& module, const DecayRule& decayed = default_decay_rule(),
                      bool flat_grads = true);
  // topology.shard full: the same layout, of which only elements [keep_begin, keep_begin +
  // keep_count) are kept (values() holds them, no flat gradient); the module's parameters are
  // left as they are, for the sharding to re-point (gathered_units.hpp).
  FlatParams(torch::nn::Module& module, int64_t keep_begin, int64_t keep_count,
             const DecayRule& decayed = default_decay_rule());
  FlatParams(const FlatParams&) = delete;
  FlatParams& operator=(const FlatParams&) = delete;
  FlatParams(FlatParams&&) = delete;
  FlatParams& operator=(FlatParams&&) = delete;
  ~FlatParams() = default;

  // The kept values: all of them, or under topology.shard full elements [origin(), origin() +
  // values().numel()) of the layout.
  torch::Tensor& values() { return values_; }
  torch::Tensor& grads() { return grads_; }
  // Of the whole layout, kept or not.
  int64_t numel() const { return numel_; }
  int64_t origin() const { return origin_; }
  bool keeps_all() const { return values_.numel() == numel_; }
  int64_t decay_numel() const { return decay_numel_; }
  bool flat_grads() const { return grads_.defined(); }
  // The whole buffer, or elements [begin, begin + count) of the layout (kept ones) with `grads`
  // (count elements) as their gradient, for an optimizer.
  FlatView view() { return {values_, grads_, decay_numel_}; }
  FlatView shard_view(int64_t begin, int64_t count, const torch::Tensor& grads);
  // The module's parameters, in slices() order.
  const std::vector<torch::Tensor>& parameters() const { return params_; }
  const std::vector<ParamSlice>& slices() const { return slices_; }

  // Moves the kept values of topology.shard full (which no parameter views) to `device`.
  void move_values(torch::Device device);

  // Zeroes grads() in place, so every parameter keeps pointing into it (without flat grads:
  // drops every parameter's gradient).
  void zero_grad();

  // True when every parameter's value and grad still alias the flat buffers.
  bool grads_attached() const;

  static DecayRule default_decay_rule();

 private:
  std::vector<torch::Tensor> params_;  // same order as slices_
  std::vector<ParamSlice> slices_;
  torch::Tensor values_;
  torch::Tensor grads_;
  int64_t decay_numel_ = 0;
  int64_t numel_ = 0;
  int64_t origin_ = 0;
};

}  // namespace autoloco
