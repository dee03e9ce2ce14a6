// The decoder's units (embedding, blocks, head) and model.recompute blocks: a model run through
// the recompute runner gives the loss and the gradients of the plain one bit for bit on the
// CPU, for both architectures, tied and untied, over accumulated micro-batches; its blocks run
// their forward a second time in backward; units and parameter names agree.
#include <torch/torch.h>
#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include "autoloco/model/decoder.hpp"
#include "autoloco/optim/flat_params.hpp"
#include "autoloco/train/recompute.hpp"
#include "autoloco/util/error.hpp"

using namespace autoloco;

namespace {

ModelConfig tiny(const std::string& arch, bool tied) {
  ModelConfig c;
  c.arch = arch;
  c.n_layer = 3;
  c.n_head = 4;
  c.n_kv_head = arch == "llama" ? 2 : 0;
  c.d_model = 32;
  c.seq_len = 16;
  c.vocab_size = 29;
  c.ffn_hidden = arch == "llama" ? 48 : 0;
  c.tie_embeddings = tied;
  return c;
}

struct Run {
  std::vector<double> losses;
  torch::Tensor grads;
};

// Two micro-batches accumulated into the flat gradient, as an inner step does.
Run run(const ModelConfig& c, std::shared_ptr<UnitRunner> runner) {
  torch::manual_seed(7);
  Decoder model = make_decoder(c);
  FlatParams params(*model);
  model->set_runner(std::move(runner));
  params.zero_grad();
  Run r;
  torch::manual_seed(8);
  for (int micro = 0; micro < 2; ++micro) {
    const torch::Tensor idx = torch::randint(0, c.vocab_size, {3, c.seq_len}, torch::kLong);
    const torch::Tensor targets = torch::randint(0, c.vocab_size, {3, c.seq_len}, torch::kLong);
    const torch::Tensor loss = lm_loss(model->forward(idx), targets);
    (loss * 0.5).backward();
    r.losses.push_back(loss.item<double>());
  }
  r.grads = params.grads().clone();
  return r;
}

// Counts the units a forward runs, then defers to the recompute runner.
class CountingRunner final : public UnitRunner {
 public:
  torch::Tensor run(DecoderImpl& model, int64_t unit, const torch::Tensor& x) override {
    units.push_back(unit);
    return inner->run(model, unit, x);
  }
  std::vector<int64_t> units;
  std::shared_ptr<UnitRunner> inner = make_recompute_runner(torch::kCPU, false);
};

}  // namespace

TEST_CASE("recompute blocks gives the gradients of recompute none bit for bit", "[recompute]") {
  for (const std::string arch : {"gpt2", "llama"}) {
    for (const bool tied : {true, false}) {
      INFO(arch << (tied ? " tied" : " untied"));
      const ModelConfig c = tiny(arch, tied);
      const Run plain = run(c, nullptr);
      const Run recomputed = run(c, make_recompute_runner(torch::kCPU, false));
      CHECK(plain.losses == recomputed.losses);
      CHECK(torch::equal(plain.grads, recomputed.grads));
      CHECK(plain.grads.abs().sum().item<double>() > 0.0);
    }
  }
}

TEST_CASE("a decoder runs its units in order through its runner", "[recompute]") {
  const ModelConfig c = tiny("llama", false);
  torch::manual_seed(1);
  Decoder model = make_decoder(c);
  auto counting = std::make_shared<CountingRunner>();
  const torch::Tensor idx = torch::randint(0, c.vocab_size, {2, 5}, torch::kLong);
  const torch::Tensor direct = model->forward(idx).detach();
  model->set_runner(counting);
  const torch::Tensor through = model->forward(idx);
  CHECK(torch::equal(direct, through.detach()));
  CHECK(counting->units == std::vector<int64_t>{0, 1, 2, 3, 4});
  CHECK(model->units() == 5);
  CHECK(model->head_unit() == 4);
  CHECK_FALSE(model->is_block(0));
  CHECK(model->is_block(3));
  CHECK_FALSE(model->is_block(4));
  // A block's forward is recorded once per call of the runner; backward runs it again inside
  // the recompute function, which calls the model directly.
  through.sum().backward();
  CHECK(counting->units.size() == 5);
}

TEST_CASE("every parameter name maps to its unit", "[recompute]") {
  torch::manual_seed(1);
  Decoder gpt = make_decoder(tiny("gpt2", false));
  CHECK(gpt->unit_of("wte.weight") == 0);
  CHECK(gpt->unit_of("wpe.weight") == 0);
  CHECK(gpt->unit_of("blocks.0.ln_1.weight") == 1);
  CHECK(gpt->unit_of("blocks.2.mlp.proj.bias") == 3);
  CHECK(gpt->unit_of("ln_f.bias") == 4);
  CHECK(gpt->unit_of("lm_head.weight") == 4);
  Decoder llama = make_decoder(tiny("llama", true));
  CHECK(llama->unit_of("embed_tokens.weight") == 0);
  CHECK(llama->unit_of("blocks.1.self_attn.q_proj.weight") == 2);
  CHECK(llama->unit_of("norm.weight") == 4);
  CHECK(llama->head_reads_embedding());
  // Every parameter of a model lies in one of its units.
  for (const auto& p : gpt->named_parameters()) {
    const int64_t u = gpt->unit_of(p.key());
    CHECK(u >= 0);
    CHECK(u < gpt->units());
  }
}

TEST_CASE("model.recompute names none or blocks", "[recompute]") {
  CHECK(parse_recompute("none") == Recompute::none);
  CHECK(parse_recompute("blocks") == Recompute::blocks);
  CHECK_THROWS_AS(parse_recompute("all"), ConfigError);
}
