// The Trainer in the elastic mode (docs/elastic.md): each dc is its own launch and a lighthouse
// forms every round's quorum. A round's end posts ready and syncs with the quorum; a collective
// that fails calls the round off for all, and the survivors redo it with their own
// pseudo-gradients (the replica is untouched until a commit); a dc that is behind, new or
// diverged is healed from a live dc: the anchor, the outer optimizer's state, the interval
// controller and the progress clock, after which the next round is identical to the others'.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "autoloco/ckpt/h5_file.hpp"
#include "autoloco/train/checkpoint_tables.hpp"
#include "autoloco/train/outer_checkpoint.hpp"
#include "autoloco/train/trainer.hpp"
#include "autoloco/util/fast_hash.hpp"
#include "autoloco/util/file_bytes.hpp"
#include "autoloco/util/log.hpp"
#include "autoloco/util/mpi_check.hpp"
#include "autoloco/util/sha256.hpp"

namespace autoloco {
namespace {

constexpr int64_t kHealFormat = 1;

// A scratch file of this process for a heal's state: HDF5 reads and writes files, and the state
// crosses the link as that file's bytes.
std::string heal_scratch(int member) {
  return (std::filesystem::temp_directory_path() /
          fmt::format("autoloco-heal-{}-{}.h5", ::getpid(), member))
      .string();
}

void hash_tensor(Sha256& sha, const torch::Tensor& t) {
  const torch::Tensor host = t.detach().to(torch::kCPU).contiguous();
  const uint64_t h =
      fast_hash64(host.data_ptr(), static_cast<size_t>(host.numel()) * host.element_size());
  sha.update(&h, sizeof(h));
}

}  // namespace

std::string Trainer::state_hash() {
  Sha256 sha;
  FragmentedOuter& outer = sync_->outer();
  hash_tensor(sha, outer.anchor());
  for (const auto& [name, tensor] : outer.optimizer_state()) {
    sha.update(name);
    if (tensor.defined()) hash_tensor(sha, tensor);
  }
  const std::vector<double> controller = controller_->state();
  sha.update(controller.data(), controller.size() * sizeof(double));
  const int64_t counters[3] = {rounds_, step_, H_};
  sha.update(counters, sizeof(counters));
  return to_hex(sha.finish());
}

std::string Trainer::heal_state() {
  std::string bytes;
  if (topo_.member == 0) {
    const std::string path = heal_scratch(topo_.member);
    std::filesystem::remove(path);
    {
      H5Writer w(path);
      w.write("heal/format", kHealFormat);
      w.write("heal/state_hash", elastic_hash_);
      w.write("heal/source_dc", int64_t{dc_id()});
      w.write("model/parameters", param_table(params()));
      // As of the last commit: a source at the boundary has run its round's steps since.
      w.write("counters/step", elastic_commit_step_);
      w.write("counters/rounds", rounds_);
      w.write("counters/H", H_);
      w.write("counters/h_per_round", h_per_round_);
      w.write("counters/progress_step", elastic_commit_progress_);
      w.write("counters/peak_sync_dc_bytes", peak_sync_dc_bytes_);
      w.write("controller/name", controller_->name());
      w.write("controller/state", controller_->state());
      write_outer_whole(w, sync_->outer());
      w.close();
    }
    bytes = read_file_bytes(path).value_or("");
    std::filesystem::remove(path);
  }
  int64_t n = static_cast<int64_t>(bytes.size());
  AUTOLOCO_MPI(MPI_Bcast(&n, 1, MPI_INT64_T, 0, intra_mpi_->handle()));
  if (n > std::numeric_limits<int>::max()) {
    throw CommError(
        fmt::format("the heal state is {} bytes, more than one MPI message carries", n));
  }
  bytes.resize(static_cast<size_t>(n));
  AUTOLOCO_MPI(MPI_Bcast(bytes.data(), static_cast<int>(n), MPI_CHAR, 0, intra_mpi_->handle()));
  return bytes;
}

void Trainer::install_heal(const std::string& bytes) {
  const std::string path = heal_scratch(topo_.member);
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) throw CommError("cannot write the heal's scratch file " + path);
  }
  struct Remove {
    std::string path;
    ~Remove() { std::filesystem::remove(path); }
  } remove{path};
  const H5Reader g(path);
  if (g.read_int("heal/format") != kHealFormat) {
    throw CommError("the heal's state is of another format: run the same autoloco on every dc");
  }
  const std::string diff =
      first_difference(g.read_string("model/parameters"), param_table(params()));
  if (!diff.empty()) throw CommError("the heal source's model differs: " + diff);
  if (g.read_string("controller/name") != controller_->name()) {
    throw CommError(fmt::format("the heal source runs interval controller {}, this dc {}",
                                g.read_string("controller/name"), controller_->name()));
  }
  step_ = g.read_int("counters/step");
  rounds_ = g.read_int("counters/rounds");
  H_ = g.read_int("counters/H");
  h_per_round_ = g.read_i64("counters/h_per_round");
  peak_sync_dc_bytes_ = std::max(peak_sync_dc_bytes_, g.read_int("counters/peak_sync_dc_bytes"));
  // The progress clock counts on from the source's, with this dc's own tokens.
  progress_base_step_ = g.read_int("counters/progress_step");
  progress_base_tokens_ = tokens_;
  controller_->load_state(g.read_f64("controller/state"));
  load_outer(OuterFiles{&g, {}}, sync_->outer(), *intra_mpi_);
  // The next round starts from the anchor, at the source's commit step, as the others' does.
  sync_->outer().anchor_into(params());
  schedule_.restore(step_, std::vector<int64_t>(periods_.size(), step_));
  for (size_t p = 0; p < periods_.size(); ++p) {
    periods_[p] = SyncPeriod{};
    periods_[p].start_compute_s = compute_seconds();
  }
  for (ModelInstance& inst : instances_)
    inst.round_noise = NoiseSums{};
  elastic_commit_step_ = step_;
  elastic_commit_progress_ = progress_step();
  const std::string expected = g.read_string("heal/state_hash");
  elastic_hash_ = state_hash();
  if (elastic_hash_ != expected) {
    throw CommError(fmt::format("the healed state's hash {} differs from the source's {}",
                                elastic_hash_.substr(0, 16), expected.substr(0, 16)));
  }
}

