#include "autoloco/comm/wan_link.hpp"

#include "autoloco/util/timer.hpp"

namespace autoloco {

double WanModel::seconds(size_t bytes_per_member) const {
  if (dcs <= 1) return 0.0;
  const double g = dcs;
  const double dc_bytes = static_cast<double>(bytes_per_member) * members;
  const double bytes_per_s = bandwidth_gbps * 1e9 / 8.0;
  return 2.0 * (g - 1.0) * (latency_ms * 1e-3 + dc_bytes / (g * bytes_per_s));
}

WanLink::WanLink(MpiCommunicator& inter, WanModel model) : ring_(inter.handle()), model_(model) {
  model_.dcs = inter.size();
}

void WanLink::set_wait_policy(const WaitPolicy& policy) {
  ring_.set_wait_policy(policy);
  cancel_ = policy.cancel;
}

void WanLink::allreduce(float* payload, size_t count, DType wire, double* scalars, size_t k) {
  if (model_.dcs <= 1) return;
  const PackedLayout layout{count, wire, k};
  Timer timer;
  ring_.run(payload, count, wire, scalars, k);
  const double t = model_.seconds(layout.bytes());
  link_s_.store(link_s_.load() + t);
  dc_bytes_.store(dc_bytes_.load() + static_cast<int64_t>(layout.bytes()) * model_.members);
  messages_.store(messages_.load() + 1);
  if (model_.sleep) {
    // The real transfer already took some of the simulated time.
    const double remaining = t - timer.seconds();
    if (remaining > 0) sleep_cancellable(remaining, cancel_);
  }
  wall_s_.store(wall_s_.load() + timer.seconds());
}

void WanLink::restore(const WanCounters& c) {
  dc_bytes_.store(c.dc_bytes);
  messages_.store(c.messages);
  link_s_.store(c.link_s);
  wall_s_.store(c.wall_s);
}

}  // namespace autoloco
