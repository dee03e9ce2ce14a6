// The Trainer's data: the streams of the mixture's sources, evaluation on every source's val
// split, and what metrics and summary.json say per source.
#include <cmath>

#include "autoloco/train/trainer.hpp"

#include "autoloco/model/decoder.hpp"
#include "autoloco/train/batch_step.hpp"
#include "autoloco/train/precision.hpp"
#include "autoloco/util/timer.hpp"
#include "autoloco/util/watchdog.hpp"

namespace autoloco {

std::vector<StreamSource> Trainer::stream_sources() const {
  const bool by_shard = config_.data.partition == "by_shard";
  const int dcs = elastic_ ? static_cast<int>(config_.elastic.dcs) : topo_.num_dcs;
  // by_shard splits each source's shards over the dcs, so every dc keeps the mixture.
  return data_->stream_sources([&](size_t s) {
    return by_shard ? shards_for_dc((*data_)[s].train->num_shards(), dc_id(), dcs)
                    : std::vector<size_t>{};
  });
}

double Trainer::evaluate() {
  torch::NoGradGuard no_grad;
  Decoder& model = instances_[0].model;  // every instance holds the anchor at a round's end
  // An overlapped replica trains on past the round's end, and fragments synced earlier in the
  // cycle have trained since: the model borrows the anchor.
  torch::Tensor own;
  if (sync_ && (config_.outer.overlap_steps > 0 || config_.outer.fragments > 1)) {
    own = params().values().clone();
    sync_->outer().anchor_into(params());
  }
  model->eval();
  const Timer timer;
  std::vector<double> sums;  // per source: loss sum, batches
  for (size_t s = 0; s < data_->size(); ++s) {
    const std::array<double, 2> own_sums = eval_split(model, *(*data_)[s].val);
    sums.insert(sums.end(), own_sums.begin(), own_sums.end());
  }
  eval_s_ = timer.seconds();
  score_tasks(model);
  tasks_s_ = timer.seconds() - eval_s_;
  model->train();
  if (own.defined()) params().values().copy_(own);
  const Watch watch("the evaluation's all-reduce");
  world_comm_->allreduce_sum(sums.data(), sums.size());
  eval_by_source_.clear();
  for (size_t s = 0; s < data_->size(); ++s)
    eval_by_source_.push_back(sums[2 * s] / sums[2 * s + 1]);
  return data_->mixed() ? data_->mean_loss(eval_by_source_) : eval_by_source_[0];
}

std::array<double, 2> Trainer::eval_split(Decoder& model, const TokenDataset& val) {
  std::array<double, 2> sums = {0.0, 0.0};
  // A fully sharded forward is collective inside the dc: then every rank runs as many as the
  // rank with the most batches, those past the end on a batch it does not count.
  const int64_t batches = config_.run.eval_batches;
  const bool collective = instances_[0].shard->mode() == ShardMode::full;
  const int64_t rounds = (batches + topo_.world_size - 1) / topo_.world_size;
  for (int64_t k = 0; k < rounds; ++k) {
    const int64_t i = topo_.world_rank + k * topo_.world_size;
    if (i >= batches && !collective) break;
    Batch batch = eval_batch(val, i % batches, config_.data.batch_size, config_.model.seq_len);
    AutocastScope autocast(device_, bf16_);
    const torch::Tensor logits = model->forward(to_device(batch.inputs, device_));
    const double loss = lm_loss(logits, to_device(batch.targets, device_)).item<double>();
    if (i >= batches) continue;
    sums[0] += loss;
    sums[1] += 1.0;
  }
  return sums;
}

std::vector<int64_t> Trainer::count_tokens_by_source() {
  std::vector<double> drawn(data_->size(), 0.0);
  for (const ModelInstance& inst : instances_) {
    const std::vector<uint64_t>& own = inst.stream->samples_by_source();
    for (size_t s = 0; s < own.size(); ++s)
      drawn[s] += static_cast<double>(own[s]);
  }
  const Watch watch("the all-reduce of the samples per source");
  world_comm_->allreduce_sum(drawn.data(), drawn.size());
  double total = 0.0;
  for (double d : drawn)
    total += d;
  std::vector<int64_t> out;
  for (double d : drawn)
    out.push_back(total > 0 ? std::llround(static_cast<double>(tokens_) * d / total) : 0);
  return out;
}

JsonObject Trainer::by_source(const std::vector<int64_t>& values) const {
  JsonObject out;
  for (size_t s = 0; s < values.size() && s < data_->size(); ++s)
    out.add((*data_)[s].name, values[s]);
  return out;
}

double Trainer::eval_bpb(double eval_loss) const {
  if (data_->mixed()) {
    return eval_by_source_.size() == data_->size() ? data_->bits_per_byte(eval_by_source_)
                                                   : static_cast<double>(NAN);
  }
  return data_->source_bits_per_byte(0, eval_loss);
}

// What summary.json says of each source: its weight, tokens trained and last evaluation.
std::vector<JsonObject> Trainer::sources_json() const {
  std::vector<JsonObject> out;
  for (size_t s = 0; s < data_->size(); ++s) {
    JsonObject one = JsonObject().add("name", (*data_)[s].name).add("weight", (*data_)[s].weight);
    if (s < tokens_by_source_.size()) one.add("tokens", tokens_by_source_[s]);
    if (s < eval_by_source_.size()) {
      one.add("final_eval_loss", eval_by_source_[s]);
      const double bpb = data_->source_bits_per_byte(s, eval_by_source_[s]);
      if (!std::isnan(bpb)) one.add("final_eval_bpb", bpb);
    }
    out.push_back(one);
  }
  return out;
}

// Each source's eval loss and, where its val split's bytes per token are known, bpb.
JsonObject Trainer::eval_by_source_json() const {
  JsonObject out;
  for (size_t s = 0; s < eval_by_source_.size(); ++s) {
    JsonObject one = JsonObject().add("loss", eval_by_source_[s]);
    const double bpb = data_->source_bits_per_byte(s, eval_by_source_[s]);
    if (!std::isnan(bpb)) one.add("bpb", bpb);
    out.add((*data_)[s].name, one);
  }
  return out;
}

}  // namespace autoloco
