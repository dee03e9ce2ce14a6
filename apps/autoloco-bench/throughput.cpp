// autoloco-bench --throughput: the Trainer's inner step against a plain LibTorch loop (same
// model, batch, threads, torch::optim::AdamW, clipping) in one process on synthetic tokens,
// alternating the two R times; reports the best tokens/s of each and their ratio, and every
// repeat's tokens/s with the medians and their ratio (the machine may be shared).
#include <mpi.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "autoloco/config/config.hpp"
#include "autoloco/data/shard.hpp"
#include "autoloco/data/stream.hpp"
#include "autoloco/model/decoder.hpp"
#include "autoloco/model/model_specs.hpp"
#include "autoloco/optim/flat_params.hpp"
#include "autoloco/optim/lr_schedule.hpp"
#include "autoloco/train/trainer.hpp"
#include "autoloco/util/json.hpp"
#include "autoloco/util/timer.hpp"
#include "bench.hpp"

namespace autoloco::bench {
namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

double time_trainer(Trainer& trainer, int64_t warmup, int64_t steps) {
  for (int64_t i = 0; i < warmup; ++i)
    trainer.train_step();
  Timer t;
  for (int64_t i = 0; i < steps; ++i)
    trainer.train_step();
  return t.seconds();
}

// The reference: the loop a LibTorch user would write by hand.
class PlainLoop {
 public:
  PlainLoop(const Config& c, const TokenDataset& data)
      : config_(c),
        model_(make_decoder(c.model)),
        stream_(data, c.model.seq_len, c.data.batch_size, 7, 0, 0, {}),
        optimizer_(param_groups(), torch::optim::AdamWOptions(c.inner.lr)
                                       .betas({c.inner.betas[0], c.inner.betas[1]})
                                       .eps(c.inner.eps)) {}

  double time(int64_t warmup, int64_t steps) {
    for (int64_t i = 0; i < warmup; ++i)
      step();
    Timer t;
    for (int64_t i = 0; i < steps; ++i)
      step();
    return t.seconds();
  }

 private:
  std::vector<torch::optim::OptimizerParamGroup> param_groups() {
    std::vector<torch::Tensor> decayed, other;
    for (const auto& p : model_->named_parameters()) {
      (is_decayed(p.key(), p.value()) ? decayed : other).push_back(p.value());
    }
    std::vector<torch::optim::OptimizerParamGroup> groups;
    groups.emplace_back(decayed, std::make_unique<torch::optim::AdamWOptions>(
                                     torch::optim::AdamWOptions(config_.inner.lr)
                                         .betas({config_.inner.betas[0], config_.inner.betas[1]})
                                         .eps(config_.inner.eps)
                                         .weight_decay(config_.inner.weight_decay)));
    groups.emplace_back(other, std::make_unique<torch::optim::AdamWOptions>(
                                   torch::optim::AdamWOptions(config_.inner.lr)
                                       .betas({config_.inner.betas[0], config_.inner.betas[1]})
                                       .eps(config_.inner.eps)
                                       .weight_decay(0.0)));
    return groups;
  }

  void step() {
    optimizer_.zero_grad();
    Batch b = stream_.next();
    torch::Tensor l = lm_loss(model_->forward(b.inputs), b.targets);
    l.backward();
    torch::nn::utils::clip_grad_norm_(model_->parameters(), config_.inner.grad_clip);
    const double lr = inner_lr(config_.inner, step_++, config_.run.steps);
    for (auto& g : optimizer_.param_groups()) {
      static_cast<torch::optim::AdamWOptions&>(g.options()).lr(lr);
    }
    optimizer_.step();
  }

  Config config_;
  Decoder model_;
  BatchStream stream_;
  torch::optim::AdamW optimizer_;
  int64_t step_ = 0;
};

}  // namespace

JsonObject model_json(const ModelConfig& model, int64_t parameters) {
  JsonObject out;
  out.add("arch", model.arch)
      .add("n_layer", model.n_layer)
      .add("n_head", model.n_head)
      .add("n_kv_head", kv_heads(model))
      .add("d_model", model.d_model)
      .add("seq_len", model.seq_len)
      .add("vocab_size", model.vocab_size)
      .add("parameters", parameters);
  return out;
}

std::string write_synthetic_shard(const std::string& dir, int64_t vocab) {
  std::filesystem::create_directories(dir);
  std::vector<uint32_t> tokens(1 << 20);
  uint64_t x = 0x9E3779B97F4A7C15ull;
  for (auto& t : tokens) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    t = static_cast<uint32_t>(x % static_cast<uint64_t>(vocab));
  }
  const std::string path = dir + "/bench_000.bin";
  write_shard(path, tokens, vocab > 65536 ? TokenWidth::u32 : TokenWidth::u16);
  return path;
}

Config single_process_config(const Args& args, const std::string& dir) {
  std::vector<std::string> overrides = args.overrides;
  const Config probe = args.config_path.empty() ? parse_config("", overrides)
                                                : load_config(args.config_path, overrides);
  const std::string shard = write_synthetic_shard(dir, probe.model.vocab_size);
  overrides.push_back("data.train=" + shard);
  overrides.push_back("data.val=" + shard);
  overrides.push_back("topology.ranks_per_dc=1");
  overrides.push_back("run.steps=1000000");
  return args.config_path.empty() ? parse_config("", overrides)
                                  : load_config(args.config_path, overrides);
}

int throughput(const Args& args) {
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("autoloco-bench-" + std::to_string(::getpid())))
          .string();
  const Config c = single_process_config(args, dir);
  Trainer trainer(c, MPI_COMM_SELF, {false, false});
  TokenDataset data(c.data.train, c.model.vocab_size, "bench");
  torch::manual_seed(static_cast<uint64_t>(c.run.seed));
  PlainLoop plain(c, data);

  const double tokens = static_cast<double>(args.steps * trainer.tokens_per_step());
  std::vector<double> trainer_repeats, plain_repeats;  // tokens/s
  for (int64_t r = 0; r < args.repeats; ++r) {
    plain_repeats.push_back(tokens / plain.time(r == 0 ? args.warmup : 0, args.steps));
    trainer_repeats.push_back(tokens / time_trainer(trainer, r == 0 ? args.warmup : 0, args.steps));
  }
  const double trainer_tps = *std::max_element(trainer_repeats.begin(), trainer_repeats.end());
  const double plain_tps = *std::max_element(plain_repeats.begin(), plain_repeats.end());
  const double trainer_median = median(trainer_repeats);
  const double plain_median = median(plain_repeats);
  const JsonObject model = model_json(c.model, parameter_count(*trainer.model()));
  JsonObject out;
  out.add("benchmark", "throughput")
      .add("libtorch", TORCH_VERSION)
      .add("model", model)
      .add("batch_size", c.data.batch_size)
      .add("threads", int64_t{torch::get_num_threads()})
      .add("steps", args.steps)
      .add("repeats", args.repeats)
      .add("trainer_tokens_per_s", trainer_tps)
      .add("plain_tokens_per_s", plain_tps)
      .add("ratio", trainer_tps / plain_tps)
      .add("trainer_tokens_per_s_repeats", trainer_repeats)
      .add("plain_tokens_per_s_repeats", plain_repeats)
      .add("trainer_tokens_per_s_median", trainer_median)
      .add("plain_tokens_per_s_median", plain_median)
      .add("ratio_median", trainer_median / plain_median);
  std::printf("%s\n", out.str().c_str());
  std::filesystem::remove_all(dir);
  return 0;
}

}  // namespace autoloco::bench
