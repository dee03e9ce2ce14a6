#include "autoloco/comm/quorum_rules.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace autoloco {
namespace {

constexpr int kMaxDcId = 65535;
constexpr int kMaxMembers = 65536;
constexpr size_t kKeptHashRounds = 8;

std::string join_ids(const std::vector<int>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i)
    s += (i ? "," : "") + std::to_string(ids[i]);
  return s.empty() ? "none" : s;
}

}  // namespace

QuorumRules::QuorumRules(QuorumSettings settings, Log log)
    : settings_(settings), log_(std::move(log)), next_id_(settings.first_quorum_id) {}

std::vector<Outgoing> QuorumRules::take() {
  std::vector<Outgoing> out;
  out.swap(out_);
  return out;
}

void QuorumRules::send(const Dc& dc, int member, ControlMessage m, bool close) {
  const ConnId conn = dc.member[static_cast<size_t>(member)].conn;
  if (conn >= 0) out_.push_back({conn, std::move(m), close});
}

void QuorumRules::send_all_members(const Dc& dc, const ControlMessage& m) {
  for (int i = 0; i < dc.members; ++i)
    send(dc, i, m);
}

void QuorumRules::refuse(ConnId conn, const std::string& reason, bool retry) {
  ControlMessage m("refused");
  m.set("reason", reason);
  // A restart that raced its old launch's heartbeat timeout tries again; anything else is final.
  if (retry) m.set("retry", int64_t{1});
  out_.push_back({conn, std::move(m), true});
  log_("refused a client: " + reason);
}

QuorumRules::Dc* QuorumRules::find_by_conn(ConnId conn, int* member) {
  for (auto& [id, dc] : dcs_) {
    for (int i = 0; i < dc.members; ++i) {
      if (dc.member[static_cast<size_t>(i)].conn == conn) {
        *member = i;
        return &dc;
      }
    }
  }
  return nullptr;
}

bool QuorumRules::complete(const Dc& dc) const {
  return std::all_of(dc.member.begin(), dc.member.end(),
                     [](const Member& m) { return m.conn >= 0; });
}

std::vector<int> QuorumRules::live_dcs() const {
  std::vector<int> ids;
  for (const auto& [id, dc] : dcs_) {
    if (dc.phase != Phase::kConnecting) ids.push_back(id);
  }
  return ids;
}

std::optional<int64_t> QuorumRules::quorum_in_flight() const {
  if (!in_flight_) return std::nullopt;
  return in_flight_->id;
}

std::string QuorumRules::check_identity(const ControlMessage& hello) const {
  std::map<std::string, std::string> mine;
  for (const auto& [k, v] : hello.fields()) {
    if (k.rfind("run.", 0) == 0) mine[k] = v;
  }
  if (identity_.empty()) return "";
  for (const auto& [k, v] : identity_) {
    const auto it = mine.find(k);
    const std::string theirs = it == mine.end() ? "(not given)" : it->second;
    if (theirs != v) {
      return fmt::format("{}: this dc has {}, the run's dcs have {}", k.substr(4), theirs, v);
    }
  }
  for (const auto& [k, v] : mine) {
    if (!identity_.count(k)) {
      return fmt::format("{}: this dc has {}, the run's dcs have none", k.substr(4), v);
    }
  }
  return "";
}

std::vector<Outgoing> QuorumRules::on_hello(ConnId conn, const ControlMessage& hello, double now) {
  const int64_t id = hello.integer("dc");
  const int64_t members = hello.integer("members");
  const int64_t member = hello.integer("member");
  const std::string& incarnation = hello.text("incarnation");
  if (id < 0 || id > kMaxDcId || members < 1 || members > kMaxMembers || member < 0 ||
      member >= members || incarnation.empty() || incarnation.size() > 64) {
    refuse(conn,
           fmt::format("hello with dc {} member {} of {}: out of range", id, member, members));
    return take();
  }
  const std::string mismatch = check_identity(hello);
  if (!mismatch.empty()) {
    refuse(conn, fmt::format("dc {} is not of this run: {}", id, mismatch));
    return take();
  }
  auto it = dcs_.find(static_cast<int>(id));
  if (it != dcs_.end() && it->second.incarnation != incarnation) {
    const Dc& old = it->second;
    const bool alive = std::any_of(old.member.begin(), old.member.end(), [&](const Member& m) {
      return m.conn >= 0 && now - m.last_heard <= settings_.heartbeat_timeout_s;
    });
    if (alive) {
      refuse(conn,
             fmt::format("dc {} is live (another launch with elastic.dc={}?); a restarted dc is "
                         "let in once the old one is gone",
                         id, id),
             /*retry=*/true);
      return take();
    }
    drop_dc(static_cast<int>(id), "replaced by a new launch of it", now);
    it = dcs_.end();
  }
  if (it == dcs_.end()) {
    Dc dc;
    dc.id = static_cast<int>(id);
    dc.incarnation = incarnation;
    dc.members = static_cast<int>(members);
    dc.member.resize(static_cast<size_t>(members));
    it = dcs_.emplace(dc.id, std::move(dc)).first;
  }
  Dc& dc = it->second;
  if (dc.members != members) {
    refuse(conn, fmt::format("dc {}: member {} says {} members, member 0 said {}", id, member,
                             members, dc.members));
    return take();
  }
  Member& m = dc.member[static_cast<size_t>(member)];
  if (m.conn >= 0) {
    refuse(conn, fmt::format("member {} of dc {} is already connected", member, id));
    return take();
  }
  if (identity_.empty()) adopt_identity(hello);
  m.conn = conn;
  m.last_heard = now;
  m.endpoint = hello.text("endpoint");
  if (member == 0) {
    dc.committed = hello.integer("committed");
    dc.hash = hello.text("hash");
  }
  if (complete(dc)) on_complete(dc, now);
  try_issue(now);
  return take();
}

