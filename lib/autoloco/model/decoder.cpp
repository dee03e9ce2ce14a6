// The Decoder interface's shared checks, the architecture factory and the loss.
#include "autoloco/model/decoder.hpp"

#include <fmt/format.h>

#include "autoloco/model/gpt.hpp"
#include "autoloco/model/llama.hpp"
#include "autoloco/model/model_specs.hpp"
#include "autoloco/util/error.hpp"

namespace autoloco {

DecoderImpl::DecoderImpl(const ModelConfig& config) : config_(config) {
  const ModelConfig& c = config;
  if (c.n_layer <= 0 || c.n_head <= 0 || c.d_model <= 0 || c.seq_len <= 0 || c.vocab_size <= 0) {
    throw ConfigError("model: n_layer, n_head, d_model, seq_len and vocab_size must be positive");
  }
  if (c.d_model % c.n_head != 0) {
    throw ConfigError(
        fmt::format("model.n_head ({}) must divide model.d_model ({})", c.n_head, c.d_model));
  }
}

void DecoderImpl::check_length(const torch::Tensor& idx) const {
  if (idx.size(1) > config_.seq_len) {
    throw Error(fmt::format("the model's forward: a sequence of {} tokens exceeds model.seq_len {}",
                            idx.size(1), config_.seq_len));
  }
}

torch::Tensor DecoderImpl::forward(const torch::Tensor& idx) {
  check_length(idx);
  torch::Tensor x = idx;
  for (int64_t unit = 0; unit < units(); ++unit)
    x = runner_ ? runner_->run(*this, unit, x) : run_unit(unit, x);
  return x;
}

torch::Tensor DecoderImpl::run_unit(int64_t unit, const torch::Tensor& x) {
  if (unit == 0) return embed(x);
  if (unit == head_unit()) return head(x);
  return block(unit - 1, x);
}

int64_t DecoderImpl::unit_of(const std::string& name) const {
  return unit_of_parameter(config_, name);
}

Decoder make_decoder(const ModelConfig& config) {
  // Typed as the base: ModuleHolder's forwarding constructor would take a derived pointer for an
  // argument to construct the (abstract) DecoderImpl from.
  std::shared_ptr<DecoderImpl> impl;
  if (config.arch == "llama") impl = std::make_shared<LlamaImpl>(config);
  if (config.arch == "gpt2") impl = std::make_shared<GPTImpl>(config);
  if (impl) return Decoder(std::move(impl));
  throw ConfigError(fmt::format("config key model.arch: '{}' is not an architecture: gpt2 or llama",
                                config.arch));
}

torch::Tensor lm_loss(const torch::Tensor& logits, const torch::Tensor& targets) {
  const int64_t vocab = logits.size(-1);
  return torch::nn::functional::cross_entropy(logits.reshape({-1, vocab}), targets.reshape({-1}));
}

int64_t parameter_count(const torch::nn::Module& model) {
  int64_t n = 0;
  for (const auto& p : model.parameters())
    n += p.numel();
  return n;
}

}  // namespace autoloco