void Trainer::elastic_heal(ElasticDecision d) {
  while (true) {
    try {
      Timer t;
      const std::string bytes = elastic_->receive_heal(d);
      const double transfer_s = t.seconds();
      install_heal(bytes);
      elastic_->report_state(rounds_, elastic_hash_);
      ++elastic_heals_;
      const double check_s = t.seconds() - transfer_s;
      const bool join = elastic_join_wait_s_ >= 0.0;
      if (topo_.member == 0) {
        log::info(
            "dc {}: healed from dc {} after round {} ({} bytes: {}{:.2f} s transfer, {:.2f} s "
            "check); state {}",
            dc_id(), d.source, rounds_, bytes.size(),
            join ? fmt::format("{:.2f} s rendezvous, {:.2f} s waiting for the boundary, ",
                               elastic_rendezvous_s_, elastic_join_wait_s_)
                 : std::string(),
            transfer_s, check_s, elastic_hash_.substr(0, 16));
      }
      if (run_dir_) {
        JsonObject event;
        event.add("event", "heal")
            .add("step", step_)
            .add("round", rounds_)
            .add("source_dc", d.source)
            .add("quorum", d.quorum)
            .add("bytes", static_cast<int64_t>(bytes.size()));
        if (join) {
          event.add("rendezvous_s", elastic_rendezvous_s_)
              .add("boundary_wait_s", elastic_join_wait_s_);
        }
        event.add("transfer_s", transfer_s)
            .add("check_s", check_s)
            .add("unix_s",
                 std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
                     .count())
            .add("state_hash", elastic_hash_);
        run_dir_->append_metrics(event);
      }
      elastic_rendezvous_s_ = elastic_join_wait_s_ = -1.0;
      return;
    } catch (const CommError& e) {
      if (topo_.member == 0)
        log::warn("dc {}: the heal failed: {}; asking again", dc_id(), e.what());
      d = elastic_->heal_again();
      if (d.kind != ElasticDecision::Kind::heal) return;  // it carries on with its own state
    }
  }
}

