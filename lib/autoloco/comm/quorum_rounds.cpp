// QuorumRules, its rounds (quorum_rules.hpp): a quorum issued when the dcs are at the boundary,
// committed by all of it or called off, joiners healed after a commit, and the state hashes
// that each round's dcs must agree on. quorum_rules.cpp has who is in the run.
#include <fmt/format.h>

#include <algorithm>

#include "autoloco/comm/quorum_rules.hpp"

namespace autoloco {
namespace {

// Rounds of hashes kept below the newest commit, for dcs that report late.
constexpr size_t kKeptHashRounds = 8;

}  // namespace

void QuorumRules::abort_in_flight(const std::string& reason) {
  if (!in_flight_) return;
  const InFlight f = *in_flight_;
  in_flight_.reset();
  first_ready_at_.reset();
  ControlMessage abort("abort");
  abort.set("quorum", f.id);
  abort.set("round", f.round);
  abort.set("reason", reason);
  for (const int id : f.members) {
    auto it = dcs_.find(id);
    if (it == dcs_.end()) continue;
    it->second.phase = Phase::kTraining;  // at the boundary still: it posts ready again
    send_all_members(it->second, abort);
  }
  for (const auto& [joiner, source] : f.heals) {
    auto it = dcs_.find(joiner);
    if (it == dcs_.end()) continue;
    it->second.phase = Phase::kJoining;
    send_all_members(it->second, abort);
  }
  log_(fmt::format("quorum {} (round {}) called off: {}", f.id, f.round, reason));
}

void QuorumRules::commit_in_flight() {
  const InFlight f = *in_flight_;
  in_flight_.reset();
  first_ready_at_.reset();
  committed_ = f.round;
  // Only what the dcs report from now on counts for this round (a dc of an earlier run, or a
  // lighthouse that saw this round number before, left nothing that could outvote them).
  reported_hashes_[f.round].clear();
  // Keep the last few rounds below this one; rounds above it are of an earlier history (a dc of
  // a previous run, or one that carried on alone) and must not vote.
  for (auto it = reported_hashes_.begin(); it != reported_hashes_.end();) {
    const bool keep =
        it->first <= f.round && it->first > f.round - static_cast<int64_t>(kKeptHashRounds);
    it = keep ? std::next(it) : reported_hashes_.erase(it);
  }
  ControlMessage commit("commit");
  commit.set("quorum", f.id);
  commit.set("round", f.round);
  for (const int id : f.members) {
    Dc& dc = dcs_.at(id);
    dc.committed = f.round;
    dc.hash.clear();  // until it reports its new state
    dc.phase = Phase::kTraining;
    send(dc, 0, commit);
  }
  log_(fmt::format("round {} committed by dcs {} (quorum {})", f.round, join_ids(f.members), f.id));
  // The dcs left out at the boundary wait there for a round that is gone.
  for (auto& [id, dc] : dcs_) {
    if (dc.phase == Phase::kReady) {
      mark_joining(dc, fmt::format("round {} was committed without it", f.round));
    }
  }
}

std::optional<std::string> QuorumRules::canonical_hash(int64_t round) const {
  const auto it = reported_hashes_.find(round);
  if (it == reported_hashes_.end() || it->second.empty()) return std::nullopt;
  std::map<std::string, int> votes;
  for (const auto& [id, h] : it->second)
    ++votes[h];
  std::string best;
  int best_votes = 0;
  // Ties go to the lowest dc's hash: the dcs are visited in id order.
  for (const auto& [id, h] : it->second) {
    if (votes[h] > best_votes) {
      best = h;
      best_votes = votes[h];
    }
  }
  return best;
}

void QuorumRules::add_endpoints(ControlMessage& m, const std::vector<int>& ids) const {
  for (const int id : ids) {
    const Dc& dc = dcs_.at(id);
    std::string eps;
    for (int i = 0; i < dc.members; ++i)
      eps += (i ? "," : "") + dc.member[static_cast<size_t>(i)].endpoint;
    m.set(fmt::format("ep.{}", id), eps);
    m.set(fmt::format("inc.{}", id), dc.incarnation);
  }
}

void QuorumRules::try_issue(double now) {
  if (in_flight_) return;
  std::vector<int> up, ready, joiners;
  for (const auto& [id, dc] : dcs_) {
    const bool current = dc.committed == committed_;
    if ((dc.phase == Phase::kTraining || dc.phase == Phase::kReady) && current) up.push_back(id);
    if (dc.phase == Phase::kReady && current) ready.push_back(id);
    if (dc.phase == Phase::kJoining) joiners.push_back(id);
  }
  if (ready.empty()) return;
  if (!first_ready_at_) first_ready_at_ = now;
  const bool enough = static_cast<int>(ready.size()) >= settings_.min_dcs;
  const bool due =
      ready.size() == up.size() || now - *first_ready_at_ >= settings_.round_deadline_s;
  // Joiners are healed after the next quorum's commit, with its state. Short of
  // elastic.min_dcs that quorum may need them: then a dc waiting at the boundary, which holds
  // the committed state, heals them at once.
  if (!joiners.empty() && !enough) {
    serve_joiners(ready, joiners);
    joiners.clear();
  }
  if (!enough) {
    if (now - last_wait_log_ >= 10.0) {
      log_(fmt::format("round {} waits for elastic.min_dcs {}: dcs {} at the boundary, {} live",
                       committed_ + 1, settings_.min_dcs, join_ids(ready), live_dcs().size()));
      last_wait_log_ = now;
    }
    return;
  }
  if (!due) return;

  InFlight f;
  f.id = next_id_++;
  f.round = committed_ + 1;
  f.members = ready;
  f.issued_at = now;
  for (size_t i = 0; i < joiners.size(); ++i)
    f.heals.emplace_back(joiners[i], ready[i % ready.size()]);
  in_flight_ = f;
  first_ready_at_.reset();

  ControlMessage q("quorum");
  q.set("quorum", f.id);
  q.set("round", f.round);
  q.set("members", join_ids(f.members));
  q.set("heals", join_heals(f.heals));
  add_endpoints(q, f.members);
  std::vector<int> joiner_ids;
  for (const auto& h : f.heals)
    joiner_ids.push_back(h.first);
  add_endpoints(q, joiner_ids);
  for (const int id : f.members) {
    dcs_.at(id).phase = Phase::kSyncing;
    send(dcs_.at(id), 0, q);
  }
  for (const auto& [j, s] : f.heals) {
    Dc& joiner = dcs_.at(j);
    joiner.phase = Phase::kHealing;
    ControlMessage h("heal");
    h.set("quorum", f.id);
    h.set("round", f.round);
    h.set("source", int64_t{s});
    add_endpoints(h, {s});
    send(joiner, 0, std::move(h));
  }
  std::vector<int> left_out;
  for (const int id : up) {
    if (std::find(ready.begin(), ready.end(), id) == ready.end()) left_out.push_back(id);
  }
  log_(fmt::format("quorum {} for round {}: dcs {}{}{}", f.id, f.round, join_ids(f.members),
                   left_out.empty() ? ""
                                    : fmt::format("; left out (not at the boundary after {} s): {}",
                                                  settings_.round_deadline_s, join_ids(left_out)),
                   f.heals.empty() ? "" : "; heals (joiner<source): " + join_heals(f.heals)));
}

void QuorumRules::serve_joiners(const std::vector<int>& sources, const std::vector<int>& joiners) {
  const int64_t id = next_id_++;
  std::map<int, std::vector<int>> by_source;
  for (size_t i = 0; i < joiners.size(); ++i) {
    const int source = sources[i % sources.size()];
    by_source[source].push_back(joiners[i]);
    Dc& joiner = dcs_.at(joiners[i]);
    joiner.phase = Phase::kHealing;
    ControlMessage h("heal");
    h.set("quorum", id);
    h.set("round", committed_);
    h.set("source", int64_t{source});
    add_endpoints(h, {source});
    send(joiner, 0, std::move(h));
  }
  for (const auto& [source, served] : by_source) {
    std::vector<std::pair<int, int>> heals;
    for (const int j : served)
      heals.emplace_back(j, source);
    ControlMessage m("serve");
    m.set("quorum", id);
    m.set("round", committed_);
    m.set("heals", join_heals(heals));
    add_endpoints(m, served);
    send(dcs_.at(source), 0, std::move(m));
    log_(fmt::format("heal {}: dc {} sends its state of round {} to dc(s) {}", id, source,
                     committed_, join_ids(served)));
  }
}

void QuorumRules::on_ready(Dc& dc, const ControlMessage& m, double now) {
  const int64_t round = m.integer("round");
  if (dc.phase == Phase::kJoining || dc.phase == Phase::kHealing) return;  // it was told
  if (dc.phase == Phase::kSyncing) return;  // a duplicate: it is in the quorum already
  if (round == committed_ + 1 && dc.committed == committed_) {
    dc.phase = Phase::kReady;
    if (!first_ready_at_) first_ready_at_ = now;
    return;
  }
  mark_joining(dc, fmt::format("it reached the boundary of round {}, the run is at round {}", round,
                               committed_ + 1));
}

void QuorumRules::on_result(Dc& dc, const ControlMessage& m) {
  const int64_t q = m.integer("quorum");
  if (!in_flight_ || q != in_flight_->id) return;  // an answer to a quorum called off
  const auto& members = in_flight_->members;
  if (std::find(members.begin(), members.end(), dc.id) == members.end()) return;
  if (m.integer("ok") == 0) {
    abort_in_flight(fmt::format("dc {}: {}", dc.id,
                                m.has("reason") ? m.text("reason") : "its all-reduce failed"));
    return;
  }
  in_flight_->reported.insert(dc.id);
  if (in_flight_->reported.size() == members.size()) commit_in_flight();
}

void QuorumRules::on_state(Dc& dc, const ControlMessage& m) {
  const int64_t round = m.integer("committed");
  dc.committed = round;
  dc.hash = m.text("hash");
  if (dc.phase == Phase::kHealing) {
    if (round != committed_) {
      // The run committed another round while it installed the state: heal it again.
      mark_joining(dc,
                   fmt::format("healed to round {}, the run is at round {}", round, committed_));
      return;
    }
    dc.phase = Phase::kTraining;
  }
  // Only rounds the run may still compare: the last few up to the newest committed.
  if (round > committed_ || round <= committed_ - static_cast<int64_t>(kKeptHashRounds)) return;
  auto& hashes = reported_hashes_[round];
  hashes[dc.id] = dc.hash;
  // Once every dc at this round reported, the ones that differ from the most common state are
  // healed again.
  size_t at_round = 0;
  for (const auto& [id, other] : dcs_) {
    if (other.committed == round && other.phase != Phase::kJoining) ++at_round;
  }
  if (hashes.size() < at_round) return;
  const std::optional<std::string> canonical = canonical_hash(round);
  for (auto& [id, other] : dcs_) {
    const auto h = hashes.find(id);
    if (other.committed != round || h == hashes.end() || other.phase == Phase::kJoining) continue;
    if (h->second != *canonical) {
      mark_joining(other, fmt::format("its state after round {} ({}) differs from the run's ({})",
                                      round, h->second.substr(0, 16), canonical->substr(0, 16)));
      hashes.erase(h);
    }
  }
}

}  // namespace autoloco
