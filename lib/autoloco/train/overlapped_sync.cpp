#include "autoloco/train/overlapped_sync.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <exception>

#include "autoloco/metrics/progress.hpp"
#include "autoloco/train/device_placement.hpp"
#include "autoloco/util/error.hpp"
#include "autoloco/util/log.hpp"
#include "autoloco/util/watchdog.hpp"

namespace autoloco {

OverlappedSync::OverlappedSync(const Config& config, FlatParams& params, MpiCommunicator& intra,
                               WanLink& link, torch::Device state_device, const Timer& wall,
                               OuterSharding sharding)
    : tau_(config.outer.overlap_steps),
      alpha_(config.outer.overlap_alpha),
      numel_(params.numel()),
      wall_(wall),
      link_(link),
      thread_intra_(intra.handle()),
      reducer_(thread_intra_, link),
      outer_(config, params, reducer_, link, state_device, sharding),
      // The thread's CUDA work (copies on its side stream, events it destroys) is on the rank's
      // GPU, not on the thread's default device 0.
      thread_(std::make_unique<CommThread>(
          [device = params.values().device()] { make_device_current(device); })) {
  const WaitPolicy patient{true, thread_->cancel_flag()};
  thread_intra_.set_wait_policy(patient);
  link.set_wait_policy(patient);
}

OverlappedSync::~OverlappedSync() {
  // A sync still in flight is waited for when the run ends normally, so that no rank leaves a
  // message unmatched; while an error unwinds, the peers may be gone, and the thread's
  // destructor cancels it instead.
  if (state_ == State::running && std::uncaught_exceptions() == 0) {
    try {
      thread_->wait();
    } catch (const std::exception& e) {
      log::error("the inter-dc sync in flight failed: {}", e.what());
    }
  }
  thread_.reset();            // cancels a job still running, joins
  link_.set_wait_policy({});  // the cancel flag went with the thread
}

int64_t OverlappedSync::thread_buffer_bytes() const {
  // Staging (and the GPU snapshot), the padded shard and its gather, and the ring's chunk
  // buffers: an upper bound.
  const int64_t n = numel_;
  const int64_t shard = static_cast<int64_t>(
      HierarchicalAllreduce::shard_size(static_cast<size_t>(n), thread_intra_.size()));
  return outer_.buffer_bytes() + 4 * (shard + n) + 3 * 4 * shard;
}

std::string OverlappedSync::describe() const {
  const std::string fragments =
      outer_.size() == 1 ? "" : fmt::format(", {} fragments", outer_.size());
  return fmt::format(
      "sync: streaming overlap{}, tau {} inner steps, alpha {} | communication thread buffers "
      "{}B per rank",
      fragments, tau_, alpha_, format_si(static_cast<double>(thread_buffer_bytes())));
}

void OverlappedSync::await() {
  if (state_ != State::running) return;
  Timer waited;
  {
    const Watch watch("the wait for the inter-dc all-reduce on the communication thread");
    thread_->wait();
  }
  const double w = waited.seconds();
  clock_.wait_s += w;
  // On a real link what no compute covered is what the main thread waited.
  if (link_.model().measured) clock_.exposed_link_s += w;
  state_ = State::arrived;
}

RoundStats OverlappedSync::apply(FlatParams& params) {
  await();
  // The link was busy from the hand-over for link_s simulated seconds; the compute since then
  // covered that much of it.
  const double covered = std::max(0.0, compute_now() - handed_at_);
  if (!link_.model().measured) clock_.exposed_link_s += std::max(0.0, round_.link_s - covered);
  const RoundStats s = current().finish(round_);
  current().merge(params, alpha_);
  outer_.stepped(round_.in.fragment);
  state_ = State::idle;
  return s;
}

std::optional<RoundStats> OverlappedSync::poll(FlatParams& params, int64_t step) {
  if (state_ == State::idle || step < due_step_) return std::nullopt;
  return apply(params);
}

std::optional<RoundStats> OverlappedSync::end_round(FlatParams& params, const RoundInput& in,
                                                    int64_t step) {
  if (state_ != State::idle) {
    throw CommError("internal: a round ended while the previous sync was in flight");
  }
  round_ = outer_.at(in.fragment).stage(params, in, /*asynchronous=*/true);
  due_step_ = step + tau_;
  handed_at_ = compute_now();
  state_ = State::running;
  thread_->start([this] { current().reduce(round_); });
  return std::nullopt;
}

std::optional<RoundStats> OverlappedSync::flush(FlatParams& params) {
  if (state_ == State::idle) return std::nullopt;
  return apply(params);
}

std::optional<PendingSync> OverlappedSync::settle() {
  if (state_ == State::idle) return std::nullopt;
  await();
  return PendingSync{due_step_, round_, handed_at_};
}

void OverlappedSync::restore(const PendingSync& pending) {
  round_ = pending.round;
  due_step_ = pending.due_step;
  handed_at_ = pending.handed_at;
  state_ = State::arrived;
}

}  // namespace autoloco