void Trainer::elastic_begin() {
  // The state of the last commit: a checkpoint in the middle of a round is that many steps on.
  const int64_t into_round = periods_.empty() ? 0 : periods_[0].steps;
  elastic_commit_step_ = step_ - into_round;
  elastic_commit_progress_ = progress_step() - into_round;
  const int64_t step = step_;
  step_ = elastic_commit_step_;
  elastic_hash_ = state_hash();
  step_ = step;
  const Timer joining;
  const ElasticDecision d = elastic_->start(rounds_, elastic_hash_);
  elastic_rendezvous_s_ = elastic_->rendezvous_s();
  elastic_join_wait_s_ = joining.seconds() - elastic_rendezvous_s_;
  if (topo_.member == 0) {
    log::info("dc {}: joined the lighthouse at {} at round {} ({}); state {}", dc_id(),
              elastic_settings_.lighthouse.str(), rounds_,
              d.kind == ElasticDecision::Kind::heal ? "to be healed" : "it trains",
              elastic_hash_.substr(0, 16));
  }
  if (d.kind == ElasticDecision::Kind::heal) elastic_heal(d);
}

void Trainer::elastic_committed() {
  elastic_commit_step_ = step_;
  elastic_commit_progress_ = progress_step();
  elastic_->report_state(rounds_, elastic_hash_);
  if (!elastic_last_.joiners_of(dc_id()).empty()) {
    Timer t;
    elastic_->serve_heals(elastic_last_, heal_state());
    if (topo_.member == 0) {
      log::info("dc {}: sent its state after round {} to dc(s) {} in {:.2f} s", dc_id(), rounds_,
                fmt::join(elastic_last_.joiners_of(dc_id()), ","), t.seconds());
    }
  }
}

std::optional<RoundStats> Trainer::elastic_round(const RoundInput& in) {
  OuterSync& outer = sync_->outer().at(0);
  elastic_attempts_ = 0;
  const Timer boundary;
  while (true) {
    const ElasticDecision d = elastic_->boundary(rounds_ + 1, in.tokens);
    if (d.kind == ElasticDecision::Kind::heal) {
      elastic_heal(d);
      return std::nullopt;
    }
    if (d.kind == ElasticDecision::Kind::train) continue;  // told to carry on: post again
    if (d.kind == ElasticDecision::Kind::serve) {
      // Joiners take this dc's committed state; then it waits at the boundary again.
      elastic_->serve_heals(d, heal_state());
      continue;
    }
    ++elastic_attempts_;
    // Error feedback's residual changes in the all-reduce: a round called off gets it back.
    const torch::Tensor residual =
        outer.residual().defined() ? outer.residual().clone() : torch::Tensor();
    bool ok = d.connected;
    std::string why = d.reason;
    StagedRound staged;
    if (ok) {
      try {
        staged = outer.stage(params(), in);
        outer.reduce(staged);
      } catch (const CommError& e) {
        ok = false;
        why = e.what();
      }
    }
    if (elastic_->conclude(d, ok, why)) {
      const RoundStats s = outer.finish(staged);
      outer.merge(params(), 0.0);
      sync_->outer().stepped(0);
      SyncClock clock = sync_->clock();
      clock.exposed_link_s += s.clock_link_s();
      sync_->restore_clock(clock);
      elastic_last_ = d;
      elastic_boundary_s_ = boundary.seconds();
      return s;
    }
    if (residual.defined()) {
      torch::NoGradGuard no_grad;
      outer.residual().copy_(residual);
    }
  }
}

}  // namespace autoloco
