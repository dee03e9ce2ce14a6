// Multi-instance training on a GPU (batch.instances > 1): each instance's part of an inner step
// is enqueued on its own CUDA stream, so one instance's kernels fill the gaps that another's
// leave (small batches, launch gaps, its NCCL all-reduce). On the CPU, or with one instance,
// it runs the work as it is.
#pragma once

#include <c10/core/Stream.h>
#include <torch/torch.h>

#include <functional>
#include <vector>

namespace autoloco {

class InstanceStreams {
 public:
  InstanceStreams() = default;
  InstanceStreams(torch::Device device, size_t instances);

  // Enqueues `work` with instance i's stream current and returns what it returns: the stream
  // first waits for everything the current stream holds (the last round's anchor copy), and
  // afterwards the current stream waits for the stream, so whatever is enqueued next sees the
  // instance's results. The result, made on instance i's stream and read on the current one,
  // is marked in use there, so that the allocator does not hand its memory out early.
  torch::Tensor run(size_t i, const std::function<torch::Tensor()>& work);

  bool active() const { return !streams_.empty(); }

 private:
  std::vector<c10::Stream> streams_;
};

}  // namespace autoloco
