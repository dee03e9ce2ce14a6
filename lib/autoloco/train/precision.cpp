#include "autoloco/train/precision.hpp"

#include <ATen/autocast_mode.h>

namespace autoloco {
namespace {

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
