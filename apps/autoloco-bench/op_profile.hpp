// Where a step's time goes, per LibTorch operator: the self time (an operator's own time, less
// the operators it called) of each operator name over a span of work, from LibTorch's profiler;
// the same figure torch.profiler's key_averages() gives as self_cpu_time_total.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>

namespace autoloco::bench {

// Microseconds of self time per operator name while `work` runs on this thread.
std::map<std::string, double> profile_self_us(const std::function<void()>& work);

}  // namespace autoloco::bench
