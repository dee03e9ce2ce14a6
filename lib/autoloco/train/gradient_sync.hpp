// The gradient all-reduce of an inner step: inside the dc (NCCL or MPI) for the outer methods,
// and for ddp additionally across dcs through the hierarchical all-reduce, so that every rank of
// the world ends with the world's mean gradient.
#pragma once

#include <torch/torch.h>

#include "autoloco/comm/communicator.hpp"
#include "autoloco/comm/hierarchical_allreduce.hpp"
#include "autoloco/optim/flat_params.hpp"

namespace autoloco {

class GradientSync {
 public:
  // `across_dcs` is null unless the method is ddp with several dcs; then the gradients cross
  // the link in `codec`'s format (the compressed path of the outer sync for the block formats),
  // stochastic rounding seeded by `rounding_seed` and the step.
  GradientSync(Communicator& intra, HierarchicalAllreduce* across_dcs, const WireCodec& codec,
               int world_size, uint64_t rounding_seed = 0);

  // grads <- mean of grads over the dc (or, for ddp, over the world), at inner step `step`.
  void run(FlatParams& params, int64_t step = 0);

 private:
  void allreduce_intra(torch::Tensor& grads);
  void allreduce_across(torch::Tensor& grads, uint64_t stream);

  Communicator& intra_;
  HierarchicalAllreduce* across_;
  WireCodec codec_;
  int world_size_;
  uint64_t rounding_seed_;
  torch::Tensor staging_;  // host copy of device gradients for the inter-dc path
};

}  // namespace autoloco
