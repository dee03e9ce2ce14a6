#include "autoloco/train/precision.hpp"

#include <ATen/autocast_mode.h>
#include <torch/version.h>

namespace autoloco {
namespace {

// LibTorch 2.4 keyed autocast's switches by device type; 1.13 had one function per device.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
c10::DeviceType device_type(bool cuda) {
  return cuda ? c10::DeviceType::CUDA : c10::DeviceType::CPU;
}
bool autocast_enabled(bool cuda) {
  return at::autocast::is_autocast_enabled(device_type(cuda));
}
void set_autocast_enabled(bool cuda, bool on) {
  at::autocast::set_autocast_enabled(device_type(cuda), on);
}
at::ScalarType autocast_dtype(bool cuda) {
  return at::autocast::get_autocast_dtype(device_type(cuda));
}
void set_autocast_dtype(bool cuda, at::ScalarType dtype) {
  at::autocast::set_autocast_dtype(device_type(cuda), dtype);
}
#else
bool autocast_enabled(bool cuda) {
  return cuda ? at::autocast::is_enabled() : at::autocast::is_cpu_enabled();
}
void set_autocast_enabled(bool cuda, bool on) {
  if (cuda) {
    at::autocast::set_enabled(on);
  } else {
    at::autocast::set_cpu_enabled(on);
  }
}
at::ScalarType autocast_dtype(bool cuda) {
  return cuda ? at::autocast::get_autocast_gpu_dtype() : at::autocast::get_autocast_cpu_dtype();
}
void set_autocast_dtype(bool cuda, at::ScalarType dtype) {
  if (cuda) {
    at::autocast::set_autocast_gpu_dtype(dtype);
  } else {
    at::autocast::set_autocast_cpu_dtype(dtype);
  }
}
#endif

}  // namespace

bool uses_bf16(const RunConfig& run, torch::Device device) {
  if (run.precision == "auto") return device.is_cuda();
  return run.precision == "bf16";
}

void configure_matmul_precision(const RunConfig& run, torch::Device device) {
  if (!device.is_cuda()) return;
  at::globalContext().setFloat32MatmulPrecision(run.tf32 ? "high" : "highest");
}

AutocastScope::AutocastScope(torch::Device device, bool enabled)
    : enabled_(enabled), cuda_(device.is_cuda()) {
  if (!enabled_) return;
  was_enabled_ = autocast_enabled(cuda_);
  old_dtype_ = autocast_dtype(cuda_);
  set_autocast_enabled(cuda_, true);
  set_autocast_dtype(cuda_, at::kBFloat16);
  at::autocast::increment_nesting();
}

AutocastScope::~AutocastScope() {
  if (!enabled_) return;
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  set_autocast_enabled(cuda_, was_enabled_);
  set_autocast_dtype(cuda_, old_dtype_);
}

}  // namespace autoloco
