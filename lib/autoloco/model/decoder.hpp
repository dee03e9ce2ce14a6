// The one small interface every architecture (model.arch) implements: token ids in, logits
// out, over named parameters that FlatParams lays into one buffer. The Trainer, the outer sync,
// fragments, checkpoints and AdLoCo see only this and the names; the architectures are in
// gpt.hpp and llama.hpp, and make_decoder picks one from the config.
#pragma once

#include <torch/torch.h>

#include <cstdint>

#include "autoloco/config/config.hpp"

namespace autoloco {

class DecoderImpl : public torch::nn::Module {
 public:
  // idx: int64 [B, T] with T <= seq_len; returns logits [B, T, vocab_size].
  virtual torch::Tensor forward(const torch::Tensor& idx) = 0;

  const ModelConfig& config() const { return config_; }

 protected:
  // Throws ConfigError when a size is not positive or n_head does not divide d_model.
  explicit DecoderImpl(const ModelConfig& config);
  // Throws Error when idx is longer than the context.
  void check_length(const torch::Tensor& idx) const;

 private:
  ModelConfig config_;
};
TORCH_MODULE(Decoder);

// The architecture model.arch names, initialised (the caller seeds torch::manual_seed).
Decoder make_decoder(const ModelConfig& config);

// Mean cross-entropy in nats of logits [B, T, V] against targets int64 [B, T].
torch::Tensor lm_loss(const torch::Tensor& logits, const torch::Tensor& targets);

// Every trainable scalar of a built model, counted once (a tied head adds nothing).
int64_t parameter_count(const torch::nn::Module& model);

}  // namespace autoloco
