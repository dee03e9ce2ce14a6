#include "autoloco/train/instance_streams.hpp"

#include <c10/core/Event.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

namespace autoloco {

InstanceStreams::InstanceStreams(torch::Device device, size_t instances) {
  if (!device.is_cuda() || instances < 2) return;
  const auto* impl = c10::impl::getDeviceGuardImpl(device.type());
  for (size_t i = 0; i < instances; ++i)
    streams_.push_back(impl->getStreamFromGlobalPool(device));
}

torch::Tensor InstanceStreams::run(size_t i, const std::function<torch::Tensor()>& work) {
  if (i >= streams_.size()) return work();
  const c10::Stream stream = streams_[i];
  const auto* impl = c10::impl::getDeviceGuardImpl(stream.device_type());
  const c10::Stream home = impl->getStream(stream.device());
  c10::Event ready(stream.device_type());
  ready.record(home);
  ready.block(stream);
  torch::Tensor result;
  {
    c10::StreamGuard on_stream(stream);
    result = work();
  }
  c10::Event done(stream.device_type());
  done.record(stream);
  done.block(home);
  result.record_stream(home);
  return result;
}

}  // namespace autoloco
