#include "autoloco/comm/elastic_link.hpp"

#include <mpi.h>

#include <fmt/format.h>
#include <algorithm>
#include <chrono>
#include <cstring>

#include "autoloco/util/mpi_check.hpp"
#include "autoloco/util/sha256.hpp"

namespace autoloco {
namespace {

// The ep.D fields of a lighthouse message (or of a decision).
std::map<int, std::vector<Endpoint>> endpoints_of(const ControlMessage& m) {
  std::map<int, std::vector<Endpoint>> out;
  for (const auto& [k, v] : m.fields()) {
    if (k.rfind("ep.", 0) != 0) continue;
    std::vector<Endpoint> eps;
    for (const std::string& e : split_list(v))
      eps.push_back(Endpoint::parse(e, "the lighthouse's endpoint of dc " + k.substr(3)));
    const std::vector<int> dc = parse_ids(k.substr(3));
    if (dc.size() != 1) throw ProtocolError("malformed endpoint field '" + k + "'");
    out[dc[0]] = eps;
  }
  return out;
}

// A heal transfer's header: the quorum, the payload's length and its SHA-256.
constexpr size_t kHealHeader = 16 + 32;

}  // namespace

std::vector<int> ElasticDecision::joiners_of(int dc) const {
  std::vector<int> out;
  for (const auto& [j, s] : heals) {
    if (s == dc) out.push_back(j);
  }
  return out;
}

ControlMessage encode_decision(const ElasticDecision& d) {
  ControlMessage m("decision");
  static const char* const kKinds[] = {"train", "sync", "heal", "serve"};
  m.set("kind", std::string(kKinds[static_cast<int>(d.kind)]));
  m.set("quorum", d.quorum);
  m.set("round", d.round);
  m.set("members", join_ids(d.members));
  m.set("heals", join_heals(d.heals));
  m.set("source", int64_t{d.source});
  m.set("reason", d.reason);
  for (const auto& [dc, eps] : d.endpoints) {
    std::string s;
    for (size_t i = 0; i < eps.size(); ++i)
      s += (i ? "," : "") + eps[i].str();
    m.set(fmt::format("ep.{}", dc), s);
  }
  return m;
}

ElasticDecision decode_decision(const ControlMessage& m) {
  ElasticDecision d;
  const std::string& kind = m.text("kind");
  d.kind = kind == "train"   ? ElasticDecision::Kind::train
           : kind == "sync"  ? ElasticDecision::Kind::sync
           : kind == "serve" ? ElasticDecision::Kind::serve
                             : ElasticDecision::Kind::heal;
  d.quorum = m.integer("quorum");
  d.round = m.integer("round");
  d.members = parse_ids(m.text("members"));
  d.heals = parse_heals(m.text("heals"));
  d.source = static_cast<int>(m.integer("source"));
  d.reason = m.text("reason");
  d.endpoints = endpoints_of(m);
  return d;
}

// The stripe the WanLink sees: the current quorum's exchange, or this dc alone.
class ElasticLink::Stripe : public PeerExchange {
 public:
  explicit Stripe(ElasticLink& link) : link_(link) {}
  int rank() const override { return link_.exchange_ ? link_.exchange_->rank() : 0; }
  int size() const override { return link_.exchange_ ? link_.exchange_->size() : 1; }
  void exchange(const std::vector<Send>& sends, const std::vector<Recv>& recvs, int tag) override {
    if (!link_.exchange_) throw CommError("internal: an inter-dc exchange outside a quorum");
    link_.exchange_->exchange(sends, recvs, tag);
  }
  std::string peer_name(int peer) const override {
    return link_.exchange_ ? link_.exchange_->peer_name(peer) : "itself";
  }

