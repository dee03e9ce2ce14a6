// comm/stripe_connections.hpp and comm/tcp_peer_exchange.hpp over loopback: members of
// several "dcs" (threads here) connect for a quorum and exchange; a stranger, a stale message, a
// dead or silent peer and a call-off each end the exchange with their own error.
#include <catch2/catch.hpp>

#include <atomic>
#include <memory>
#include <numeric>
#include <thread>
#include <vector>

#include "autoloco/comm/handshake.hpp"
#include "autoloco/comm/stripe_connections.hpp"
#include "autoloco/comm/tcp_peer_exchange.hpp"

using namespace autoloco;

namespace {

const std::string kKey = "stripe-test-key-0123456789";

struct Dc {
  std::unique_ptr<StripeConnections> conn;
  int id = 0;
};

std::vector<Dc> make_dcs(const std::vector<int>& ids, const std::string& key = kKey) {
  std::vector<Dc> dcs;
  for (const int id : ids) {
    Dc d;
    d.id = id;
    d.conn = std::make_unique<StripeConnections>(
        StripeConnections::Identity{id, 0, "inc" + std::to_string(id), key},
        Endpoint{"127.0.0.1", 0});
    dcs.push_back(std::move(d));
  }
  return dcs;
}

// Connects every dc of `dcs` for `quorum`, each on its own thread as real dcs would.
std::vector<std::vector<Socket>> connect_all(std::vector<Dc>& dcs, int64_t quorum) {
  std::vector<int> ids;
  std::vector<Endpoint> eps;
  for (const Dc& d : dcs) {
    ids.push_back(d.id);
    eps.push_back({"127.0.0.1", d.conn->port()});
  }
  std::vector<std::vector<Socket>> sockets(dcs.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < dcs.size(); ++i) {
    threads.emplace_back([&, i] {
      sockets[i] = dcs[i].conn->connect_group(quorum, ids, eps, deadline_in(10), nullptr);
    });
  }
  for (auto& t : threads)
    t.join();
  return sockets;
}

TcpPeerExchange exchange_of(const std::vector<Socket>& sockets, size_t rank, int64_t quorum,
                            double idle_s = 10.0, const Wakeup* wake = nullptr) {
  std::vector<TcpPeerExchange::Peer> peers;
  for (size_t j = 0; j < sockets.size(); ++j)
    peers.push_back({j == rank ? nullptr : &sockets[j], "dc index " + std::to_string(j)});
  return TcpPeerExchange(static_cast<int>(rank), peers, quorum, idle_s, wake);
}

}  // namespace

TEST_CASE("stripe: members of 3 dcs connect for a quorum and exchange all-to-all", "[elastic]") {
  auto dcs = make_dcs({0, 2, 5});
  auto sockets = connect_all(dcs, 7);
  const size_t g = dcs.size();
  const size_t n = 100000;  // larger than a socket buffer: sends and receives interleave
  std::vector<std::vector<std::vector<int>>> got(g, std::vector<std::vector<int>>(g));
  std::vector<std::thread> threads;
  for (size_t r = 0; r < g; ++r) {
    threads.emplace_back([&, r] {
      TcpPeerExchange ex = exchange_of(sockets[r], r, 7);
      std::vector<std::vector<int>> out(g, std::vector<int>(n));
      std::vector<PeerExchange::Send> sends;
      std::vector<PeerExchange::Recv> recvs;
      for (size_t j = 0; j < g; ++j) {
        if (j == r) continue;
        std::iota(out[j].begin(), out[j].end(), static_cast<int>(1000 * r + j));
        got[r][j].resize(n);
        sends.push_back({static_cast<int>(j), out[j].data(), n * sizeof(int)});
        recvs.push_back({static_cast<int>(j), got[r][j].data(), n * sizeof(int)});
      }
      ex.exchange(sends, recvs, 11);
    });
  }
  for (auto& t : threads)
    t.join();
  for (size_t r = 0; r < g; ++r) {
    for (size_t j = 0; j < g; ++j) {
      if (j == r) continue;
      CHECK(got[r][j].front() == static_cast<int>(1000 * j + r));
      CHECK(got[r][j].back() == static_cast<int>(1000 * j + r + n - 1));
    }
  }
}

TEST_CASE("stripe: a dialler without the key, or of another member index, is refused",
          "[elastic]") {
  auto dcs = make_dcs({0});
  StripeConnections stranger({1, 0, "x", "a key that is not the stripe's"}, {"127.0.0.1", 0});
  CHECK_THROWS_AS(
      stranger.dial(1, "stripe", 0, {"127.0.0.1", dcs[0].conn->port()}, deadline_in(10), nullptr),
      AuthError);
  StripeConnections other_member({1, 1, "x", kKey}, {"127.0.0.1", 0});
  CHECK_THROWS_WITH(other_member.dial(1, "stripe", 0, {"127.0.0.1", dcs[0].conn->port()},
                                      deadline_in(10), nullptr),
                    Catch::Contains("member 1 of dc 1 dialled member 0"));
  // Neither left a connection to be taken.
  CHECK_THROWS_AS(dcs[0].conn->take(1, "stripe", 1, deadline_in(0.05), nullptr), PeerTimeout);
  CHECK(dcs[0].conn->refused() == 2);
}

TEST_CASE("stripe: a message of another quorum or size is refused, not summed", "[elastic]") {
  auto dcs = make_dcs({0, 1});
  auto sockets = connect_all(dcs, 3);
  std::thread sender([&] {
    TcpPeerExchange ex = exchange_of(sockets[1], 1, /*quorum=*/2);  // a stale quorum's member
    std::vector<char> bytes(16, 'x');
    try {
      ex.exchange({{0, bytes.data(), bytes.size()}}, {}, 5);
    } catch (const CommError&) {
    }
  });
  TcpPeerExchange ex = exchange_of(sockets[0], 0, 3);
  std::vector<char> in(16);
  CHECK_THROWS_WITH(ex.exchange({}, {{1, in.data(), in.size()}}, 5),
                    Catch::Contains("sent a message for quorum 2"));
  sender.join();
}

TEST_CASE("stripe: a dead peer, a silent one and a call-off each end the exchange", "[elastic]") {
  auto dcs = make_dcs({0, 1});
  std::vector<char> in(1000);
  SECTION("dead: its end closed") {
    auto sockets = connect_all(dcs, 1);
    sockets[1][0].close();
    TcpPeerExchange ex = exchange_of(sockets[0], 0, 1);
    CHECK_THROWS_AS(ex.exchange({}, {{1, in.data(), in.size()}}, 5), PeerLost);
  }
  SECTION("silent: no byte within the idle timeout") {
    auto sockets = connect_all(dcs, 1);
    TcpPeerExchange ex = exchange_of(sockets[0], 0, 1, /*idle_s=*/0.2);
    CHECK_THROWS_WITH(ex.exchange({}, {{1, in.data(), in.size()}}, 5),
                      Catch::Contains("no progress") && Catch::Contains("receiving from"));
  }
  SECTION("called off by the lighthouse: the wake-up") {
    auto sockets = connect_all(dcs, 1);
    Wakeup wake;
    wake.signal();
    TcpPeerExchange ex = exchange_of(sockets[0], 0, 1, 10.0, &wake);
    CHECK_THROWS_AS(ex.exchange({}, {{1, in.data(), in.size()}}, 5), WaitInterrupted);
  }
}