void QuorumRules::adopt_identity(const ControlMessage& hello) {
  for (const auto& [k, v] : hello.fields()) {
    if (k.rfind("run.", 0) == 0) identity_[k] = v;
  }
  // The run's elastic.* keys: every dc must have the same (they are part of its identity).
  if (hello.has("run.min_dcs")) settings_.min_dcs = static_cast<int>(hello.integer("run.min_dcs"));
  if (hello.has("run.round_deadline_s"))
    settings_.round_deadline_s = hello.real("run.round_deadline_s");
  if (hello.has("run.heartbeat_timeout_s")) {
    settings_.heartbeat_timeout_s = hello.real("run.heartbeat_timeout_s");
  }
  if (hello.has("run.collective_timeout_s")) {
    // A member's own all-reduce gives up after collective_timeout_s and reports; one heartbeat
    // timeout more covers its report's way here.
    settings_.result_timeout_s =
        hello.real("run.collective_timeout_s") + settings_.heartbeat_timeout_s;
  }
  log_(
      fmt::format("the run's settings: min_dcs {}, round_deadline_s {}, heartbeat_timeout_s {}, "
                  "result timeout {} s",
                  settings_.min_dcs, settings_.round_deadline_s, settings_.heartbeat_timeout_s,
                  settings_.result_timeout_s));
}

void QuorumRules::on_complete(Dc& dc, double now) {
  std::optional<int64_t> best;
  for (const auto& [id, other] : dcs_) {
    const bool up = other.phase == Phase::kTraining || other.phase == Phase::kReady ||
                    other.phase == Phase::kSyncing;
    if (id != dc.id && up) best = std::max(best.value_or(other.committed), other.committed);
  }
  ControlMessage status("status");
  if (!best || dc.committed > *best) {
    if (best && in_flight_) {
      abort_in_flight(
          fmt::format("dc {} joined at round {}, newer than the quorum's", dc.id, dc.committed));
    }
    committed_ = dc.committed;
    dc.phase = Phase::kTraining;
    status.set("action", std::string("train"));
    log_(fmt::format("dc {} joined at round {} ({} members): it trains{}", dc.id, dc.committed,
                     dc.members, best ? " (the newest state among the live dcs)" : ""));
  } else {
    const std::optional<std::string> canonical = canonical_hash(dc.committed);
    if (dc.committed == *best && (!canonical || *canonical == dc.hash)) {
      dc.phase = Phase::kTraining;
      status.set("action", std::string("train"));
      log_(fmt::format("dc {} joined at round {} ({} members): it trains", dc.id, dc.committed,
                       dc.members));
    } else {
      dc.phase = Phase::kJoining;
      status.set("action", std::string("heal"));
      log_(
          fmt::format("dc {} joined at round {} ({} members); the run is at round {}: it is "
                      "healed at the next boundary",
                      dc.id, dc.committed, dc.members, *best));
    }
  }
  status.set("round", committed_);
  send(dc, 0, std::move(status));
  (void)now;
}

void QuorumRules::mark_joining(Dc& dc, const std::string& why) {
  dc.phase = Phase::kJoining;
  ControlMessage status("status");
  status.set("action", std::string("heal"));
  status.set("round", committed_);
  status.set("reason", why);
  send(dc, 0, std::move(status));
  log_(fmt::format("dc {} is healed at the next boundary: {}", dc.id, why));
}

