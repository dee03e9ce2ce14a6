// Unit tests of Muon: the Newton-Schulz output is close to orthogonal and keeps the singular
// vectors, FlatMuon equals Muon written out per parameter with torch ops (and AdamW from torch
// on the rest), the matrices it takes, and its state round trip.
#include <torch/torch.h>
#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "../support/small_model.hpp"
#include "autoloco/model/decoder.hpp"
#include "autoloco/model/model_specs.hpp"
#include "autoloco/optim/flat_params.hpp"
#include "autoloco/optim/muon.hpp"
#include "autoloco/util/error.hpp"

using autoloco::FlatMuon;
using autoloco::FlatParams;
using autoloco::MuonOptions;
using autoloco::NewtonSchulzScratch;

namespace {

// A rows x cols matrix (rows <= cols) with singular values `sv` and random singular vectors.
struct Conditioned {
  torch::Tensor u;
  torch::Tensor v;
  torch::Tensor matrix;
};

Conditioned conditioned(int64_t rows, int64_t cols, const torch::Tensor& sv, uint64_t seed) {
  auto gen = torch::make_generator<torch::CPUGeneratorImpl>(seed);
  const auto f64 = torch::TensorOptions().dtype(torch::kDouble);
  const torch::Tensor u = std::get<0>(torch::linalg_qr(torch::randn({rows, rows}, gen, f64)));
  const torch::Tensor v = std::get<0>(torch::linalg_qr(torch::randn({cols, rows}, gen, f64)));
  return {u, v, u.matmul(torch::diag(sv)).matmul(v.t())};
}

torch::Tensor orthogonalised(const torch::Tensor& m, int64_t steps = 5) {
  NewtonSchulzScratch s(m.size(0), m.size(1), m.options());
  s.x.copy_(m);
  autoloco::newton_schulz(s, steps);
  return s.x.clone();
}

// Muon written out from ALGORITHMS.md §5 with allocating torch ops, one matrix at a time.
torch::Tensor reference_ns(torch::Tensor x, int64_t steps) {
  const bool tall = x.size(0) > x.size(1);
  if (tall) x = x.t();
  x = x / (x.norm() + 1e-7);
  for (int64_t i = 0; i < steps; ++i) {
    const torch::Tensor a = x.matmul(x.t());
    x = autoloco::kNsA * x + (autoloco::kNsB * a + autoloco::kNsC * a.matmul(a)).matmul(x);
  }
  return tall ? x.t() : x;
}

autoloco::Decoder seeded(const autoloco::ModelConfig& c) {
  torch::manual_seed(7);
  return autoloco::make_decoder(c);
}

void backward(autoloco::Decoder& model, const autoloco::ModelConfig& c, int64_t seed) {
  auto gen = torch::make_generator<torch::CPUGeneratorImpl>(static_cast<uint64_t>(seed));
  const torch::Tensor idx = torch::randint(0, c.vocab_size, {3, c.seq_len}, gen, torch::kLong);
  const torch::Tensor targets = torch::randint(0, c.vocab_size, {3, c.seq_len}, gen, torch::kLong);
  autoloco::lm_loss(model->forward(idx), targets).backward();
}

}  // namespace

