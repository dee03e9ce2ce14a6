#include "autoloco/comm/ring_allreduce.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "autoloco/comm/packed_message.hpp"
#include "autoloco/util/watchdog.hpp"

namespace autoloco {
namespace {

constexpr int kTag = 7301;

// Plain fp32 chunks travel straight from and into the payload; only bf16 and the message that
// carries the scalars need a packed copy. Both ends decide alike from the chunk index.
bool travels_raw(const PackedLayout& layout) {
  return layout.wire == DType::f32 && layout.scalars == 0;
}

size_t wrap(long value, int size) {
  return static_cast<size_t>(((value % size) + size) % size);
}

}  // namespace

void RingAllreduce::watch_step(const char* phase, int s) const {
  const int size = peers_->size();
  const int rank = peers_->rank();
  set_watch_detail(fmt::format("ring {} step {} of {}: receiving from {}, sending to {}", phase,
                               s + 1, size - 1,
                               peers_->peer_name(static_cast<int>(wrap(rank - 1, size))),
                               peers_->peer_name(static_cast<int>(wrap(rank + 1, size)))));
}

size_t RingAllreduce::message_bytes(size_t c, size_t count, DType wire, size_t k) const {
  const PackedLayout layout{chunk(c, count).count, wire, c == 0 ? k : 0};
  return travels_raw(layout) ? layout.count * sizeof(float) : layout.bytes();
}

LinkTraffic RingAllreduce::traffic(size_t count, DType wire, size_t k) const {
  LinkTraffic t;
  const int size = peers_->size();
  const int rank = peers_->rank();
  if (size <= 1) return t;
  // Every step of either phase moves each chunk once, so its slowest message is the largest.
  size_t largest = 0;
  for (size_t c = 0; c < static_cast<size_t>(size); ++c)
    largest = std::max(largest, message_bytes(c, count, wire, k));
  for (int r = 0; r < size; ++r) {
    int64_t sent = 0;
    for (int s = 0; s + 1 < size; ++s) {
      sent += static_cast<int64_t>(message_bytes(wrap(r - s, size), count, wire, k) +
                                   message_bytes(wrap(r + 1 - s, size), count, wire, k));
    }
    if (r == rank) t.sent_bytes = sent;
    t.all_bytes += sent;
  }
  t.phases = 2 * (size - 1);
  t.critical_bytes = static_cast<int64_t>(largest) * t.phases;
  return t;
}

void RingAllreduce::exchange(const float* payload, size_t count, DType wire, const double* scalars,
                             size_t k, size_t send, size_t recv, float* into) {
  const Chunk out = chunk(send, count);
  const Chunk in = chunk(recv, count);
  const PackedLayout out_layout{out.count, wire, send == 0 ? k : 0};
  const PackedLayout in_layout{in.count, wire, recv == 0 ? k : 0};
  const bool raw_out = travels_raw(out_layout);
  const bool raw_in = travels_raw(in_layout);
  const void* send_data = payload + out.begin;
  size_t send_bytes = out.count * sizeof(float);
  if (!raw_out) {
    send_buffer_.resize(out_layout.bytes());
    pack(payload + out.begin, scalars, out_layout, send_buffer_.data());
    send_data = send_buffer_.data();
    send_bytes = send_buffer_.size();
  }
  void* recv_data = into;
  size_t recv_bytes = in.count * sizeof(float);
  if (!raw_in) {
    recv_buffer_.resize(in_layout.bytes());
    recv_data = recv_buffer_.data();
    recv_bytes = recv_buffer_.size();
  }
  const int size = peers_->size();
  const int right = (peers_->rank() + 1) % size;
  const int left = (peers_->rank() + size - 1) % size;
  peers_->exchange({{right, send_data, send_bytes}}, {{left, recv_data, recv_bytes}}, kTag);
  sent_ += static_cast<int64_t>(send_bytes);
  incoming_scalars_.resize(in_layout.scalars);
  if (!raw_in) unpack(recv_buffer_.data(), in_layout, into, incoming_scalars_.data());
}

LinkTraffic RingAllreduce::run(float* payload, size_t count, DType wire, double* scalars,
                               size_t k) {
  check_wire_dtype(wire);
  const int size = peers_->size();
  const int rank = peers_->rank();
  if (size == 1) return {};
  sent_ = 0;
  // Reduce-scatter: after G - 1 steps rank r holds the full sum of chunk r + 1.
  for (int s = 0; s + 1 < size; ++s) {
    const size_t send = wrap(rank - s, size);
    const size_t recv = wrap(rank - s - 1, size);
    const Chunk in = chunk(recv, count);
    incoming_.resize(in.count);
    watch_step("reduce-scatter", s);
    exchange(payload, count, wire, scalars, k, send, recv, incoming_.data());
    float* local = payload + in.begin;
    for (size_t i = 0; i < in.count; ++i)
      local[i] += incoming_[i];
    for (size_t i = 0; i < incoming_scalars_.size(); ++i)
      scalars[i] += incoming_scalars_[i];
  }
  // The owner keeps what the others will receive, so every rank ends with the same bits.
  const Chunk owned = chunk(wrap(rank + 1, size), count);
  if (wire == DType::bf16) {
    for (size_t i = owned.begin; i < owned.begin + owned.count; ++i) {
      payload[i] = bf16_to_float(float_to_bf16(payload[i]));
    }
  }
  // All-gather: pass the reduced chunks round the ring.
  for (int s = 0; s + 1 < size; ++s) {
    const size_t send = wrap(rank + 1 - s, size);
    const size_t recv = wrap(rank - s, size);
    // Straight into place: the owner's value overwrites the partial sum here.
    watch_step("all-gather", s);
    exchange(payload, count, wire, scalars, k, send, recv, payload + chunk(recv, count).begin);
    std::copy(incoming_scalars_.begin(), incoming_scalars_.end(), scalars);
  }
  LinkTraffic t = traffic(count, wire, k);
  t.sent_bytes = sent_;
  return t;
}

}  // namespace autoloco
