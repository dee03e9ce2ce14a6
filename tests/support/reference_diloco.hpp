// DiLoCo written out in one process, as the mpi suites check the trainer against it: 2 dcs x 2
// members, the same streams, the same initial parameters, the trainer's inner steps, and the
// outer Nesterov step of ALGORITHMS.md. With tau > 0 it is Streaming DiLoCo's overlap
// (ALGORITHMS.md §4, one fragment): a round's averaged Δ lands tau inner steps after the round's
// end, moves the anchor, and the replicas become alpha replica + (1 - alpha) anchor; the run's
// last round lands at once.
//
// The outer step is written out from ALGORITHMS.md (ReferenceOuter::written_out: an independent
// check, equal to the trainer up to fp32 rounding) or taken from the library's outer optimizer
// (ReferenceOuter::library: every operation the blocking sync performs, in its order, so that
// the trainer with tau = 0 must equal it bit for bit).
#pragma once

#include <torch/torch.h>

#include <memory>
#include <optional>
#include <stdexcept>
#include <vector>

#include "autoloco/comm/sparse_codec.hpp"
#include "autoloco/config/config.hpp"
#include "autoloco/data/dataset.hpp"
#include "autoloco/data/stream.hpp"
#include "autoloco/model/gpt.hpp"
#include "autoloco/model/model_specs.hpp"
#include "autoloco/optim/adamw.hpp"
#include "autoloco/optim/flat_params.hpp"
#include "autoloco/optim/fragment_plan.hpp"
#include "autoloco/optim/lr_schedule.hpp"
#include "autoloco/optim/muon.hpp"
#include "autoloco/optim/outer_optimizer.hpp"
#include "autoloco/optim/round_stats.hpp"
#include "autoloco/train/outer_sync.hpp"

namespace autoloco::test {

struct ReferenceDc {
  Decoder model{nullptr};
  std::unique_ptr<FlatParams> params;
  std::unique_ptr<InnerOptimizer> optimizer;  // the library's, as inner.optimizer names it
  std::vector<std::unique_ptr<BatchStream>> members;
};

enum class ReferenceOuter { written_out, library };

struct ReferenceResult {
  torch::Tensor anchor;
  std::vector<torch::Tensor> replicas;  // per dc
  int64_t rounds = 0;
};

// SparseLoCo's wire written out for 2 dcs x 2 members (nearest rounding): member m of each dc
// takes shard m of its dc's Δ (zero-padded to ⌈n/2⌉, as the hierarchical all-reduce), adds its
// decayed residual, sends the codec's top-k encoding and keeps what it left out; the mean is
// the dcs' decodings summed in dc order, over 2.
struct ReferenceSparseWire {
  ReferenceSparseWire(const OuterConfig& outer, int64_t numel)
      : codec(sparse_codec(wire_codec(outer))),
        beta(outer.error_feedback_beta),
        n(numel),
        shard((numel + 1) / 2),
        residual(4, torch::zeros({(numel + 1) / 2})) {}

  torch::Tensor mean(const torch::Tensor& delta0, const torch::Tensor& delta1) {
    torch::Tensor sum = torch::zeros({2 * shard});
    std::vector<std::byte> bytes(codec.encoded_bytes(static_cast<size_t>(shard)));
    for (int d = 0; d < 2; ++d) {
      const torch::Tensor padded =
          torch::constant_pad_nd(d == 0 ? delta0 : delta1, {0, 2 * shard - n});
      for (int m = 0; m < 2; ++m) {
        torch::Tensor& e = residual[static_cast<size_t>(2 * d + m)];
        e.mul_(beta);
        const torch::Tensor message = padded.narrow(0, m * shard, shard) + e;
        encode_sparse(codec, message.data_ptr<float>(), static_cast<size_t>(shard), bytes.data(),
                      0);
        torch::Tensor decoded = torch::empty({shard});
        decode_sparse(codec, bytes.data(), static_cast<size_t>(shard), decoded.data_ptr<float>());
        e = message - decoded;
        sum.narrow(0, m * shard, shard).add_(decoded);
      }
    }
    return sum.narrow(0, 0, n) / 2.0;
  }

