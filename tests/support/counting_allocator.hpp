// Counts the host allocations of at least a given size while it lives: LibTorch's CPU allocator
// is replaced by one that counts and hands on to it, and put back on destruction. It tells a
// test whether code allocates full-size tensors, whatever their lifetime.
#pragma once

#include <torch/torch.h>

#include <c10/core/CPUAllocator.h>

#include <atomic>
#include <cstddef>

namespace autoloco::test {

class CountingCpuAllocator final : public c10::Allocator {
 public:
  explicit CountingCpuAllocator(size_t at_least) : at_least_(at_least) {
    c10::SetCPUAllocator(this, kPriority);
  }
  ~CountingCpuAllocator() override { c10::SetCPUAllocator(inner_, kPriority); }
  CountingCpuAllocator(const CountingCpuAllocator&) = delete;
  CountingCpuAllocator& operator=(const CountingCpuAllocator&) = delete;

  // Allocations of at least `at_least` bytes so far.
  int large() const { return large_.load(); }
  void reset() { large_ = 0; }

  c10::DataPtr allocate(size_t n) override {
    if (n >= at_least_) ++large_;
    return inner_->allocate(n);
  }
  c10::DeleterFnPtr raw_deleter() const override { return inner_->raw_deleter(); }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }

 private:
  // Above the default allocator's registration, so that the replacement takes.
  static constexpr uint8_t kPriority = 100;
  c10::Allocator* inner_ = c10::GetCPUAllocator();
  size_t at_least_;
  std::atomic<int> large_{0};
};

}  // namespace autoloco::test
