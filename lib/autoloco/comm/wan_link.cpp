#include "autoloco/comm/wan_link.hpp"

#include <chrono>
#include <thread>

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

void WanLink::allreduce(float* payload, size_t count, DType wire, double* scalars, size_t k) {
  if (model_.dcs <= 1) return;
  const PackedLayout layout{count, wire, k};
  Timer timer;
  ring_.run(payload, count, wire, scalars, k);
  const double t = model_.seconds(layout.bytes());
  link_s_ += t;
  dc_bytes_ += static_cast<int64_t>(layout.bytes()) * model_.members;
  ++messages_;
  if (model_.sleep) {
    // The real transfer already took some of the simulated time.
    const double remaining = t - timer.seconds();
    if (remaining > 0) std::this_thread::sleep_for(std::chrono::duration<double>(remaining));
  }
  wall_s_ += timer.seconds();
}

void WanLink::restore(const WanCounters& c) {
  dc_bytes_ = c.dc_bytes;
  messages_ = c.messages;
  link_s_ = c.link_s;
  wall_s_ = c.wall_s;
}

}  // namespace autoloco