TEST_CASE("Newton-Schulz puts a random matrix's singular values in the quintic's band", "[muon]") {
  // The quintic's band after 5 steps: every singular value of at least 1.5e-3 (of the
  // unit-Frobenius input) lands in [0.680, 1.2024]; docs/methods.md.
  for (const auto& [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{{64, 128}, {32, 96}}) {
    torch::manual_seed(rows + cols);
    const torch::Tensor x = orthogonalised(torch::randn({rows, cols}));
    const torch::Tensor sv = torch::linalg_svdvals(x.to(torch::kDouble));
    INFO(rows << " x " << cols << ": singular values in [" << sv.min().item<double>() << ", "
              << sv.max().item<double>() << "]");
    CHECK(sv.min().item<double>() >= 0.68);
    CHECK(sv.max().item<double>() <= 1.21);
  }
}

TEST_CASE("Newton-Schulz keeps an ill-conditioned matrix's singular vectors", "[muon]") {
  // Singular values from 1 down to 1e-4: the upper ones land in the band; the smallest only grow
  // (a^5 = 485 at most), so O = U f(S) V^T with f increasing and no direction mixed in.
  const int64_t rows = 48;
  const int64_t cols = 80;
  const torch::Tensor sv = torch::logspace(0, -4, rows, 10, torch::kDouble);
  const Conditioned c = conditioned(rows, cols, sv, 5);
  const torch::Tensor x = orthogonalised(c.matrix.to(torch::kFloat)).to(torch::kDouble);
  const torch::Tensor f = c.u.t().matmul(x).matmul(c.v);  // diagonal if the vectors are kept
  const torch::Tensor diagonal = f.diagonal();
  const double off = (f - torch::diag(diagonal)).abs().max().item<double>();
  INFO("largest off-diagonal " << off);
  CHECK(off < 2e-3);
  const double frobenius = sv.norm().item<double>();
  for (int64_t i = 0; i < rows; ++i) {
    const double input = sv[i].item<double>() / frobenius;
    const double out = diagonal[i].item<double>();
    INFO("singular value " << i << ": " << input << " -> " << out);
    // fp32 rounding moves the edge a little: values near 1.5e-3 may land on either side.
    if (input >= 1.6e-3) {
      CHECK(out >= 0.68);
      CHECK(out <= 1.21);
    } else if (input <= 1.4e-3) {
      CHECK(out > input);
      CHECK(out < 0.68);
    }
  }
}

TEST_CASE("Newton-Schulz refuses a tall matrix and keeps a zero one at zero", "[muon]") {
  NewtonSchulzScratch tall(8, 4, torch::TensorOptions().dtype(torch::kFloat));
  CHECK_THROWS_AS(autoloco::newton_schulz(tall, 5), autoloco::Error);
  NewtonSchulzScratch zero(4, 8, torch::TensorOptions().dtype(torch::kFloat));
  zero.x.zero_();
  autoloco::newton_schulz(zero, 5);
  CHECK(zero.x.abs().max().item<float>() == 0.0F);
}

TEST_CASE("muon_matrices takes the blocks' 2-D weights of both architectures", "[muon]") {
  for (const std::string arch : {"gpt2", "llama"}) {
    autoloco::ModelConfig c = autoloco::test::small_model_config();
    c.arch = arch;
    c.tie_embeddings = arch == "gpt2";
    autoloco::Decoder model = seeded(c);
    FlatParams flat(*model);
    const auto matrices = autoloco::muon_matrices(flat.slices(), autoloco::block_parameters(c));
    std::map<int64_t, std::string> name_at;
    for (const auto& s : flat.slices())
      name_at[s.offset] = s.name;
    int64_t expected = 0;
    for (const auto& s : flat.slices())
      expected += s.shape.size() == 2 && s.name.rfind("blocks.", 0) == 0 ? 1 : 0;
    INFO(arch);
    CHECK(static_cast<int64_t>(matrices.size()) == expected);
    CHECK(expected >= 4 * c.n_layer);
    for (const auto& m : matrices) {
      INFO(name_at[m.offset]);
      CHECK(name_at[m.offset].rfind("blocks.", 0) == 0);
      CHECK(m.decayed);
    }
  }
}

TEST_CASE("FlatMuon equals Muon written out per matrix, with torch's AdamW on the rest", "[muon]") {
  autoloco::ModelConfig c = autoloco::test::small_model_config();
  const double lr = 2e-2;
  const double ratio = 1.5;
  MuonOptions o;
  o.momentum = 0.9;
  o.nesterov = GENERATE(true, false);
  o.ns_steps = 5;
  o.lr_ratio = ratio;
  o.adamw = {0.9, 0.95, 1e-8, 0.1, false};

  autoloco::Decoder ours = seeded(c);
  FlatParams flat(*ours);
  FlatMuon muon(flat.view(), autoloco::muon_matrices(flat.slices(), autoloco::block_parameters(c)),
                o);

  // The reference: the same initial model; Muon by hand on block matrices, torch AdamW on the
  // rest with decay as FlatParams decides it.
  autoloco::Decoder theirs = seeded(c);
  std::vector<torch::Tensor> decayed;
  std::vector<torch::Tensor> others;
  std::vector<std::pair<torch::Tensor, torch::Tensor>> matrices;  // parameter, momentum
  for (const auto& item : theirs->named_parameters()) {
    const torch::Tensor& p = item.value();
    if (p.dim() == 2 && item.key().rfind("blocks.", 0) == 0) {
      matrices.emplace_back(p, torch::zeros_like(p));
    } else {
      (autoloco::is_decayed(item.key(), p) ? decayed : others).push_back(p);
    }
  }
  auto group = [&](double wd) {
    return std::make_unique<torch::optim::AdamWOptions>(
        torch::optim::AdamWOptions(lr).betas({0.9, 0.95}).eps(1e-8).weight_decay(wd));
  };
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decayed, group(0.1));
  groups.emplace_back(others, group(0.0));
  torch::optim::AdamW adamw(std::move(groups));

  for (int64_t step = 0; step < 4; ++step) {
    flat.zero_grad();
    backward(ours, c, 100 + step);
    muon.step(lr);

    adamw.zero_grad();
    for (auto& [p, b] : matrices)
      p.mutable_grad() = torch::Tensor();
    backward(theirs, c, 100 + step);
    adamw.step();
    torch::NoGradGuard no_grad;
    for (auto& [p, b] : matrices) {
      const torch::Tensor g = p.grad();
      b.mul_(o.momentum).add_(g);
      const torch::Tensor n = o.nesterov ? g + o.momentum * b : b;
      const double muon_lr = lr * ratio;
      p.mul_(1.0 - muon_lr * 0.1);
      p.sub_(muon_lr * 0.2 * std::sqrt(static_cast<double>(std::max(p.size(0), p.size(1)))) *
             reference_ns(n, 5));
    }
  }
  CHECK(muon.step_count() == 4);
  const auto mine = ours->named_parameters();
  for (const auto& item : theirs->named_parameters()) {
    torch::Tensor expected = item.value();
    torch::Tensor got = mine[item.key()];
    // The key third of the qkv bias has no gradient but rounding noise (softmax ignores a shift
    // of every key's score alike), which AdamW's normalised step turns into steps of random
    // sign in both implementations: only the query and value thirds compare.
    if (item.key().find("qkv.bias") != std::string::npos) {
      const int64_t d = c.d_model;
      expected = torch::cat({expected.narrow(0, 0, d), expected.narrow(0, 2 * d, d)});
      got = torch::cat({got.narrow(0, 0, d), got.narrow(0, 2 * d, d)});
    }
    const double diff = (got - expected).abs().max().item<double>();
    const double scale = expected.abs().max().item<double>();
    INFO(item.key() << " nesterov " << o.nesterov << " max diff " << diff << " scale " << scale);
    CHECK(diff <= 1e-5 * scale);
  }
}

