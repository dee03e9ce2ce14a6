#include "op_profile.hpp"

#include <torch/csrc/autograd/profiler_kineto.h>

#include <algorithm>
#include <utility>
#include <vector>

namespace autoloco::bench {
namespace {

struct Span {
  uint64_t thread;
  uint64_t start;
  uint64_t end;
  std::string name;
};

// Each event's duration less its direct children's: events nest on a thread (the profiler
// records an operator's callees inside its span), so a stack of the open spans finds the parent.
std::map<std::string, double> self_times(std::vector<Span> spans) {
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    if (a.thread != b.thread) return a.thread < b.thread;
    if (a.start != b.start) return a.start < b.start;
    return a.end > b.end;  // the enclosing span first
  });
  std::vector<double> children(spans.size(), 0.0);
  std::vector<size_t> open;
  for (size_t i = 0; i < spans.size(); ++i) {
    while (!open.empty() && (spans[open.back()].thread != spans[i].thread ||
                             spans[open.back()].end <= spans[i].start)) {
      open.pop_back();
    }
    if (!open.empty()) children[open.back()] += static_cast<double>(spans[i].end - spans[i].start);
    open.push_back(i);
  }
  std::map<std::string, double> out;
  for (size_t i = 0; i < spans.size(); ++i) {
    const double own = static_cast<double>(spans[i].end - spans[i].start) - children[i];
    out[spans[i].name] += std::max(own, 0.0) / 1e3;
  }
  return out;
}

}  // namespace

std::map<std::string, double> profile_self_us(const std::function<void()>& work) {
  namespace prof = torch::autograd::profiler;
  using torch::profiler::impl::ActivityType;
  using torch::profiler::impl::ProfilerState;
  const prof::ProfilerConfig config(ProfilerState::KINETO);
  const std::set<ActivityType> cpu = {ActivityType::CPU};
  prof::prepareProfiler(config, cpu);
  prof::enableProfiler(config, cpu);
  work();
  const std::unique_ptr<prof::ProfilerResult> result = prof::disableProfiler();
  std::vector<Span> spans;
  for (const auto& e : result->events()) {
    if (e.deviceType() != c10::DeviceType::CPU || e.isAsync()) continue;
    spans.push_back({e.startThreadId(), e.startNs(), e.endNs(), e.name()});
  }
  return self_times(std::move(spans));
}

}  // namespace autoloco::bench
