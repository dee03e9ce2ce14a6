// The one small interface every architecture (model.arch) implements: token ids in, logits
// out, over named parameters that FlatParams lays into one buffer. The Trainer, the outer sync,
// fragments, checkpoints and AdLoCo see only this and the names; the architectures are in
// gpt.hpp and llama.hpp, and make_decoder picks one from the config.
//
// A decoder is a sequence of units (DESIGN.md, Seams): unit 0 the embedding, units 1..n_layer
// the transformer blocks, unit n_layer + 1 the final norm and the head. forward runs them in
// order through a UnitRunner when one is set, so that activation recomputation and parameter
// sharding (train/) wrap each unit without the architectures knowing of either.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>

#include "autoloco/config/config.hpp"

namespace autoloco {

class DecoderImpl;

// Runs a decoder's units. The plain path calls model.run_unit(unit, x); a runner may instead
// wrap the call in an autograd function of its own (recompute, gathered parameters).
class UnitRunner {
 public:
  virtual ~UnitRunner() = default;
  virtual torch::Tensor run(DecoderImpl& model, int64_t unit, const torch::Tensor& x) = 0;
};

class DecoderImpl : public torch::nn::Module {
 public:
  // idx: int64 [B, T] with T <= seq_len; returns logits [B, T, vocab_size].
  torch::Tensor forward(const torch::Tensor& idx);

  // One unit on its input: token ids for the embedding, hidden states [B, T, d_model] for a
  // block and the head. The input's length sets the positions (rotary tables, learned ones).
  torch::Tensor run_unit(int64_t unit, const torch::Tensor& x);

  int64_t units() const { return config_.n_layer + 2; }
  int64_t head_unit() const { return config_.n_layer + 1; }
  bool is_block(int64_t unit) const { return unit >= 1 && unit <= config_.n_layer; }
  // The unit a parameter of this decoder belongs to, by its name (model_specs.hpp).
  int64_t unit_of(const std::string& name) const;
  // A tied head reads the embedding unit's table too.
  bool head_reads_embedding() const { return config_.tie_embeddings; }

  // nullptr: units run directly.
  void set_runner(std::shared_ptr<UnitRunner> runner) { runner_ = std::move(runner); }
  UnitRunner* runner() const { return runner_.get(); }

  const ModelConfig& config() const { return config_; }

 protected:
  // Throws ConfigError when a size is not positive or n_head does not divide d_model.
  explicit DecoderImpl(const ModelConfig& config);

  virtual torch::Tensor embed(const torch::Tensor& idx) = 0;
  virtual torch::Tensor block(int64_t i, const torch::Tensor& x) = 0;
  virtual torch::Tensor head(const torch::Tensor& x) = 0;

 private:
  // Throws Error when idx is longer than the context.
  void check_length(const torch::Tensor& idx) const;

  ModelConfig config_;
  std::shared_ptr<UnitRunner> runner_;
};
TORCH_MODULE(Decoder);

// The architecture model.arch names, initialised (the caller seeds torch::manual_seed).
Decoder make_decoder(const ModelConfig& config);

// Mean cross-entropy in nats of logits [B, T, V] against targets int64 [B, T].
torch::Tensor lm_loss(const torch::Tensor& logits, const torch::Tensor& targets);

// Every trainable scalar of a built model, counted once (a tied head adds nothing).
int64_t parameter_count(const torch::nn::Module& model);

}  // namespace autoloco