TEST_CASE("FlatMuon's state round-trips: a restored optimizer steps bit for bit alike", "[muon]") {
  autoloco::ModelConfig c = autoloco::test::small_model_config();
  MuonOptions o;
  autoloco::Decoder a = seeded(c);
  FlatParams fa(*a);
  FlatMuon ma(fa.view(), autoloco::muon_matrices(fa.slices(), autoloco::block_parameters(c)), o);
  for (int64_t step = 0; step < 2; ++step) {
    fa.zero_grad();
    backward(a, c, step);
    ma.step(1e-2);
  }
  // Muon's momentum lives in exp_avg on the matrices, AdamW's moments elsewhere.
  const auto& first = ma.matrices().front();
  CHECK(ma.exp_avg().narrow(0, first.offset, first.rows * first.cols).abs().sum().item<double>() >
        0.0);
  CHECK(
      ma.exp_avg_sq().narrow(0, first.offset, first.rows * first.cols).abs().sum().item<double>() ==
      0.0);

  autoloco::Decoder b = seeded(c);
  FlatParams fb(*b);
  FlatMuon mb(fb.view(), autoloco::muon_matrices(fb.slices(), autoloco::block_parameters(c)), o);
  {
    torch::NoGradGuard no_grad;
    fb.values().copy_(fa.values());
  }
  mb.set_state(ma.step_count(), ma.exp_avg().clone(), ma.exp_avg_sq().clone());
  CHECK(mb.step_count() == 2);
  for (FlatParams* f : {&fa, &fb}) {
    f->zero_grad();
  }
  backward(a, c, 9);
  backward(b, c, 9);
  ma.step(1e-2);
  mb.step(1e-2);
  CHECK(torch::equal(fa.values(), fb.values()));
  CHECK(torch::equal(ma.exp_avg(), mb.exp_avg()));
  CHECK(torch::equal(ma.exp_avg_sq(), mb.exp_avg_sq()));
  CHECK_THROWS_AS(mb.set_state(1, torch::zeros({3}), torch::zeros({3})), autoloco::Error);
}
