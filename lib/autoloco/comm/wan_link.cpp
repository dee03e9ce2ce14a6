#include "autoloco/comm/wan_link.hpp"

#include "autoloco/util/error.hpp"
#include "autoloco/util/timer.hpp"

namespace autoloco {
namespace {

DType ring_dtype(const WireCodec& codec) {
  return codec.format == WireFormat::bf16 ? DType::bf16 : DType::f32;
}

}  // namespace

double WanModel::seconds(const LinkTraffic& t) const {
  if (dcs <= 1) return 0.0;
  const double bytes_per_s = bandwidth_gbps * 1e9 / 8.0;
  return t.phases * latency_ms * 1e-3 +
         static_cast<double>(t.critical_bytes) * members / bytes_per_s;
}

WanLink::WanLink(MpiCommunicator& inter, WanModel model)
    : owned_(std::make_unique<MpiPeerExchange>(inter.handle())),
      peers_(owned_.get()),
      ring_(*peers_),
      compressed_(*peers_),
      sparse_(*peers_),
      model_(model) {
  model_.dcs = inter.size();
}

WanLink::WanLink(PeerExchange& peers, WanModel model)
    : peers_(&peers), ring_(peers), compressed_(peers), sparse_(peers), model_(model) {
  model_.dcs = peers.size();
}

void WanLink::set_wait_policy(const WaitPolicy& policy) {
  if (owned_) owned_->set_wait_policy(policy);
  cancel_ = policy.cancel;
}

size_t WanLink::message_bytes(size_t count, const WireCodec& codec, size_t k) {
  if (!codec.has_scales() && !codec.sparse()) {
    return PackedLayout{count, ring_dtype(codec), k}.bytes();
  }
  return codec.encoded_bytes(count) + k * sizeof(double);
}

LinkTraffic WanLink::traffic(size_t count, const WireCodec& codec, size_t k) const {
  if (codec.sparse()) return sparse_.traffic(count, sparse_codec(codec), k);
  return codec.has_scales() ? compressed_.traffic(count, codec, k)
                            : ring_.traffic(count, ring_dtype(codec), k);
}

double WanLink::seconds(size_t count, const WireCodec& codec, size_t k) const {
  return model_.seconds(traffic(count, codec, k));
}

void WanLink::allreduce(float* payload, size_t count, const WireCodec& codec, double* scalars,
                        size_t k, uint64_t stream, float* residual) {
  if (residual != nullptr && !codec.has_scales() && !codec.sparse()) {
    throw CommError(
        "internal: error feedback needs a block format (fp8, int8, int4, int2, e3m0) or top-k");
  }
  // A stripe's group changes with the quorum (the elastic mode); an MPI group never does, and
  // then the model is not written here at all (the main thread reads it meanwhile).
  if (model_.dcs != peers_->size()) model_.dcs = peers_->size();
  if (model_.dcs <= 1) return;
  Timer timer;
  LinkTraffic t;
  if (codec.sparse()) {
    t = sparse_.run(payload, count, sparse_codec(codec), scalars, k, stream, residual);
  } else if (codec.has_scales()) {
    t = compressed_.run(payload, count, codec, scalars, k, stream, residual);
  } else {
    t = ring_.run(payload, count, ring_dtype(codec), scalars, k);
  }
  const double seconds = model_.seconds(t);
  link_s_.store(link_s_.load() + seconds);
  dc_bytes_.store(dc_bytes_.load() +
                  static_cast<int64_t>(message_bytes(count, codec, k)) * model_.members);
  // Every member's collective moves the same shard sizes: all dcs sent members x its total.
  sent_bytes_.store(sent_bytes_.load() + t.all_bytes * model_.members);
  last_ = t;
  messages_.store(messages_.load() + 1);
  if (model_.sleep) {
    // The real transfer already took some of the simulated time.
    const double remaining = seconds - timer.seconds();
    if (remaining > 0) sleep_cancellable(remaining, cancel_);
  }
  wall_s_.store(wall_s_.load() + timer.seconds());
}

void WanLink::restore(const WanCounters& c) {
  dc_bytes_.store(c.dc_bytes);
  sent_bytes_.store(c.sent_bytes);
  messages_.store(c.messages);
  link_s_.store(c.link_s);
  wall_s_.store(c.wall_s);
}

}  // namespace autoloco
