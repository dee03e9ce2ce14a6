// The inter-dc collectives (ring, compressed, sparse) over TCP stripes (tcp_peer_exchange.hpp),
// as the elastic mode runs them: every dc ends with the same bits, and the sums are the sums.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "autoloco/comm/stripe_connections.hpp"
#include "autoloco/comm/tcp_peer_exchange.hpp"
#include "autoloco/comm/wan_link.hpp"

using namespace autoloco;

namespace {

struct Group {
  std::vector<std::unique_ptr<StripeConnections>> conn;
  std::vector<std::vector<Socket>> sockets;

  explicit Group(const std::vector<int>& ids, int64_t quorum) {
    std::vector<Endpoint> eps;
    for (const int id : ids) {
      conn.push_back(std::make_unique<StripeConnections>(
          StripeConnections::Identity{id, 0, "i", "collectives-test-key-0123"},
          Endpoint{"127.0.0.1", 0}));
      eps.push_back({"127.0.0.1", conn.back()->port()});
    }
    sockets.resize(ids.size());
    std::vector<std::thread> threads;
    for (size_t i = 0; i < ids.size(); ++i) {
      threads.emplace_back([&, i] {
        sockets[i] = conn[i]->connect_group(quorum, ids, eps, deadline_in(10), nullptr);
      });
    }
    for (auto& t : threads)
      t.join();
  }
};

std::vector<float> contribution(size_t n, int dc) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = std::sin(0.37F * static_cast<float>(i) + static_cast<float>(dc)) * (1.0F + dc);
  return v;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("inter-dc collectives over TCP: every dc ends with the same bits of the sum",
          "[elastic]") {
  const std::vector<int> ids = {1, 4, 6};
  Group group(ids, 9);
  const size_t n = 5003;
  for (const std::string format : {"fp32", "bf16", "int8", "int4"}) {
    for (const double topk : {0.0, 0.25}) {
      if (topk > 0 && (format == "fp32" || format == "bf16")) continue;
      WireCodec codec;
      codec.format = parse_wire_format(format);
      codec.topk = topk;
      std::vector<std::vector<float>> out(ids.size());
      std::vector<std::vector<double>> scalars(ids.size());
      std::vector<std::thread> threads;
      for (size_t r = 0; r < ids.size(); ++r) {
        threads.emplace_back([&, r] {
          std::vector<TcpPeerExchange::Peer> peers;
          for (size_t j = 0; j < ids.size(); ++j)
            peers.push_back(
                {j == r ? nullptr : &group.sockets[r][j], "dc " + std::to_string(ids[j])});
          TcpPeerExchange ex(static_cast<int>(r), peers, 9, 10.0, nullptr);
          WanModel model;
          WanLink link(ex, model);
          out[r] = contribution(n, ids[r]);
          scalars[r] = {1.0, static_cast<double>(ids[r])};
          link.allreduce(out[r].data(), n, codec, scalars[r].data(), 2, /*stream=*/3);
        });
      }
      for (auto& t : threads)
        t.join();
      INFO(format << " top-k " << topk);
      for (size_t r = 1; r < ids.size(); ++r) {
        CHECK(same_bits(out[r], out[0]));
        CHECK(scalars[r] == scalars[0]);
      }
      CHECK(scalars[0][0] == 3.0);
      CHECK(scalars[0][1] == 11.0);
      if (format == "fp32") {
        std::vector<double> exact(n, 0.0);
        for (const int id : ids) {
          const std::vector<float> c = contribution(n, id);
          for (size_t i = 0; i < n; ++i)
            exact[i] += static_cast<double>(c[i]);
        }
        double worst = 0.0;
        for (size_t i = 0; i < n; ++i)
          worst = std::max(worst, std::abs(exact[i] - static_cast<double>(out[0][i])));
        CHECK(worst < 1e-5);
      }
    }
  }
}
