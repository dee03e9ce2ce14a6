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
  // `across_dcs` is null unless the method is ddp with several dcs.
  GradientSync(Communicator& intra, HierarchicalAllreduce* across_dcs, DType wire, int world_size);

  // grads <- mean of grads over the dc (or, for ddp, over the world).
  void run(FlatParams& params);

 private:
  void allreduce_intra(torch::Tensor& grads);
  void allreduce_across(torch::Tensor& grads);

  Communicator& intra_;
  HierarchicalAllreduce* across_;
  DType wire_;
  int world_size_;
  torch::Tensor staging_;  // host copy of device gradients for the inter-dc path
};

}  // namespace autoloco
