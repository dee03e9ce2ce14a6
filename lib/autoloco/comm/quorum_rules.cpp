// QuorumRules, who is in the run (quorum_rules.hpp): hellos and the run's identity, heartbeats,
// dcs that leave, and the messages that reach the rounds (quorum_rounds.cpp).
#include "autoloco/comm/quorum_rules.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace autoloco {
namespace {

constexpr int kMaxDcId = 65535;
constexpr int kMaxMembers = 65536;

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
  if (!best && behind_finished_run(dc)) return;
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

bool QuorumRules::behind_finished_run(const Dc& dc) {
  if (finished_ == 0 || dc.committed >= finished_) return false;
  const std::string why = fmt::format(
      "the run finished at round {} without dc {}, which is at round {}, and no dc is left to "
      "heal it: nothing remains to train (its checkpoints are kept)",
      finished_, dc.id, dc.committed);
  for (int i = 0; i < dc.members; ++i) {
    const ConnId conn = dc.member[static_cast<size_t>(i)].conn;
    if (conn >= 0) refuse(conn, why);
  }
  dcs_.erase(dc.id);
  return true;
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
  } else if (type == "finished") {
    finished_ = std::max(finished_, m.integer("round"));
    log_(fmt::format("dc {} finished the run at round {}", dc->id, m.integer("round")));
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
    if (newest && behind_finished_run(*newest)) newest = nullptr;
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