  SparseCodec codec;
  double beta;
  int64_t n;
  int64_t shard;
  std::vector<torch::Tensor> residual;  // per dc and member
};

// One inner step of a dc: the members' mean gradient, clipping, AdamW.
inline void reference_inner_step(ReferenceDc& dc, const Config& config, int64_t step) {
  torch::Tensor sum = torch::zeros_like(dc.params->grads());
  for (auto& stream : dc.members) {
    dc.params->zero_grad();
    Batch b = stream->next();
    (lm_loss(dc.model->forward(b.inputs), b.targets) / 1.0).backward();
    sum += dc.params->grads();
  }
  {
    torch::NoGradGuard no_grad;
    dc.params->grads().copy_(sum / 2.0);
  }
  clip_grad_norm(*dc.params, config.inner.grad_clip);
  dc.optimizer->step(inner_lr(config.inner, step, config.run.steps));
}

// Fragments (outer.fragments P, fixed interval.H): fragment p > 0 syncs floor(p H / P) steps into
// each cycle of H steps and fragment 0 at its end; the run's end syncs every fragment that trained
// since its last sync, fragment 0 last. A sync started while another is in flight lands that one
// first. The plan (which parameters each fragment holds) is the library's; its unit tests check it.
inline ReferenceResult reference_diloco(const Config& config, int64_t steps, int64_t tau = 0,
                                        double alpha = 0.0,
                                        ReferenceOuter outer = ReferenceOuter::written_out) {
  const TokenDataset data(config.data.train, config.model.vocab_size, "data.train");
  torch::manual_seed(static_cast<uint64_t>(config.run.seed));
  Decoder init = make_decoder(config.model);
  FlatParams init_params(*init);
  const int64_t P = config.outer.fragments;
  const FragmentPlan plan =
      P == 1 ? FragmentPlan(init_params.numel()) : FragmentPlan(init_params.slices(), P);
  ReferenceResult out;
  torch::Tensor& anchor = out.anchor;
  anchor = init_params.values().detach().clone();
  torch::Tensor momentum = torch::zeros_like(anchor);
  std::vector<ReferenceDc> dcs(2);
  for (int d = 0; d < 2; ++d) {
    dcs[d].model = autoloco::make_decoder(config.model);
    dcs[d].params = std::make_unique<FlatParams>(*dcs[d].model);
    {
      torch::NoGradGuard no_grad;
      dcs[d].params->values().copy_(anchor);
    }
    dcs[d].optimizer = make_inner_optimizer(
        config.inner, dcs[d].params->view(),
        muon_matrices(dcs[d].params->slices(), block_parameters(config.model)));
    for (int m = 0; m < 2; ++m) {
      dcs[d].members.push_back(std::make_unique<BatchStream>(
          data, config.model.seq_len, config.data.batch_size,
          static_cast<uint64_t>(config.run.seed), d, m, std::vector<size_t>{}));
    }
  }
  torch::NoGradGuard no_grad;
  // The sync in flight: its fragment, averaged Δ, due step and statistics.
  struct InFlight {
    size_t fragment = 0;
    torch::Tensor mean_delta;
    int64_t due = 0;
    RoundStats stats;
  };
  std::optional<InFlight> in_flight;
  std::optional<ReferenceSparseWire> sparse;
  if (config.outer.wire_topk > 0.0) {
    if (P != 1) throw std::logic_error("reference_diloco: the sparse wire with one fragment only");
    sparse.emplace(config.outer, anchor.numel());
  }
  std::vector<std::unique_ptr<OuterOptimizer>> library;
  for (int64_t p = 0; p < P; ++p)
    library.push_back(make_outer_optimizer(config.outer, config.interval.H));
  const auto land = [&] {
    InFlight f = *in_flight;  // the library's step works in f.mean_delta
    in_flight.reset();
    torch::Tensor anchor_p = plan.gather(anchor, f.fragment).clone();
    if (outer == ReferenceOuter::library) {
      library[f.fragment]->step(anchor_p, f.mean_delta, f.stats);
    } else {
      const double mu = config.outer.momentum;
      const torch::Tensor m = mu * plan.gather(momentum, f.fragment) + f.mean_delta;
      plan.scatter(m, f.fragment, momentum);
      anchor_p = anchor_p - config.outer.lr * (f.mean_delta + mu * m);
    }
    plan.scatter(anchor_p, f.fragment, anchor);
    for (ReferenceDc& dc : dcs) {
      torch::Tensor& replica = dc.params->values();
      if (alpha == 0.0) {
        plan.scatter(anchor_p, f.fragment, replica);
      } else {
        plan.mix(anchor_p, f.fragment, alpha, replica);
      }
    }
    if (f.fragment == 0) ++out.rounds;
  };
  const int64_t H = config.interval.H;
  int64_t cycle_start = 0;
  std::vector<int64_t> last_sync(static_cast<size_t>(P), 0);
  for (int64_t step = 1; step <= steps; ++step) {
    for (ReferenceDc& dc : dcs) {
      torch::AutoGradMode grad(true);
      reference_inner_step(dc, config, step - 1);
    }
    if (in_flight && step >= in_flight->due) land();
    const bool last = step == steps;
    for (int64_t k = 1; k <= P; ++k) {
      const int64_t f = k % P;
      const int64_t offset = f == 0 ? H : f * H / P;
      const bool in_turn =
          last_sync[static_cast<size_t>(f)] <= cycle_start && step - cycle_start >= offset;
      if (!in_turn && !(last && last_sync[static_cast<size_t>(f)] < step)) continue;
      if (in_flight) land();
      const auto p = static_cast<size_t>(f);
      const torch::Tensor a = plan.gather(anchor, p);
      InFlight sync;
      sync.fragment = p;
      if (sparse) {
        sync.mean_delta = sparse->mean(a - plan.gather(dcs[0].params->values(), p),
                                       a - plan.gather(dcs[1].params->values(), p));
      } else {
        sync.mean_delta = ((a - plan.gather(dcs[0].params->values(), p)) +
                           (a - plan.gather(dcs[1].params->values(), p))) /
                          2.0;
      }
      sync.due = step + tau;
      sync.stats.step = step;
      sync.stats.H = step - last_sync[p];
      in_flight = sync;
      last_sync[p] = step;
      if (f == 0) cycle_start = step;
      if (tau == 0 || last) land();
    }
  }
  for (ReferenceDc& dc : dcs)
    out.replicas.push_back(dc.params->values().clone());
  return out;
}

}  // namespace autoloco::test