void QuorumRules::drop_dc(int id, const std::string& reason, double now) {
  auto it = dcs_.find(id);
  if (it == dcs_.end()) return;
  Dc& dc = it->second;
  ControlMessage dropped("dropped");
  dropped.set("reason", reason);
  for (int i = 0; i < dc.members; ++i)
    send(dc, i, dropped, /*close=*/true);
  if (in_flight_) {
    const auto& m = in_flight_->members;
    if (std::find(m.begin(), m.end(), id) != m.end()) {
      abort_in_flight(fmt::format("dc {} left: {}", id, reason));
    } else {
      auto& heals = in_flight_->heals;
      heals.erase(
          std::remove_if(heals.begin(), heals.end(), [&](const auto& h) { return h.first == id; }),
          heals.end());
    }
  }
  for (auto& [round, hashes] : reported_hashes_)
    hashes.erase(id);
  dcs_.erase(it);
  log_(fmt::format("dc {} left: {} ({} live)", id, reason, live_dcs().size()));
  (void)now;
}

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
  std::string heals;
  for (const auto& [j, s] : f.heals)
    heals += fmt::format("{}{}<{}", heals.empty() ? "" : ",", j, s);
  q.set("heals", heals);
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
                   heals.empty() ? "" : "; heals (joiner<source): " + heals));
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
    std::string heals;
    for (const int j : served)
      heals += fmt::format("{}{}<{}", heals.empty() ? "" : ",", j, source);
    ControlMessage m("serve");
    m.set("quorum", id);
    m.set("round", committed_);
    m.set("heals", heals);
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

std::vector<Outgoing> QuorumRules::on_message(ConnId conn, const ControlMessage& m, double now) {
  int member = -1;
  Dc* dc = find_by_conn(conn, &member);
  if (dc == nullptr) return take();
  dc->member[static_cast<size_t>(member)].last_heard = now;
  const std::string& type = m.type();
  if (type == "heartbeat") return take();
  if (member != 0) {
    throw ProtocolError(fmt::format("'{}' from member {} of dc {}: only member 0 speaks for its dc",
                                    type, member, dc->id));
  }
  if (dc->phase == Phase::kConnecting) {
    throw ProtocolError(
        fmt::format("'{}' from dc {} before all its members connected", type, dc->id));
  }
  if (type == "ready") {
    on_ready(*dc, m, now);
  } else if (type == "result") {
    on_result(*dc, m);
  } else if (type == "state") {
    on_state(*dc, m);
  } else if (type == "join") {
    if (dc->phase != Phase::kJoining && dc->phase != Phase::kHealing) {
      mark_joining(*dc, "it asked to be healed");
    } else {
      dc->phase = Phase::kJoining;
    }
  } else {
    throw ProtocolError(fmt::format("unknown message '{}' from dc {}", type, dc->id));
  }
  try_issue(now);
  return take();
}

std::vector<Outgoing> QuorumRules::on_closed(ConnId conn, double now) {
  int member = -1;
  Dc* dc = find_by_conn(conn, &member);
  if (dc == nullptr) return take();
  dc->member[static_cast<size_t>(member)].conn = -1;
  drop_dc(dc->id, fmt::format("member {}'s connection closed", member), now);
  try_issue(now);
  return take();
}

std::vector<Outgoing> QuorumRules::tick(double now) {
  std::vector<std::pair<int, std::string>> silent;
  for (const auto& [id, dc] : dcs_) {
    for (int i = 0; i < dc.members; ++i) {
      const Member& m = dc.member[static_cast<size_t>(i)];
      if (m.conn >= 0 && now - m.last_heard > settings_.heartbeat_timeout_s) {
        silent.emplace_back(id, fmt::format("member {} silent for {:.1f} s (heartbeat timeout "
                                            "{} s)",
                                            i, now - m.last_heard, settings_.heartbeat_timeout_s));
        break;
      }
    }
  }
  for (const auto& [id, why] : silent)
    drop_dc(id, why, now);
  if (in_flight_ && now - in_flight_->issued_at > settings_.result_timeout_s) {
    std::vector<int> missing;
    for (const int id : in_flight_->members) {
      if (!in_flight_->reported.count(id)) missing.push_back(id);
    }
    abort_in_flight(fmt::format("dcs {} did not report their all-reduce within {} s",
                                join_ids(missing), settings_.result_timeout_s));
  }
  // No dc is up to date (all left): the newest of those waiting to be healed carries on.
  const bool any_up = std::any_of(dcs_.begin(), dcs_.end(), [](const auto& kv) {
    const Phase p = kv.second.phase;
    return p == Phase::kTraining || p == Phase::kReady || p == Phase::kSyncing;
  });
  if (!any_up && !in_flight_) {
    Dc* newest = nullptr;
    for (auto& [id, dc] : dcs_) {
      if (dc.phase == Phase::kJoining && (!newest || dc.committed > newest->committed))
        newest = &dc;
    }
    if (newest) {
      committed_ = newest->committed;
      newest->phase = Phase::kTraining;
      ControlMessage status("status");
      status.set("action", std::string("train"));
      status.set("round", committed_);
      send(*newest, 0, std::move(status));
      log_(fmt::format("no dc is up to date: dc {} carries on from its round {}", newest->id,
                       committed_));
    }
  }
  try_issue(now);
  return take();
}

}  // namespace autoloco
