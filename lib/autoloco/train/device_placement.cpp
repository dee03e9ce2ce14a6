#include "autoloco/train/device_placement.hpp"

#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "autoloco/config/config.hpp"
#include "autoloco/util/error.hpp"

namespace autoloco {

torch::Device pick_device(const RunConfig& run, int local_rank) {
  if (run.device == "cpu") return torch::kCPU;
  if (!torch::cuda::is_available()) {
    throw ConfigError(
        "config key run.device: cuda was asked for but LibTorch sees no CUDA device (is this a "
        "CUDA build of LibTorch, and is a GPU visible?); use run.device=cpu");
  }
  const int64_t count = static_cast<int64_t>(torch::cuda::device_count());
  return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(local_rank % count));
}

void make_device_current(torch::Device device) {
  if (!device.is_cuda()) return;
  c10::impl::getDeviceGuardImpl(device.type())->setDevice(device);
}

}  // namespace autoloco