 private:
  ElasticLink& link_;
};

ElasticLink::ElasticLink(ElasticSettings settings, MpiCommunicator& intra, Log log)
    : settings_(std::move(settings)),
      intra_(intra),
      member_(intra.rank()),
      members_(intra.size()),
      log_(std::move(log)),
      stripe_(std::make_unique<Stripe>(*this)) {
  // One incarnation per launch, the same on every member: member 0 draws it.
  uint64_t incarnation = member_ == 0 ? random_u64() : 0;
  AUTOLOCO_MPI(MPI_Bcast(&incarnation, 1, MPI_UINT64_T, 0, intra_.handle()));
  const std::string inc = fmt::format("{:016x}", incarnation);
  const int port = settings_.port == 0 ? 0 : settings_.port + member_;
  incarnation_ = inc;
  connections_ = std::make_unique<StripeConnections>(
      StripeConnections::Identity{settings_.dc, member_, inc, settings_.key},
      Endpoint{"0.0.0.0", port});
}

ElasticDecision ElasticLink::start(int64_t committed, const std::string& hash) {
  QuorumClientOptions o;
  o.lighthouse = settings_.lighthouse;
  o.key = settings_.key;
  o.dc = settings_.dc;
  o.member = member_;
  o.members = members_;
  o.incarnation = incarnation_;
  o.advertise = settings_.advertise;
  o.port = connections_->port();
  o.identity = settings_.identity;
  o.heartbeat_s = settings_.heartbeat_s;
  o.reconnect_s = settings_.quorum_timeout_s;
  // A lighthouse that cannot be reached, or refuses this dc, fails on every member alike.
  const auto began = std::chrono::steady_clock::now();
  std::string error;
  try {
    client_ = std::make_unique<QuorumClient>(o, committed, hash, log_);
  } catch (const CommError& e) {
    error = e.what();
  }
  if (!all_members(error.empty())) {
    throw CommError(error.empty() ? "another member of this dc could not join the lighthouse"
                                  : error);
  }
  rendezvous_s_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  ElasticDecision d;
  if (member_ == 0) d = await_decision(0, false);
  return broadcast(d);
}

ElasticLink::~ElasticLink() = default;

PeerExchange& ElasticLink::stripe() {
  return *stripe_;
}

bool ElasticLink::all_members(bool ok) {
  int flag = ok ? 1 : 0;
  AUTOLOCO_MPI(MPI_Allreduce(MPI_IN_PLACE, &flag, 1, MPI_INT, MPI_MIN, intra_.handle()));
  return flag == 1;
}

ElasticDecision ElasticLink::broadcast(ElasticDecision d) {
  std::string bytes = member_ == 0 ? encode_decision(d).encode() : std::string();
  int64_t n = static_cast<int64_t>(bytes.size());
  AUTOLOCO_MPI(MPI_Bcast(&n, 1, MPI_INT64_T, 0, intra_.handle()));
  bytes.resize(static_cast<size_t>(n));
  AUTOLOCO_MPI(MPI_Bcast(bytes.data(), static_cast<int>(n), MPI_CHAR, 0, intra_.handle()));
  return member_ == 0 ? d : decode_decision(ControlMessage::decode(bytes));
}

ElasticDecision ElasticLink::await_decision(int64_t round, bool joining) {
  const Deadline deadline = deadline_in(settings_.quorum_timeout_s);
  while (true) {
    const ControlMessage m = client_->next(deadline);
    const std::string& type = m.type();
    if (type == "quorum" && !joining) {
      ElasticDecision d;
      d.kind = ElasticDecision::Kind::sync;
      d.quorum = m.integer("quorum");
      d.round = m.integer("round");
      d.members = parse_ids(m.text("members"));
      d.heals = parse_heals(m.text("heals"));
      d.endpoints = endpoints_of(m);
      if (d.round != round) {
        throw CommError(
            fmt::format("the lighthouse's quorum {} is for round {}, this dc is at "
                        "the boundary of round {}",
                        d.quorum, d.round, round));
      }
      return d;
    }
    if (type == "serve" && !joining) {
      ElasticDecision d;
      d.kind = ElasticDecision::Kind::serve;
      d.quorum = m.integer("quorum");
      d.round = m.integer("round");
      d.heals = parse_heals(m.text("heals"));
      d.endpoints = endpoints_of(m);
      return d;
    }
    if (type == "heal") {
      ElasticDecision d;
      d.kind = ElasticDecision::Kind::heal;
      d.quorum = m.integer("quorum");
      d.round = m.integer("round");
      d.source = static_cast<int>(m.integer("source"));
      d.endpoints = endpoints_of(m);
      return d;
    }
    if (type == "status") {
      if (m.text("action") == "heal") {
        if (!joining) {
          log_(fmt::format("dc {} waits to be healed: {}", settings_.dc,
                           m.has("reason") ? m.text("reason") : "it is behind the run"));
        }
        joining = true;
        continue;
      }
      // Told to train: from the start, or every up-to-date dc left and this one carries on.
      ElasticDecision d;
      d.kind = ElasticDecision::Kind::train;
      d.round = m.integer("round");
      return d;
    }
    if (type == "lost" && !joining && round > 0) {
      // A new lighthouse knows nothing of this boundary: say it again once it answers.
      ControlMessage ready("ready");
      ready.set("round", round);
      client_->send(ready);
    }
    // abort / commit of a quorum that is over, or lost while joining: nothing to do.
  }
}

void ElasticLink::connect_stripe(ElasticDecision& d) {
  exchange_.reset();
  sockets_.clear();
  std::vector<Endpoint> eps;
  for (const int dc : d.members) {
    const auto it = d.endpoints.find(dc);
    if (it == d.endpoints.end() || static_cast<int>(it->second.size()) <= member_) {
      throw CommError(
          fmt::format("quorum {}: no endpoint of dc {} member {}", d.quorum, dc, member_));
    }
    eps.push_back(it->second[static_cast<size_t>(member_)]);
  }
  connections_->forget_before(d.quorum);
  sockets_ = connections_->connect_group(
      d.quorum, d.members, eps, deadline_in(settings_.collective_timeout_s), &client_->wake());
  std::vector<TcpPeerExchange::Peer> peers;
  int rank = 0;
  for (size_t i = 0; i < d.members.size(); ++i) {
    if (d.members[i] == settings_.dc) rank = static_cast<int>(i);
    peers.push_back({d.members[i] == settings_.dc ? nullptr : &sockets_[i],
                     fmt::format("dc {} member {}", d.members[i], member_)});
  }
  exchange_ = std::make_unique<TcpPeerExchange>(rank, std::move(peers), d.quorum,
                                                settings_.collective_timeout_s, &client_->wake());
}

ElasticDecision ElasticLink::boundary(int64_t round, double tokens) {
  ElasticDecision d;
  if (member_ == 0) {
    client_->rearm();
    ControlMessage ready("ready");
    ready.set("round", round);
    ready.set("tokens", tokens);
    client_->send(ready);
    d = await_decision(round, false);
  }
  d = broadcast(d);
  if (member_ != 0) client_->rearm();
  if (d.kind == ElasticDecision::Kind::sync) {
    try {
      connect_stripe(d);
      d.connected = true;
    } catch (const CommError& e) {
      d.connected = false;
      d.reason = e.what();
    }
  } else if (d.kind == ElasticDecision::Kind::heal) {
    exchange_.reset();
  }
  return d;
}

bool ElasticLink::conclude(const ElasticDecision& d, bool ok, const std::string& why) {
  const bool dc_ok = all_members(ok);
  ElasticDecision outcome;
  outcome.quorum = d.quorum;
  if (member_ == 0) {
    ControlMessage result("result");
    result.set("quorum", d.quorum);
    result.set("ok", int64_t{dc_ok ? 1 : 0});
    if (!dc_ok) result.set("reason", why.empty() ? std::string("a member failed") : why);
    client_->send(result);
    const Deadline deadline = deadline_in(settings_.quorum_timeout_s);
    bool decided = false;
    while (!decided) {
      const ControlMessage m = client_->next(deadline);
      if ((m.type() == "commit" || m.type() == "abort") && m.integer("quorum") == d.quorum) {
        outcome.kind =
            m.type() == "commit" ? ElasticDecision::Kind::sync : ElasticDecision::Kind::train;
        outcome.reason = m.type() == "abort" ? m.text("reason") : "";
        decided = true;
      } else if (m.type() == "lost") {
        outcome.kind = ElasticDecision::Kind::train;  // called off with the lighthouse
        outcome.reason = "the lighthouse was lost before it decided";
        decided = true;
      }
    }
  }
  outcome = broadcast(outcome);
  const bool committed = outcome.kind == ElasticDecision::Kind::sync;
  if (!committed) {
    // A collective that failed may have left bytes in flight: never reuse its connections.
    exchange_.reset();
    sockets_.clear();
    if (member_ == 0) {
      log_(fmt::format("dc {}: quorum {} (round {}) called off: {}; the round is redone",
                       settings_.dc, d.quorum, d.round, outcome.reason));
    }
  }
  return committed;
}

void ElasticLink::serve_heals(const ElasticDecision& d, const std::string& state) {
  for (const int joiner : d.joiners_of(settings_.dc)) {
    // This member's slice of the state.
    const size_t per =
        (state.size() + static_cast<size_t>(members_) - 1) / static_cast<size_t>(members_);
    const size_t begin = std::min(state.size(), per * static_cast<size_t>(member_));
    const size_t end = std::min(state.size(), begin + per);
    try {
      Socket s = connections_->take(d.quorum, "heal", joiner,
                                    deadline_in(settings_.heartbeat_timeout_s), nullptr);
      const std::string slice = state.substr(begin, end - begin);
      std::string header(kHealHeader, '\0');
      const uint64_t q = static_cast<uint64_t>(d.quorum);
      const uint64_t n = slice.size();
      for (int i = 0; i < 8; ++i) {
        header[static_cast<size_t>(i)] = static_cast<char>(q >> (8 * i));
        header[static_cast<size_t>(8 + i)] = static_cast<char>(n >> (8 * i));
      }
      const Digest digest = sha256(slice);
      std::memcpy(header.data() + 16, digest.data(), digest.size());
      const Deadline deadline = deadline_in(settings_.collective_timeout_s);
      write_all(s, header.data(), header.size(), deadline, nullptr, "the joiner");
      write_all(s, slice.data(), slice.size(), deadline, nullptr, "the joiner");
    } catch (const CommError& e) {
      log_(fmt::format("dc {} member {}: healing dc {} failed: {} (it asks again)", settings_.dc,
                       member_, joiner, e.what()));
    }
  }
}

std::string ElasticLink::receive_heal(const ElasticDecision& d) {
  std::string slice;
  std::string error;
  try {
    const auto it = d.endpoints.find(d.source);
    if (it == d.endpoints.end() || static_cast<int>(it->second.size()) <= member_) {
      throw CommError(fmt::format("no endpoint of the heal source dc {}", d.source));
    }
    const std::string what = fmt::format("dc {} member {}", d.source, member_);
    // A call-off before this heal (a lost lighthouse, an earlier quorum) is not this heal's;
    // one of this heal's own quorum is.
    if (client_->rearm() >= d.quorum) throw WaitInterrupted("the heal was called off");
    Socket s =
        connections_->dial(d.quorum, "heal", d.source, it->second[static_cast<size_t>(member_)],
                           deadline_in(settings_.collective_timeout_s), &client_->wake());
    // The source sends once its round committed: as long as a round may take.
    const Deadline deadline = deadline_in(settings_.quorum_timeout_s);
    std::string header(kHealHeader, '\0');
    read_exact(s, header.data(), header.size(), deadline, &client_->wake(), what);
    uint64_t q = 0, n = 0;
    for (int i = 0; i < 8; ++i) {
      q |= uint64_t{static_cast<uint8_t>(header[static_cast<size_t>(i)])} << (8 * i);
      n |= uint64_t{static_cast<uint8_t>(header[static_cast<size_t>(8 + i)])} << (8 * i);
    }
    if (q != static_cast<uint64_t>(d.quorum) || n > (uint64_t{1} << 40)) {
      throw ProtocolError(fmt::format("{} sent a heal of quorum {} ({} bytes)", what, q, n));
    }
    slice.resize(n);
    read_exact(s, slice.data(), slice.size(), deadline, &client_->wake(), what);
    const Digest digest = sha256(slice);
    if (std::memcmp(digest.data(), header.data() + 16, digest.size()) != 0) {
      throw ProtocolError(fmt::format("the heal from {} does not match its digest", what));
    }
  } catch (const CommError& e) {
    error = e.what();
  }
  if (!all_members(error.empty())) {
    throw CommError(error.empty() ? "another member of this dc failed its part of the heal"
                                  : error);
  }
  // Every member's slice to every member, in member order.
  const int n = static_cast<int>(slice.size());
  std::vector<int> counts(static_cast<size_t>(members_));
  AUTOLOCO_MPI(MPI_Allgather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, intra_.handle()));
  std::vector<int> offsets(counts.size(), 0);
  for (size_t i = 1; i < counts.size(); ++i)
    offsets[i] = offsets[i - 1] + counts[i - 1];
  std::string whole(static_cast<size_t>(offsets.back() + counts.back()), '\0');
  AUTOLOCO_MPI(MPI_Allgatherv(slice.data(), n, MPI_CHAR, whole.data(), counts.data(),
                              offsets.data(), MPI_CHAR, intra_.handle()));
  return whole;
}

ElasticDecision ElasticLink::heal_again() {
  ElasticDecision d;
  if (member_ == 0) {
    client_->send(ControlMessage("join"));
    d = await_decision(0, true);
  }
  return broadcast(d);
}

void ElasticLink::report_state(int64_t committed, const std::string& hash) {
  client_->set_state(committed, hash);
  if (member_ != 0) return;
  ControlMessage state("state");
  state.set("committed", committed);
  state.set("hash", hash);
  client_->send(state);
}

void ElasticLink::finish(int64_t round) {
  if (member_ != 0 || !client_) return;
  ControlMessage finished("finished");
  finished.set("round", round);
  client_->send(finished);
  client_->flush(deadline_in(settings_.heartbeat_timeout_s));
}

}  // namespace autoloco
