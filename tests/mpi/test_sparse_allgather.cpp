// SparseLoCo's inter-dc exchange (sparse_allgather.hpp) over 3 and 4 dcs: every dc receives the
// same bytes from every dc and ends with the same bits, which equal a single process's sum of
// the decoded contributions in dc order; what a dc sends plus what it keeps is what it had
// (fp32 values: exactly); the scalars sum exactly and the bytes counted are the bytes sent.
#include <mpi.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "../support/dc_layout.hpp"
#include "autoloco/comm/mpi_peer_exchange.hpp"
#include "autoloco/comm/sparse_allgather.hpp"

using namespace autoloco;
using test::Layout;
using test::same_bits_everywhere;

namespace {

std::vector<float> contribution(size_t n, int dc) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    const float x = std::sin(0.37F * static_cast<float>(i) + 1.3F * static_cast<float>(dc));
    v[i] = (i % 97 == 5 ? 40.0F : 1.0F) * x / static_cast<float>(1 + dc);
  }
  return v;
}

// True when every rank holds the same bytes in `bytes`.
bool same_bytes_everywhere(const std::vector<std::byte>& bytes) {
  std::vector<float> as_floats((bytes.size() + 3) / 4, 0.0F);
  if (!bytes.empty()) std::memcpy(as_floats.data(), bytes.data(), bytes.size());
  return same_bits_everywhere(as_floats);
}

void check_sparse(const SparseCodec& codec, size_t n) {
  Layout layout(1);  // a dc per rank
  const int dcs = layout.topo.num_dcs;
  MpiPeerExchange peers(layout.inter.handle());
  SparseAllgather exchange(peers);
  const std::vector<float> mine = contribution(n, layout.topo.dc);
  std::vector<float> payload = mine;
  std::vector<float> residual(n);
  std::vector<double> scalars = {1.0 + layout.topo.dc, 0.5};
  const LinkTraffic t =
      exchange.run(payload.data(), n, codec, scalars.data(), scalars.size(), 42, residual.data());
  INFO(codec.describe() << ", n = " << n << ", " << dcs << " dcs");
  CHECK(same_bits_everywhere(payload));
  for (int r = 0; r < dcs; ++r)
    CHECK(same_bytes_everywhere(exchange.received()[static_cast<size_t>(r)]));

  // A single process's sum: each dc's contribution encoded as that dc encodes it, decoded and
  // added in dc order.
  std::vector<float> reference(n, 0.0F);
  std::vector<std::byte> wire(codec.encoded_bytes(n));
  for (int d = 0; d < dcs; ++d) {
    const std::vector<float> v = contribution(n, d);
    encode_sparse(codec, v.data(), n, wire.data(), piece_stream(42, static_cast<uint64_t>(d) + 1));
    decode_add_sparse(codec, wire.data(), n, reference.data());
  }
  CHECK(std::memcmp(reference.data(), payload.data(), n * sizeof(float)) == 0);

  // Sent plus kept is what the dc had.
  std::vector<float> sent(n);
  decode_sparse(codec, exchange.received()[static_cast<size_t>(layout.topo.dc)].data(), n,
                sent.data());
  size_t kept = 0;
  for (size_t i = 0; i < n; ++i) {
    kept += sent[i] != 0.0F ? 1 : 0;
    if (codec.format == WireFormat::fp32) {
      CHECK(sent[i] + residual[i] == mine[i]);
    } else {
      CHECK(residual[i] == mine[i] - sent[i]);
    }
  }
  size_t most = 0;
  for (size_t begin = 0; begin < n; begin += codec.chunk)
    most += codec.kept(std::min(codec.chunk, n - begin));
  // fp32 sends every kept value as it is; a quantised one may round to zero.
  if (codec.format == WireFormat::fp32) {
    CHECK(kept == most);
  } else {
    CHECK(kept <= most);
  }

  CHECK(scalars[0] == dcs * (dcs + 1) / 2.0);
  CHECK(scalars[1] == 0.5 * dcs);
  const auto message = static_cast<int64_t>(codec.encoded_bytes(n) + 2 * sizeof(double));
  CHECK(t.sent_bytes == (dcs - 1) * message);
  CHECK(t.all_bytes == dcs * (dcs - 1) * message);
  CHECK(t.phases == (dcs > 1 ? 1 : 0));
}

void check_all() {
  for (const WireFormat f : {WireFormat::fp32, WireFormat::int8, WireFormat::int2}) {
    for (const size_t n : {size_t{1}, size_t{100}, size_t{4099}}) {
      check_sparse(SparseCodec{f, 64, 0.05}, n);
      check_sparse(SparseCodec{f, 4096, 0.02, /*stochastic=*/true}, n);
    }
  }
}

}  // namespace

TEST_CASE("sparse all-gather over 3 dcs: same bits everywhere, equal to one process's sum",
          "[np=3][sparse]") {
  check_all();
}

TEST_CASE("sparse all-gather over 4 dcs: same bits everywhere, equal to one process's sum",
          "[np=4][sparse]") {
  check_all();
}
